import assert from "node:assert/strict";
import {
  createSession,
  gradients,
  Graph,
  nn,
  tensor,
  type Value,
} from "../../../workers/engine/mod.ts";
import { type CheckInput, gradCheck, lcg } from "./_gradcheck.ts";
import { TEST_EP } from "./_provider.ts";

/** float64 rule checks: [name, inputs, function]. Tiny random shapes, every coordinate. */
const CASES: [string, CheckInput[], (g: Graph, x: Value[]) => Value][] = [
  [
    "Add broadcasting both ways",
    [{ shape: [2, 1, 3] }, { shape: [4, 1] }],
    (g, [a, b]) => g.add(a, b),
  ],
  [
    "Sub with a broadcast right operand",
    [{ shape: [2, 3] }, { shape: [3] }],
    (g, [a, b]) => g.sub(a, b),
  ],
  [
    "Mul with a broadcast scalar-like operand",
    [{ shape: [2, 3] }, { shape: [1, 1] }],
    (g, [a, b]) => g.mul(a, b),
  ],
  ["Div", [{ shape: [2, 3] }, { shape: [2, 3], positive: true }], (g, [a, b]) => g.div(a, b)],
  ["Neg", [{ shape: [5] }], (g, [a]) => g.neg(a)],
  ["Exp", [{ shape: [2, 3] }], (g, [a]) => g.exp(a)],
  ["Log", [{ shape: [2, 3], positive: true }], (g, [a]) => g.log(a)],
  ["Sqrt", [{ shape: [2, 3], positive: true }], (g, [a]) => g.sqrt(a)],
  ["Reciprocal", [{ shape: [2, 3], positive: true }], (g, [a]) => g.reciprocal(a)],
  ["Pow with a constant exponent", [{ shape: [2, 3], positive: true }], (g, [a]) => g.pow(a, 3)],
  ["Sigmoid", [{ shape: [2, 3] }], (g, [a]) => g.sigmoid(a)],
  ["Tanh", [{ shape: [2, 3] }], (g, [a]) => g.tanh(a)],
  ["Identity", [{ shape: [3] }], (g, [a]) => g.identity(a)],
  [
    "Where routing to both branches",
    [{ shape: [2, 3] }, { shape: [3] }],
    (g, [a, b]) => g.where(g.compare("Greater", a, g.scalar(0)), a, b),
  ],
  [
    "MatMul batched with broadcast batch dims",
    [{ shape: [2, 1, 3, 4] }, { shape: [3, 4, 2] }],
    (g, [a, b]) => g.matmul(a, b),
  ],
  [
    "MatMul against a shared weight matrix",
    [{ shape: [2, 3, 4] }, { shape: [4, 5] }],
    (g, [a, b]) => g.matmul(a, b),
  ],
  [
    "Gemm plain with bias",
    [{ shape: [3, 4] }, { shape: [4, 2] }, { shape: [2] }],
    (g, [a, b, c]) => g.gemm(a, b, { c }),
  ],
  [
    "Gemm transA",
    [{ shape: [4, 3] }, { shape: [4, 2] }],
    (g, [a, b]) => g.gemm(a, b, { transA: true }),
  ],
  [
    "Gemm transB",
    [{ shape: [3, 4] }, { shape: [2, 4] }],
    (g, [a, b]) => g.gemm(a, b, { transB: true }),
  ],
  [
    "Gemm transA transB",
    [{ shape: [4, 3] }, { shape: [2, 4] }],
    (g, [a, b]) => g.gemm(a, b, { transA: true, transB: true }),
  ],
  ["Reshape", [{ shape: [2, 6] }], (g, [a]) => g.reshape(a, [3, 4])],
  ["Transpose", [{ shape: [2, 3, 4] }], (g, [a]) => g.transpose(a, [2, 0, 1])],
  ["Expand", [{ shape: [3, 1] }], (g, [a]) => g.expand(a, [2, 3, 4])],
  ["Split with one unused piece", [{ shape: [2, 5] }], (g, [a]) => g.split(a, 1, [2, 1, 2])[2]],
  ["Concat", [{ shape: [2, 2] }, { shape: [2, 3] }], (g, [a, b]) => g.concat([a, b], 1)],
  ["ReduceSum keeping dims", [{ shape: [2, 3, 4] }], (g, [a]) => g.reduceSum(a, [0, 2], true)],
  ["ReduceSum dropping dims", [{ shape: [2, 3, 4] }], (g, [a]) => g.reduceSum(a, [1], false)],
  ["ReduceMean", [{ shape: [2, 3, 4] }], (g, [a]) => g.reduceMean(a, [-1], false)],
  ["Softmax", [{ shape: [2, 5] }], (g, [a]) => g.softmax(a, -1)],
  ["LogSoftmax", [{ shape: [2, 5] }], (g, [a]) => g.logSoftmax(a, 1)],
  [
    "Gather with duplicate ids",
    [{ shape: [5, 3] }],
    (g, [t]) =>
      g.gather(t, g.constant(BigInt64Array.from([1n, 3n, 1n, 1n, 0n, 3n]), [2, 3], "int64")),
  ],
  [
    "GatherElements with duplicate indices",
    [{ shape: [3, 4] }],
    (g, [x]) =>
      g.gatherElements(
        x,
        g.constant(BigInt64Array.from([0n, 0n, 3n, 2n, 2n, 1n]), [3, 2], "int64"),
        1,
      ),
  ],
  [
    "a value used twice (fan-in is summed)",
    [{ shape: [2, 3] }],
    (g, [a]) => g.mul(g.exp(a), g.add(a, a)),
  ],
  [
    "RMSNorm composite",
    [{ shape: [2, 3, 4] }, { shape: [4] }],
    (g, [x, w]) => nn.rmsNorm(g, x, w, 1e-6),
  ],
  [
    "RMSNorm composite over heads with one shared gain",
    [{ shape: [2, 2, 3, 4] }, { shape: [4] }],
    (g, [x, w]) => nn.rmsNorm(g, x, w, 1e-6),
  ],
  [
    "RMSNorm composite whose input is also used elsewhere",
    [{ shape: [2, 5] }, { shape: [5] }],
    (g, [x, w]) => g.mul(nn.rmsNorm(g, x, w, 1e-6), g.exp(x)),
  ],
  ["SiLU composite", [{ shape: [2, 4] }], (g, [x]) => nn.silu(g, x)],
  [
    "SiLU composite under a product",
    [{ shape: [2, 4] }, { shape: [2, 4] }],
    (g, [x, u]) => g.mul(nn.silu(g, x), u),
  ],
  [
    "linear composite with bias",
    [{ shape: [2, 3, 4] }, { shape: [5, 4] }, { shape: [5] }],
    (g, [x, w, b]) => nn.linear(g, x, w, b),
  ],
  ["clip composite", [{ shape: [3, 4] }], (g, [x]) => nn.clip(g, x, g.scalar(-0.4), g.scalar(0.5))],
  ["entropy of log-softmax", [{ shape: [2, 5] }], (g, [x]) => nn.entropy(g, g.logSoftmax(x))],
  [
    "masked mean",
    [{ shape: [2, 3] }],
    (g, [x]) => nn.maskedMean(g, x, g.floats([1, 0, 1, 1, 1, 0], [2, 3])),
  ],
  [
    "log-softmax pick composite",
    [{ shape: [2, 3, 5] }],
    (g, [x]) =>
      nn.logSoftmaxPick(
        g,
        x,
        g.constant(BigInt64Array.from([4n, 0n, 2n, 2n, 1n, 3n]), [2, 3], "int64"),
      ).picked,
  ],
  [
    "log-softmax pick composite beside the entropy of the same log-probs",
    [{ shape: [3, 4] }],
    (g, [x]) => {
      const r = nn.logSoftmaxPick(g, x, g.constant(BigInt64Array.from([3n, 0n, 3n]), [3], "int64"));
      return g.add(r.picked, g.mul(nn.entropy(g, r.logp), g.scalar(0.3)));
    },
  ],
  [
    "picked log-probs",
    [{ shape: [2, 3, 5] }],
    (g, [x]) =>
      nn.pickLogProbs(
        g,
        g.logSoftmax(x),
        g.constant(BigInt64Array.from([4n, 0n, 2n, 2n, 1n, 3n]), [2, 3], "int64"),
      ),
  ],
];

for (const [name, inputs, f] of CASES) {
  Deno.test(`backward rule for ${name} matches float64 central differences`, async () => {
    const r = await gradCheck(inputs, f);
    assert.ok(r.checked > 0, "some coordinates must have a non-tiny gradient");
    assert.ok(r.maxRelErr < 1e-5, `max rel err ${r.maxRelErr} at ${r.worst}`);
  });
}

Deno.test("Erf and GELU backward match float32 central differences within 2e-2", async () => {
  // onnxruntime has no float64 Erf kernel: float32 with eps 1e-2, FD noise ~1e-3 relative.
  const r = await gradCheck(
    [{ shape: [2, 4] }],
    (g, [x]) => nn.gelu(g, g.mul(x, g.scalar(2, "float32"))),
    {
      dtype: "float32",
      eps: 1e-2,
      floor: 1e-3,
    },
  );
  assert.ok(r.maxRelErr < 2e-2, `max rel err ${r.maxRelErr} at ${r.worst}`);
});

Deno.test("Gather's gradient on 2 threads sums duplicate ids in index order, the same on every run", async () => {
  // 4096 lookups of 50 rows (~80 per row), large enough that onnxruntime splits the work.
  const [rows, width, n] = [50, 64, 4096];
  const rnd = lcg(11);
  const ids = BigInt64Array.from({ length: n }, () => BigInt(Math.floor(rnd() * rows)));
  const w = Float32Array.from({ length: n * width }, () => rnd() * 2 - 1);
  const g = new Graph("gather_grad", "float32");
  const table = g.input("table", [rows, width], { requiresGrad: true });
  const weight = g.input("w", [n, width]);
  const y = g.gather(table, g.constant(ids, [n], "int64")); // (n, width)
  const loss = g.reduceSum(g.mul(y, weight), [0, 1], false);
  g.output(loss, "loss");
  g.output(gradients(g, loss, [table])[0], "grad");
  // d loss / d table[r] = Σ_{i: ids[i] = r} w[i], added in float32 in index order.
  const expected = new Float32Array(rows * width);
  for (let i = 0; i < n; i++) {
    const r = Number(ids[i]);
    for (let j = 0; j < width; j++) {
      expected[r * width + j] = Math.fround(expected[r * width + j] + w[i * width + j]);
    }
  }
  const session = await createSession(g.toModel(), { threads: 2, ep: TEST_EP });
  try {
    for (let run = 0; run < 12; run++) {
      const out = await session.run({
        table: tensor("float32", new Float32Array(rows * width), [rows, width]),
        w: tensor("float32", w, [n, width]),
      });
      assert.deepEqual(out.grad.data as Float32Array, expected, `run ${run}`);
    }
  } finally {
    await session.release();
  }
});

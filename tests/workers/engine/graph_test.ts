import assert from "node:assert/strict";
import {
  createSession,
  gradients,
  Graph,
  GraphBuildError,
  tensor,
} from "../../../workers/engine/mod.ts";
import { TEST_EP } from "./_provider.ts";

Deno.test("broadcasting incompatible shapes fails at build time naming both shapes", () => {
  const g = new Graph("t");
  const a = g.input("a", [2, 3]), b = g.input("b", [4]);
  assert.throws(
    () => g.add(a, b),
    (e: Error) => e instanceof GraphBuildError && /\(2, 3\) and \(4,\)/.test(e.message),
  );
});

Deno.test("a matmul with mismatched inner dims fails at build time", () => {
  const g = new Graph("t");
  assert.throws(
    () => g.matmul(g.input("a", [2, 3]), g.input("b", [4, 5])),
    /inner dims must match/,
  );
});

Deno.test("a reshape that changes the element count fails at build time", () => {
  const g = new Graph("t");
  assert.throws(() => g.reshape(g.input("a", [2, 3]), [4, 2]), /element counts must match/);
});

Deno.test("mixing float32 and float64 operands fails at build time", () => {
  const g = new Graph("t");
  const a = g.input("a", [2]), b = g.input("b", [2], { dtype: "float64" });
  assert.throws(() => g.mul(a, b), /dtypes must match: current dtypes are float32 and float64/);
});

Deno.test("symbolic dims broadcast by name and a symbolic dim against a static one is rejected", () => {
  const g = new Graph("t");
  const a = g.input("a", ["B", "T", 4]), b = g.input("b", [1, "T", 4]);
  assert.deepEqual(g.add(a, b).shape, ["B", "T", 4]);
  assert.throws(() => g.add(a, g.input("c", ["B", 3, 4])), GraphBuildError);
});

Deno.test("the gradient of a non-scalar loss or of an unused input is refused", () => {
  const g = new Graph("t");
  const a = g.input("a", [2], { requiresGrad: true }),
    b = g.input("b", [2], { requiresGrad: true });
  assert.throws(() => gradients(g, g.exp(a), [a]), /loss must be a scalar/);
  const loss = g.reduceSum(g.exp(a), [0], false);
  assert.throws(() => gradients(g, loss, [b]), /must depend on it/);
});

Deno.test("a graph with symbolic dims runs at several run-time sizes", async () => {
  const g = new Graph("t");
  const x = g.input("x", ["B", "S", 3]);
  const w = g.input("w", [2, 3]);
  const y = g.matmul(x, g.transpose(w, [1, 0]));
  g.output(g.reshape(y, ["B", "BS2"]), "y");
  const s = await createSession(g.toModel(), { ep: TEST_EP });
  for (const [b, sLen] of [[1, 2], [3, 5]]) {
    const r = await s.run({
      x: tensor("float32", new Float32Array(b * sLen * 3).fill(1), [b, sLen, 3]),
      w: tensor("float32", Float32Array.from([1, 2, 3, 4, 5, 6]), [2, 3]),
    });
    assert.deepEqual(r.y.dims, [b, sLen * 2]);
    assert.deepEqual(Array.from(r.y.data as Float32Array).slice(0, 2), [6, 15]);
  }
  await s.release();
});

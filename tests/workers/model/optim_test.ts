import assert from "node:assert/strict";
import type { Parameters, ParameterSpec } from "../../../workers/model/config.ts";
import {
  AdamW,
  clipGradNorm,
  learningRate,
  OptimizerError,
  readOptimizerState,
  writeOptimizerState,
} from "../../../workers/model/optim.ts";
import {
  type AdamWScalars,
  CHUNK,
  MAX_TENSOR_ELEMENTS,
  WasmMoments,
} from "../../../workers/model/_adamw_wasm.ts";
import { Rng } from "../../../workers/model/sampling.ts";

const specs: ParameterSpec[] = [
  { name: "w", shape: [2, 2] }, // 2-D: decayed
  { name: "b", shape: [2] }, // 1-D: not decayed
];

function close(actual: ArrayLike<number>, expected: ArrayLike<number>, tol = 1e-6): void {
  assert.equal(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) {
    assert.ok(
      Math.abs(actual[i] - expected[i]) <= tol * Math.max(1, Math.abs(expected[i])),
      `index ${i}: ${actual[i]} vs ${expected[i]}`,
    );
  }
}

/** The AdamW formula written out for one scalar (torch.optim.AdamW, non-amsgrad). */
function adamwScalar(
  p: number,
  gs: number[],
  o: { lr: number; b1: number; b2: number; eps: number; wd: number },
): number {
  let m = 0;
  let v = 0;
  gs.forEach((g, k) => {
    const t = k + 1;
    p = p * (1 - o.lr * o.wd);
    m = o.b1 * m + (1 - o.b1) * g;
    v = o.b2 * v + (1 - o.b2) * g * g;
    const mHat = m / (1 - o.b1 ** t);
    const vHat = v / (1 - o.b2 ** t);
    p = p - o.lr * mHat / (Math.sqrt(vHat) + o.eps);
  });
  return p;
}

Deno.test("two AdamW steps match the hand-computed formula, with decay only on 2-D tensors", () => {
  const opts = { lr: 0.1, b1: 0.9, b2: 0.999, eps: 1e-8, wd: 0.1 };
  const w0 = [0.5, -1, 2, 0];
  const b0 = [1, -0.5];
  const g1 = { w: [0.1, -0.2, 0.3, 0.0], b: [1, -2] };
  const g2 = { w: [-0.4, 0.5, 0.05, 1.0], b: [0.5, 0.5] };
  const params: Parameters = new Map([["w", new Float32Array(w0)], ["b", new Float32Array(b0)]]);
  const opt = new AdamW(specs, {
    lr: opts.lr,
    betas: [opts.b1, opts.b2],
    eps: opts.eps,
    weightDecay: opts.wd,
  });
  opt.step(params, new Map([["w", new Float32Array(g1.w)], ["b", new Float32Array(g1.b)]]));
  opt.step(params, new Map([["w", new Float32Array(g2.w)], ["b", new Float32Array(g2.b)]]));
  // Single-precision inputs: compare against the formula on the same float32-rounded numbers.
  const f = (x: number) => Math.fround(x);
  const expectedW = w0.map((p, i) => adamwScalar(p, [f(g1.w[i]), f(g2.w[i])], opts));
  const expectedB = b0.map((p, i) => adamwScalar(p, [f(g1.b[i]), f(g2.b[i])], { ...opts, wd: 0 }));
  close(params.get("w")!, expectedW);
  close(params.get("b")!, expectedB);
  assert.equal(opt.stepCount, 2);
  // First step of Adam moves each element by ≈ lr·sign(g) (plus decay): a sanity anchor.
  const one = new AdamW([{ name: "x", shape: [1] }], { lr: 0.1 });
  const x = new Map([["x", new Float32Array([3])]]);
  one.step(x, new Map([["x", new Float32Array([-7])]]));
  close(x.get("x")!, [3.1]);
});

Deno.test("a per-step learning rate overrides the default", () => {
  const opt = new AdamW([{ name: "x", shape: [1] }], { lr: 1, weightDecay: 0 });
  const x = new Map([["x", new Float32Array([0])]]);
  opt.step(x, new Map([["x", new Float32Array([2])]]), 0.01);
  close(x.get("x")!, [-0.01]);
});

Deno.test("AdamW state survives a safetensors round trip and continues identically", () => {
  const make = () =>
    new Map([["w", new Float32Array([0.5, -1, 2, 0])], ["b", new Float32Array([1, -0.5])]]);
  const grads = (k: number) =>
    new Map([["w", new Float32Array([k, -k, 0.5, 1])], ["b", new Float32Array([0.1 * k, 2])]]);
  const a = new AdamW(specs, { lr: 0.05 });
  const pa = make();
  a.step(pa, grads(1));
  const bytes = writeOptimizerState(a.state(), specs);
  const b = new AdamW(specs, { lr: 0.05 });
  b.load(readOptimizerState(bytes, specs));
  assert.equal(b.stepCount, 1);
  const pb = new Map([...pa].map(([k, v]) => [k, v.slice()]));
  a.step(pa, grads(2));
  b.step(pb, grads(2));
  assert.deepEqual(pb, pa);
});

/**
 * The loop AdamW.step ran before the WebAssembly kernel (main 84c4cd2), verbatim: the reference.
 */
function mainLoop(
  p: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  s: AdamWScalars,
): void {
  const { b1, b2, stepSize, bc2Sqrt, decay } = s;
  for (let i = 0; i < p.length; i++) {
    const gi = g[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    p[i] = p[i] * decay - stepSize * m[i] / (Math.sqrt(v[i]) / bc2Sqrt + s.eps);
  }
}

for (const maxKernelElements of [undefined, CHUNK]) {
  const where = maxKernelElements === undefined
    ? "WebAssembly update"
    : "update with the tensors over the kernel's limit in JS";
  Deno.test(`AdamW's ${where} equals the float64 JS loop bit for bit, chunk edges included`, () => {
    // Lengths below, at and across the kernel's chunk, odd tails, both decayed and 1-D tensors.
    const mySpecs: ParameterSpec[] = [
      { name: "one", shape: [1] },
      { name: "odd", shape: [7] },
      { name: "chunk", shape: [2, CHUNK / 2] },
      { name: "across", shape: [3, 1367] }, // 4,101 = CHUNK + 5
      { name: "two", shape: [2 * CHUNK + 3] },
    ];
    const rng = new Rng(11);
    const random = (n: number, scale: number) =>
      Float32Array.from({ length: n }, () => scale * (rng.next() - 0.5));
    const sizes = mySpecs.map((s) => s.shape.reduce((a, b) => a * b, 1));
    const p0 = new Map(mySpecs.map((s, k) => [s.name, random(sizes[k], 2)]));
    const gradsAt = (step: number) =>
      new Map(mySpecs.map((s, k) => {
        const g = random(sizes[k], 10 ** (step - 3));
        // Zero, subnormal, huge (g² overflows float32 in v) and negative-zero gradients.
        g.set([0, 1e-40, 3e30, -0].slice(0, g.length - 1), 1); // after a random g[0]
        return [s.name, g];
      }));
    const hyper = { lr: 0.003, betas: [0.85, 0.99] as [number, number], eps: 1e-7, wd: 0.1 };
    const opt = new AdamW(mySpecs, { ...hyper, weightDecay: hyper.wd, maxKernelElements });
    const params = new Map([...p0].map(([k, v]) => [k, v.slice()]));
    const ref = new Map([...p0].map(([k, v]) => [k, v.slice()]));
    const m = new Map(mySpecs.map((s, k) => [s.name, new Float32Array(sizes[k])]));
    const v = new Map(mySpecs.map((s, k) => [s.name, new Float32Array(sizes[k])]));
    const [b1, b2] = hyper.betas;
    for (let t = 1; t <= 3; t++) {
      const grads = gradsAt(t), lr = hyper.lr * t;
      opt.step(params, grads, lr);
      const stepSize = lr / (1 - b1 ** t), bc2Sqrt = Math.sqrt(1 - b2 ** t);
      for (const s of mySpecs) {
        const decay = s.shape.length >= 2 ? 1 - lr * hyper.wd : 1;
        const [p, g, mi, vi] = [ref, grads, m, v].map((x) => x.get(s.name)!);
        mainLoop(p, g, mi, vi, { b1, b2, eps: hyper.eps, stepSize, bc2Sqrt, decay });
      }
    }
    const state = opt.state();
    for (const s of mySpecs) {
      assert.deepEqual(params.get(s.name), ref.get(s.name), s.name);
      assert.deepEqual(state.expAvg.get(s.name), m.get(s.name), `${s.name} exp_avg`);
      assert.deepEqual(state.expAvgSq.get(s.name), v.get(s.name), `${s.name} exp_avg_sq`);
      assert.notDeepEqual(params.get(s.name), p0.get(s.name)); // it did move
    }
    assert.equal(state.expAvgSq.get("two")![3], Infinity); // the overflow case was exercised
    // a state round trip keeps both kinds of tensor
    const again = new AdamW(mySpecs, { ...hyper, weightDecay: hyper.wd, maxKernelElements });
    again.load(state);
    assert.deepEqual(again.state(), state);
  });
}

Deno.test("moments split over several WebAssembly memories update each tensor as the JS loop", () => {
  // A group cap of CHUNK + 4 elements of moments: [5], [CHUNK + 1], [3, 0] and [2·CHUNK] (alone,
  // over the cap) land in four memories.
  const sizes = [5, CHUNK + 1, 3, 0, 2 * CHUNK];
  const moments = new WasmMoments(sizes, { groupBytes: 8 * (CHUNK + 4) });
  const rng = new Rng(5);
  const random = (n: number) => Float32Array.from({ length: n }, () => rng.next() - 0.5);
  const ps = sizes.map(random), ref = ps.map((p) => p.slice());
  const ms = sizes.map((n) => new Float32Array(n)), vs = sizes.map((n) => new Float32Array(n));
  for (let t = 1; t <= 2; t++) {
    const s = { b1: 0.9, b2: 0.999, eps: 1e-8, stepSize: 0.01 / (1 - 0.9 ** t), decay: 0.999 };
    const scalars = { ...s, bc2Sqrt: Math.sqrt(1 - 0.999 ** t) };
    sizes.forEach((n, k) => {
      const g = random(n);
      moments.update(k, ps[k], g, scalars);
      mainLoop(ref[k], g, ms[k], vs[k], scalars);
    });
  }
  sizes.forEach((n, k) => {
    assert.deepEqual(ps[k], ref[k], `p of tensor ${k}`);
    assert.deepEqual(moments.expAvg(k), ms[k], `m of tensor ${k}`);
    assert.deepEqual(moments.expAvgSq(k), vs[k], `v of tensor ${k}`);
    assert.equal(moments.expAvg(k).length, n);
  });
  assert.throws(() => new WasmMoments([MAX_TENSOR_ELEMENTS + 1]), RangeError);
});

Deno.test("AdamW rejects missing gradients and malformed state with clear errors", () => {
  assert.throws(
    () => new AdamW(specs, { lr: 0.1, maxKernelElements: MAX_TENSOR_ELEMENTS + 1 }),
    /maxKernelElements must be an integer in \[0, 536866816\]: current value is 536866817/,
  );
  const opt = new AdamW(specs, { lr: 0.1 });
  const params = new Map([["w", new Float32Array(4)], ["b", new Float32Array(2)]]);
  assert.throws(
    () => opt.step(params, new Map([["w", new Float32Array(4)]])),
    /gradient b must hold 2 values: current length is missing/,
  );
  assert.throws(
    () => opt.load({ step: -1, expAvg: new Map(), expAvgSq: new Map() }),
    OptimizerError,
  );
  assert.throws(() => new AdamW(specs, { lr: 0.1, betas: [1, 0.9] }), /betas must be in \[0, 1\)/);
});

Deno.test("clipGradNorm returns the global norm and scales only when above the limit", () => {
  const grads = new Map([["a", new Float32Array([3, 0])], ["b", new Float32Array([4])]]);
  assert.equal(clipGradNorm(grads, 10), 5);
  close(grads.get("a")!, [3, 0]);
  assert.equal(clipGradNorm(grads, 1), 5);
  close(grads.get("a")!, [0.6, 0], 1e-5);
  close(grads.get("b")!, [0.8], 1e-5);
  close([clipGradNorm(grads, 100)], [1], 1e-5);
  const bad = new Map([["a", new Float32Array([NaN, 1])]]);
  assert.ok(Number.isNaN(clipGradNorm(bad, 1)));
  assert.throws(() => clipGradNorm(grads, 0), /maxNorm must be > 0/);
});

Deno.test("schedules: constant, linear warmup, and cosine decay to the floor", () => {
  const base = { lr: 1, warmupSteps: 4, totalSteps: 14 };
  assert.equal(learningRate(0, { ...base, kind: "constant" }), 1);
  assert.deepEqual([0, 1, 2, 3, 4, 100].map((s) => learningRate(s, { ...base, kind: "warmup" })), [
    0.25,
    0.5,
    0.75,
    1,
    1,
    1,
  ]);
  const cos = { ...base, kind: "cosine" as const, minLr: 0.1 };
  assert.equal(learningRate(1, cos), 0.5);
  assert.equal(learningRate(4, cos), 1);
  close([learningRate(9, cos)], [0.55]);
  close([learningRate(14, cos)], [0.1]);
  close([learningRate(50, cos)], [0.1]);
  for (let s = 5; s < 14; s++) assert.ok(learningRate(s, cos) < learningRate(s - 1, cos));
  assert.throws(() => learningRate(-1, cos), OptimizerError);
});

Deno.test("AdamW matches torch.optim.AdamW over three steps (skipped without torch)", async (t) => {
  const probe = new Deno.Command("/usr/bin/python3", {
    args: ["-c", "import torch"],
    stderr: "null",
  });
  const hasTorch = await probe.output().then((o) => o.success, () => false);
  if (!hasTorch) {
    await t.step({ name: "torch is not installed", ignore: true, fn: () => {} });
    return;
  }
  const w0 = [0.3, -0.7, 1.5, 0.01, -2, 0.25];
  const b0 = [0.1, -0.2];
  const gs = [1, 2, 3].map((k) => ({
    w: w0.map((_, i) => Math.sin(k * 1.7 + i) * 0.5),
    b: b0.map((_, i) => Math.cos(k + i)),
  }));
  const script = `
import json, sys, torch
d = json.loads(sys.argv[1])
w = torch.nn.Parameter(torch.tensor(d["w0"], dtype=torch.float32).reshape(2, 3))
b = torch.nn.Parameter(torch.tensor(d["b0"], dtype=torch.float32))
opt = torch.optim.AdamW([{"params": [w], "weight_decay": 0.05}, {"params": [b], "weight_decay": 0.0}],
                        lr=0.02, betas=(0.8, 0.95), eps=1e-6)
for g in d["gs"]:
    w.grad = torch.tensor(g["w"], dtype=torch.float32).reshape(2, 3)
    b.grad = torch.tensor(g["b"], dtype=torch.float32)
    opt.step()
print(json.dumps({"w": w.detach().flatten().tolist(), "b": b.detach().tolist()}))
`;
  const run = new Deno.Command("/usr/bin/python3", {
    args: ["-c", script, JSON.stringify({ w0, b0, gs })],
    stdout: "piped",
  });
  const expected = JSON.parse(new TextDecoder().decode((await run.output()).stdout));
  const mySpecs = [{ name: "w", shape: [2, 3] }, { name: "b", shape: [2] }];
  const opt = new AdamW(mySpecs, { lr: 0.02, betas: [0.8, 0.95], eps: 1e-6, weightDecay: 0.05 });
  const params = new Map([["w", new Float32Array(w0)], ["b", new Float32Array(b0)]]);
  for (const g of gs) {
    opt.step(params, new Map([["w", new Float32Array(g.w)], ["b", new Float32Array(g.b)]]));
  }
  close(params.get("w")!, expected.w, 1e-6);
  close(params.get("b")!, expected.b, 1e-6);
});

/**
 * Central finite-difference checks of graph gradients. A function under test maps inputs to
 * any tensor y; the checked loss is Σ y ⊙ w with fixed random w, so every output element
 * matters. Gradients come from `gradients()` in the same graph; finite differences from
 * re-running the loss with one coordinate moved by ±eps.
 */
import {
  createSession,
  type DType,
  gradients,
  Graph,
  tensor,
  type Value,
} from "../../../workers/engine/mod.ts";
import { TEST_EP } from "./_provider.ts";

/** A float input of the function under test. */
export interface CheckInput {
  shape: number[];
  /** Draw values in (0.5, 1.5) instead of (−1, 1) (for log, sqrt, reciprocal). */
  positive?: boolean;
}

/** Deterministic uniform numbers in [0, 1) (LCG). */
export function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Result of a check: worst relative error over coordinates with non-tiny gradient. */
export interface CheckResult {
  maxRelErr: number;
  checked: number;
  worst: string;
}

/**
 * Check d(Σ f(x)⊙w)/dx for every coordinate of every input against central differences.
 * `floor` skips coordinates where both gradients are below it in magnitude.
 */
export async function gradCheck(
  inputs: CheckInput[],
  f: (g: Graph, xs: Value[]) => Value,
  opts: { dtype?: DType; eps?: number; floor?: number; seed?: number } = {},
): Promise<CheckResult> {
  const dtype = opts.dtype ?? "float64";
  const eps = opts.eps ?? 1e-6;
  const rnd = lcg(opts.seed ?? 7);
  const g = new Graph("gradcheck", dtype);
  const xs = inputs.map((x, i) => g.input(`x${i}`, x.shape, { requiresGrad: true }));
  const y = f(g, xs);
  const shape = y.shape as number[];
  const n = shape.reduce((a, b) => a * b, 1);
  const w = g.floats(Array.from({ length: n }, () => rnd() * 2 - 1), shape);
  const loss = g.reduceSum(g.mul(y, w), [...shape.keys()], false);
  g.output(loss, "loss");
  gradients(g, loss, xs).forEach((d, i) => g.output(d, `grad${i}`));
  const session = await createSession(g.toModel(), { ep: TEST_EP });
  const data = inputs.map((x) => {
    const len = x.shape.reduce((a, b) => a * b, 1);
    return Float64Array.from({ length: len }, () => (x.positive ? 0.5 + rnd() : rnd() * 2 - 1));
  });
  const run = async () => {
    const feeds = Object.fromEntries(data.map((d, i) => [
      `x${i}`,
      dtype === "float64"
        ? tensor("float64", d, inputs[i].shape)
        : tensor("float32", Float32Array.from(d), inputs[i].shape),
    ]));
    return await session.run(feeds);
  };
  const base = await run();
  const result: CheckResult = { maxRelErr: 0, checked: 0, worst: "" };
  for (let i = 0; i < data.length; i++) {
    const an = base[`grad${i}`].data as Float64Array;
    for (let k = 0; k < data[i].length; k++) {
      const old = data[i][k];
      data[i][k] = old + eps;
      const lp = Number((await run()).loss.data[0]);
      data[i][k] = old - eps;
      const lm = Number((await run()).loss.data[0]);
      data[i][k] = old;
      const fd = (lp - lm) / (2 * eps);
      const scale = Math.max(Math.abs(fd), Math.abs(an[k]));
      if (scale < (opts.floor ?? 1e-7)) continue;
      const rel = Math.abs(fd - an[k]) / scale;
      result.checked++;
      if (rel > result.maxRelErr) {
        result.maxRelErr = rel;
        result.worst = `x${i}[${k}] fd=${fd} analytic=${an[k]}`;
      }
    }
  }
  await session.release();
  return result;
}

/**
 * Composite layers built from the graph's primitives. Most have no backward rules of their
 * own: autodiff differentiates the primitives they are made of. RMSNorm and SiLU, which run
 * on every layer, are recorded as one op each (`Graph.composite`) with a hand-derived rule
 * (autodiff.ts): the same forward nodes, and a backward of 4 (SiLU) and 8 (RMSNorm with its
 * gain) ops over the activations instead of 6 and 13. With `logSoftmaxPick` that cut the
 * elements the 23.5M benchmark model's train step reads and writes outside its GEMMs by 14%
 * (bench/tools/engine_profile.ts; bench/RESULTS.md, "Where a train step's time goes").
 */
import type { Graph, Value } from "./graph.ts";
import { isStatic } from "./shape.ts";

/**
 * `y = x · W̃ᵀ + b` over the last dim, with `weight` in torch.nn.Linear layout (out, in).
 * Static inputs are flattened to rows for one Gemm(transB); symbolic ones use MatMul with a
 * transposed weight (onnxruntime fuses the transpose into the kernel).
 */
export function linear(g: Graph, x: Value, weight: Value, bias?: Value): Value {
  const [out, inF] = weight.shape;
  const lead = x.shape.slice(0, -1);
  if (isStatic(x.shape)) {
    const rows = lead.reduce<number>((p, d) => p * Number(d), 1);
    const x2 = x.rank === 2 ? x : g.reshape(x, [rows, inF]); // (N, in)
    const y2 = g.gemm(x2, weight, { transB: true, c: bias }); // (N, out)
    return x.rank === 2 ? y2 : g.reshape(y2, [...lead, out]); // (…, out)
  }
  const y = g.matmul(x, g.transpose(weight, [1, 0])); // (…, out)
  return bias ? g.add(y, bias) : y;
}

/** RMSNorm (Zhang & Sennrich 2019; HF LlamaRMSNorm): `x / √(mean(x²) + eps) · weight`. */
export function rmsNorm(g: Graph, x: Value, weight: Value, eps: number): Value {
  // Written as Pow → ReduceMean → Add → Sqrt → Div → Mul, the pattern onnxruntime fuses into
  // one SimplifiedLayerNormalization kernel in forward-only graphs.
  const [normed, rms, y] = g.withoutTape(() => {
    const ms = g.reduceMean(g.pow(x, 2), [-1], true); // (…, 1)
    const rms = g.sqrt(g.add(ms, g.scalar(eps, x.dtype))); // (…, 1)
    const normed = g.div(x, rms); // (…, C)
    return [normed, rms, g.mul(normed, weight)];
  });
  return g.composite("RMSNorm", [x, weight], y, { normed, rms });
}

/** SiLU / swish: `x · σ(x)`. */
export function silu(g: Graph, x: Value): Value {
  const [sigmoid, y] = g.withoutTape(() => {
    const s = g.sigmoid(x);
    return [s, g.mul(x, s)];
  });
  return g.composite("SiLU", [x], y, { sigmoid });
}

/** Exact GELU: `0.5 · x · (1 + erf(x / √2))` (float32 only: onnxruntime has no float64 Erf). */
export function gelu(g: Graph, x: Value): Value {
  const e = g.erf(g.mul(x, g.scalar(Math.SQRT1_2, x.dtype)));
  return g.mul(g.mul(x, g.scalar(0.5, x.dtype)), g.add(e, g.scalar(1, x.dtype)));
}

/** Elementwise minimum (gradient to the smaller operand; to `a` on ties). */
export function minimum(g: Graph, a: Value, b: Value): Value {
  return g.where(g.compare("LessOrEqual", a, b), a, b);
}

/** Elementwise maximum (gradient to the larger operand; to `a` on ties). */
export function maximum(g: Graph, a: Value, b: Value): Value {
  return g.where(g.compare("GreaterOrEqual", a, b), a, b);
}

/** `clip(x, lo, hi)`; the gradient is zero where clipping is active. */
export function clip(g: Graph, x: Value, lo: Value, hi: Value): Value {
  return minimum(g, maximum(g, x, lo), hi);
}

/** Mean of `x` over the positions where float `mask` is 1: `Σ x·m / max(Σ m, 1)` → scalar. */
export function maskedMean(g: Graph, x: Value, mask: Value): Value {
  const axes = [...x.shape.keys()];
  const num = g.reduceSum(g.mul(x, mask), axes, false); // ()
  const den = g.withoutTape(() => {
    const n = g.reduceSum(mask, axes, false);
    return maximum(g, n, g.scalar(1, mask.dtype));
  });
  return g.div(num, den);
}

/** Entropy of the distribution with log-probs `logp` over `axis`: `−Σ p·log p`. */
export function entropy(g: Graph, logp: Value, axis = -1): Value {
  return g.neg(g.reduceSum(g.mul(g.exp(logp), logp), [axis], false));
}

/** Log-probs of int64 `targets` (shape of `logp` without its last dim) under `logp`. */
export function pickLogProbs(g: Graph, logp: Value, targets: Value): Value {
  const idx = g.reshape(targets, [...targets.shape, 1]); // (…, 1)
  const picked = g.gatherElements(logp, idx, -1); // (…, 1)
  return g.reshape(picked, targets.shape); // (…)
}

/**
 * Log-softmax of `logits` (…, V) over the last dim and the log-probs of int64 `targets` (…)
 * under it: `{ logp (…, V), picked (…) }`, the values of `logSoftmax` and `pickLogProbs`. The
 * pick is one op (`Graph.composite`) with the softmax cross-entropy rule, d logits = g·(onehot −
 * softmax): 3 passes over (…, V) instead of the 5 of scattering g into zeros and applying the
 * LogSoftmax rule. `logp` stays differentiable for other terms (entropy) through LogSoftmax.
 */
export function logSoftmaxPick(
  g: Graph,
  logits: Value,
  targets: Value,
): { logp: Value; picked: Value } {
  const logp = g.logSoftmax(logits, -1); // (…, V)
  const picked = g.withoutTape(() => pickLogProbs(g, logp, targets)); // (…)
  return { logp, picked: g.composite("LogSoftmaxPick", [logits], picked, { logp, targets }) };
}

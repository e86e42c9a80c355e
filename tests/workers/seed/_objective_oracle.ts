/**
 * A float64 hand computation of the SEED objective (workers/seed/objective.ts), token by token,
 * with its gradient with respect to ℓθ. The graph is compared with it in objective_test.ts; it
 * is a test oracle, not a second implementation. Every coefficient must be given (defaults live
 * in the JobSpec schema only).
 *
 * Arrays are flat (N·T,) over samples × response tokens, padded; `mask` is 1 on response tokens,
 * `opd_mask` 1 on tokens with a teacher signal.
 */
import { parseJobSpec } from "../../../jobs/mod.ts";
import { type SeedCoefficients, seedCoefficients } from "../../../workers/seed/objective.ts";
import { runPlan } from "../../../workers/seed/run_plan.ts";

/** Every coefficient at its JobSpec default (of a `seed` job), by name. */
export const SPEC_COEFFICIENTS: SeedCoefficients = (() => {
  const spec = parseJobSpec({ env: { id: "sokoban" } });
  return seedCoefficients(spec, runPlan(spec));
})();

/** Per-token inputs, all (N·T,), named as the graph's. */
export interface OracleTokens {
  /** ℓθ. */
  logp: ArrayLike<number>;
  /** H. */
  entropy: ArrayLike<number>;
  mask: ArrayLike<number>;
  advantages: ArrayLike<number>;
  old_logprobs: ArrayLike<number>;
  teacher_logprobs: ArrayLike<number>;
  ref_logprobs: ArrayLike<number>;
  opd_mask: ArrayLike<number>;
}

/** Every output of the objective by its graph name, and d loss / d ℓθ per token. */
export interface OracleResult {
  loss: number;
  pg_loss: number;
  opd_loss: number;
  kl_loss: number;
  entropy: number;
  clip_frac: number;
  dual_clip_frac: number;
  gate_mean: number;
  delta_mean: number;
  /** ∂loss/∂ℓθ (N·T,), with g, ℓT, ℓold, ℓref and H held constant. */
  gradLogp: Float64Array;
}

/** σ(x), stable for large |x|. */
export function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

/**
 * One token's clipped policy-gradient loss and d/dℓθ: r = exp(ℓθ − ℓold);
 * pg = max(−r·A, −clip(r, 1−ε_low, 1+ε_high)·A), and for A < 0, min(pg, −c·A) (the reference
 * code's `compute_policy_loss`).
 */
export function pgToken(
  logp: number,
  oldLogp: number,
  advantage: number,
  c: { clip_ratio_low: number; clip_ratio_high: number; dual_clip: number },
): { value: number; grad: number; clipped: boolean; dual: boolean } {
  const r = Math.exp(logp - oldLogp);
  const unclipped = -r * advantage;
  const bounded = Math.min(Math.max(r, 1 - c.clip_ratio_low), 1 + c.clip_ratio_high);
  const clippedValue = -bounded * advantage;
  const clipped = clippedValue > unclipped;
  // The unclipped branch carries the gradient d(−r·A)/dℓ = −r·A; the clipped one is constant.
  let value = clipped ? clippedValue : unclipped;
  let grad = clipped ? 0 : -r * advantage;
  const dual = advantage < 0 && value > -c.dual_clip * advantage;
  if (dual) (value = -c.dual_clip * advantage), (grad = 0);
  return { value, grad, clipped, dual };
}

/** The SEED objective by hand (see the objective's module doc for the formulas). */
export function oracle(t: OracleTokens, c: SeedCoefficients): OracleResult {
  const n = t.mask.length;
  let count = 0, teacherCount = 0;
  for (let i = 0; i < n; i++) {
    if (t.mask[i] > 0) (count++, t.opd_mask[i] > 0 && teacherCount++);
  }
  const N = Math.max(1, count), NT = Math.max(1, teacherCount);
  const grad = new Float64Array(n);
  let pg = 0, kl = 0, ent = 0, opd = 0, gates = 0, gaps = 0, clip = 0, dual = 0;
  for (let i = 0; i < n; i++) {
    if (!(t.mask[i] > 0)) continue;
    const logp = t.logp[i];
    const p = pgToken(logp, t.old_logprobs[i], t.advantages[i], c);
    pg += p.value;
    if (p.clipped) clip++;
    if (p.dual) dual++;
    // The reference code's `kl_penalty(…, "low_var_kl")`: clamp(exp(x) − x − 1, −10, 10).
    const x = t.ref_logprobs[i] - logp;
    const k3 = Math.exp(x) - x - 1;
    kl += Math.min(Math.max(k3, -10), 10);
    // d k3 / dℓθ = −(exp(x) − 1) inside the clamp, else 0.
    const klGrad = Math.abs(k3) < 10 ? -(Math.exp(x) - 1) : 0;
    ent += t.entropy[i];
    grad[i] = (p.grad + c.kl_coef * klGrad) / N;
    if (t.opd_mask[i] > 0) {
      const gap = t.teacher_logprobs[i] - logp; // Δ (stop-gradient in the gate)
      const g = sigmoid(c.gate_beta * gap);
      opd += g * gap;
      gates += g;
      gaps += gap;
      grad[i] += (c.opd_coef * -g) / NT;
    }
  }
  const r = {
    pg_loss: pg / N,
    opd_loss: opd / NT,
    kl_loss: kl / N,
    entropy: ent / N,
    clip_frac: clip / N,
    dual_clip_frac: dual / N,
    gate_mean: gates / NT,
    delta_mean: gaps / NT,
  };
  const loss = r.pg_loss - c.entropy_coef * r.entropy + c.opd_coef * r.opd_loss +
    c.kl_coef * r.kl_loss;
  return { ...r, loss, gradLogp: grad };
}

/**
 * Reference implementation of the SEED update loss (DESIGN.md §8 step 5; Wu et al. 2026, arXiv
 * 2607.14777), per token in float64, with its gradient with respect to the current log-probs
 * ℓ_θ. The engine computes the same terms inside its ONNX `train` graph; this file is the
 * executable statement of the formulas that graph is checked against, and the trainer's source
 * for the names and defaults of the loss terms. It owns no model code.
 *
 * Every array is flat (N·T,) row-major over (samples N, response tokens T), padded; `mask` is 1
 * on response tokens. Log-probs are natural logs (nats).
 */
import { checkNumber, SeedOptionError } from "./errors.ts";

/** Per-token inputs of the loss; all (N·T,). */
export interface LossTokens {
  /** ℓ_θ: log-prob of each sampled token under the current policy (ordinary prompt). */
  logp: ArrayLike<number>;
  /** ℓ_old: under θ_old (ordinary prompt), constant. */
  logpOld: ArrayLike<number>;
  /** ℓ_T: under θ_old with the skill in the prompt, constant (ignored where `teacherMask` is 0). */
  logpTeacher: ArrayLike<number>;
  /** ℓ_ref: under the reference policy π_ref (warm-up checkpoint), constant. */
  logpRef: ArrayLike<number>;
  /** A: the sample's advantage broadcast to its tokens. */
  advantages: ArrayLike<number>;
  /** H: per-token entropy of π_θ (nats); its gradient is the engine's business. */
  entropy: ArrayLike<number>;
  /** 1 on response tokens, 0 on padding. */
  mask: ArrayLike<number>;
  /** 1 on tokens of samples whose trajectory has a parsed skill (see `teacherMask`). */
  teacherMask: ArrayLike<number>;
}

/** Coefficients (JobSpec `optim` and `seed`), with the DESIGN/paper defaults. */
export interface LossOptions {
  /** PPO clip ε (default 0.2). */
  clipRatio?: number;
  /** Dual-clip c > 1 (default 3): for A < 0 the pg loss is capped at −c·A. */
  dualClip?: number;
  /** Gate sharpness β (default 5). */
  gateBeta?: number;
  /** λ_opd (default 0.01; 0 for `grpo`). */
  opdCoef?: number;
  /** KL k3 coefficient (default 0.01). */
  klCoef?: number;
  /** Entropy bonus coefficient (default 0.001). */
  entropyCoef?: number;
}

/** Loss terms (scalars) and the gradient of the total with respect to ℓ_θ. */
export interface LossResult {
  /** mean(pg) − entropy_coef·mean(H) + λ_opd·L_opd + kl_coef·mean(k3). */
  loss: number;
  /** Token mean of the clipped policy-gradient loss. */
  pg: number;
  /** L_opd: mean over teacher-masked tokens of g·(ℓ_T − ℓ_θ); 0 when there are none. */
  opd: number;
  /** Token mean of k3. */
  kl: number;
  /** Token mean of H. */
  entropy: number;
  /** Mean gate g over teacher-masked tokens (0 when none). */
  gateMean: number;
  /** Mean teacher gap Δ = ℓ_T − ℓ_θ over teacher-masked tokens (0 when none). */
  teacherGapMean: number;
  /** Share of response tokens where a clip (PPO or dual) is active. */
  clipFraction: number;
  /** ∂loss/∂ℓ_θ per token (N·T,), with g and ℓ_T, ℓ_old, ℓ_ref, H held constant. */
  gradLogp: Float64Array;
}

/** σ(x) = 1 / (1 + e^−x), stable for large |x|. */
export function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

/**
 * Clipped policy-gradient loss of one token and its derivative in ℓ_θ (PPO, Schulman et al. 2017,
 * with the dual clip of Ye et al. 2020 as in verl): r = exp(ℓ_θ − ℓ_old);
 * pg = max(−r·A, −clip(r, 1−ε, 1+ε)·A), and for A < 0, min(pg, −c·A).
 */
export function pgToken(
  logp: number,
  logpOld: number,
  advantage: number,
  clip: { ratio: number; dual: number },
): { value: number; grad: number; clipped: boolean } {
  const r = Math.exp(logp - logpOld);
  const unclipped = -r * advantage;
  const clippedValue = -Math.min(Math.max(r, 1 - clip.ratio), 1 + clip.ratio) * advantage;
  // The unclipped branch carries the gradient d(−r·A)/dℓ = −r·A; the clipped one is constant.
  let value = unclipped >= clippedValue ? unclipped : clippedValue;
  let grad = unclipped >= clippedValue ? -r * advantage : 0;
  let clipped = unclipped < clippedValue;
  if (advantage < 0 && value > -clip.dual * advantage) {
    value = -clip.dual * advantage;
    grad = 0;
    clipped = true;
  }
  return { value, grad, clipped };
}

/** Validates that every array has the length of `tokens.mask`. */
function checkLengths(tokens: LossTokens): number {
  const n = tokens.mask.length;
  for (const [name, array] of Object.entries(tokens)) {
    if ((array as ArrayLike<number>).length !== n) {
      throw new SeedOptionError(
        `Cannot compute the loss as ${name} must have one entry per token (${n}): current value is ${
          (array as ArrayLike<number>).length
        }`,
        { option: name, value: (array as ArrayLike<number>).length },
      );
    }
  }
  return n;
}

/**
 * The SEED loss (DESIGN.md §8 step 5), token-mean aggregation:
 * Δ = ℓ_T − sg(ℓ_θ); g = sg(σ(β·Δ)); L_opd = Σ_masked g·(ℓ_T − ℓ_θ) / #masked;
 * k3 = exp(ℓ_ref − ℓ_θ) − (ℓ_ref − ℓ_θ) − 1;
 * loss = mean(pg) − entropy_coef·mean(H) + λ_opd·L_opd + kl_coef·mean(k3).
 * Means are over response tokens (mask = 1); with no response tokens every term is 0.
 */
export function seedLoss(tokens: LossTokens, options: LossOptions = {}): LossResult {
  const clipRatio = options.clipRatio ?? 0.2;
  const dual = options.dualClip ?? 3;
  const beta = options.gateBeta ?? 5;
  const opdCoef = options.opdCoef ?? 0.01;
  const klCoef = options.klCoef ?? 0.01;
  const entropyCoef = options.entropyCoef ?? 0.001;
  checkNumber("clipRatio", clipRatio, { min: 0, max: 1 });
  checkNumber("dualClip", dual, { min: 1 });
  checkNumber("gateBeta", beta, { min: 0 });
  const n = checkLengths(tokens);
  let count = 0, teacherCount = 0;
  for (let i = 0; i < n; i++) {
    if (tokens.mask[i] > 0) {
      count++;
      if (tokens.teacherMask[i] > 0) teacherCount++;
    }
  }
  const gradLogp = new Float64Array(n);
  let pg = 0, kl = 0, entropy = 0, opd = 0, gates = 0, gaps = 0, clippedCount = 0;
  for (let i = 0; i < n; i++) {
    if (!(tokens.mask[i] > 0)) continue;
    const logp = tokens.logp[i];
    const term = pgToken(logp, tokens.logpOld[i], tokens.advantages[i], { ratio: clipRatio, dual });
    pg += term.value;
    if (term.clipped) clippedCount++;
    const d = tokens.logpRef[i] - logp;
    kl += Math.exp(d) - d - 1;
    entropy += tokens.entropy[i];
    gradLogp[i] = (term.grad + klCoef * (1 - Math.exp(d))) / count;
    if (tokens.teacherMask[i] > 0) {
      const gap = tokens.logpTeacher[i] - logp; // Δ, stop-gradient
      const gate = sigmoid(beta * gap); // g, stop-gradient
      opd += gate * gap;
      gates += gate;
      gaps += gap;
      gradLogp[i] += (opdCoef * -gate) / teacherCount;
    }
  }
  const mean = (x: number, m: number) => (m === 0 ? 0 : x / m);
  const result = {
    pg: mean(pg, count),
    opd: mean(opd, teacherCount),
    kl: mean(kl, count),
    entropy: mean(entropy, count),
    gateMean: mean(gates, teacherCount),
    teacherGapMean: mean(gaps, teacherCount),
    clipFraction: mean(clippedCount, count),
  };
  return {
    ...result,
    loss: result.pg - entropyCoef * result.entropy + opdCoef * result.opd + klCoef * result.kl,
    gradLogp,
  };
}

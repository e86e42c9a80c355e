/**
 * Loss terms as graph outputs. Inputs are per-token tensors (B, T) aligned with the `targets`
 * of the train graph (entry t scores the token predicted at position t); float `mask` is 1 on
 * response tokens that count and 0 elsewhere. Aggregation is the token mean over the whole
 * batch (Σ over masked tokens / number of masked tokens), as in DESIGN.md §8 step 5.
 */
import { type Graph, nn, type Value } from "../engine/mod.ts";

/** Supervised fine-tuning: mean negative log-likelihood of masked tokens → scalar. */
export function tokenNll(g: Graph, logp: Value, mask: Value): Value {
  return g.neg(nn.maskedMean(g, logp, mask)); // ()
}

/** Per-token inputs of the SEED objective, each (B, T) float. */
export interface SeedTokens {
  /** ℓθ: log-prob of each target token under the policy being trained. */
  logp: Value;
  /** H: entropy of the policy's next-token distribution at each position. */
  entropy: Value;
  /** 1 on response tokens that count, 0 on prompt/padding. */
  mask: Value;
  /** A: advantage of the sample, broadcast to each of its tokens. */
  advantages: Value;
  /** ℓold: log-prob under θ_old (the weights at the start of the update). */
  oldLogp: Value;
  /** ℓT: teacher log-prob (θ_old with the hindsight skill in the prompt). */
  teacherLogp: Value;
  /** ℓref: log-prob under the reference policy π_ref. */
  refLogp: Value;
  /** 1 where ℓT is valid (the trajectory's skill parsed), else 0: no distillation signal. */
  opdMask: Value;
}

/** Scalar coefficients of the SEED objective (graph inputs, so GRPO is λ_opd = 0). */
export interface SeedCoefficients {
  /** ε of the PPO ratio clip (0.2). */
  clipEps: Value;
  /** c of the dual clip for A < 0 (3). */
  dualClip: Value;
  /** β of the gate σ(β·Δ) (5). */
  gateBeta: Value;
  /** λ_opd (0.01; 0 for GRPO). */
  opdCoef: Value;
  /** KL k3 coefficient (0.01). */
  klCoef: Value;
  /** Entropy bonus coefficient (0.001). */
  entropyCoef: Value;
}

/** The SEED loss and each of its terms (all scalars). */
export interface SeedTerms {
  /** mean(pg) − entropy_coef·mean(H) + λ_opd·L_opd + kl_coef·mean(k3). */
  loss: Value;
  pg: Value;
  opd: Value;
  kl: Value;
  entropy: Value;
  /** Fraction of tokens where the ε-clipped branch is the active one. */
  clipFrac: Value;
  /** Fraction of tokens (A < 0) capped by the dual clip −c·A. */
  dualClipFrac: Value;
  /** Mean gate g over tokens with a teacher signal. */
  gateMean: Value;
  /** Mean Δ = ℓT − ℓθ over tokens with a teacher signal. */
  deltaMean: Value;
}

/** |ℓref − ℓθ| is clipped to this before k3 (verl `low_var_kl`). */
export const KL_GAP_BOUND = 20;
/** Each token's k3 is capped at this (verl `low_var_kl`). */
export const KL_TOKEN_BOUND = 10;

/**
 * The SEED objective of DESIGN.md §8 step 5 (dual-clip PPO after Ye et al. 2020 as in verl):
 *   r = exp(ℓθ − ℓold);  pg = −min(r·A, clip(r, 1−ε, 1+ε)·A), and for A < 0
 *   pg = min(pg, −c·A);  Δ = ℓT − sg(ℓθ);  g = sg(σ(β·Δ));
 *   L_opd = Σ g·(ℓT − ℓθ) / N  (tokens without a teacher signal add 0; N = masked tokens);
 *   x = clip(ℓref − ℓθ, −20, 20);  k3 = min(exp(x) − x − 1, 10)   (verl's `low_var_kl` bounds);
 *   loss = mean(pg) − entropy_coef·mean(H) + λ_opd·L_opd + kl_coef·mean(k3).
 * The bounds matter: without them one token whose ℓθ fell far below ℓref gave exp(ℓref − ℓθ) in
 * the thousands, a gradient norm of 99 and a policy that answered 99.8% invalid actions for two
 * updates (the demo, 2026-11-30); a bounded token contributes 10 and no gradient.
 * Minimising +λ·L_opd has ∂/∂ℓθ = −λ·g/N < 0: it raises ℓθ toward ℓT where the teacher is
 * more confident (checked by a gradient test).
 */
export function seedLoss(g: Graph, t: SeedTokens, c: SeedCoefficients): SeedTerms {
  const one = g.scalar(1);
  const mean = (x: Value) => nn.maskedMean(g, x, t.mask); // ()
  const a = t.advantages;
  const ratio = g.exp(g.sub(t.logp, t.oldLogp)); // (B, T)
  const clipped = nn.clip(g, ratio, g.sub(one, c.clipEps), g.add(one, c.clipEps)); // (B, T)
  const pg1 = g.neg(g.mul(a, ratio)); // −r·A
  const pg2 = g.neg(g.mul(a, clipped)); // −clip(r)·A
  const pgClip = nn.maximum(g, pg1, pg2); // −min(r·A, clip(r)·A)
  const pg3 = g.neg(g.mul(a, c.dualClip)); // −c·A (> 0 when A < 0)
  const negative = g.compare("Less", a, g.scalar(0));
  const pgTok = g.where(negative, nn.minimum(g, pgClip, pg3), pgClip); // (B, T)

  const gap = g.sub(t.teacherLogp, t.logp); // ℓT − ℓθ, (B, T)
  const delta = g.sub(t.teacherLogp, g.stopGradient(t.logp)); // Δ = ℓT − sg(ℓθ)
  const gate = g.stopGradient(g.sigmoid(g.mul(c.gateBeta, delta))); // g = sg(σ(βΔ))
  const opdTok = g.mul(g.mul(gate, gap), t.opdMask); // (B, T)

  const refGap = nn.clip(
    g,
    g.sub(t.refLogp, t.logp),
    g.scalar(-KL_GAP_BOUND),
    g.scalar(KL_GAP_BOUND),
  );
  const k3 = nn.minimum(g, g.sub(g.sub(g.exp(refGap), refGap), one), g.scalar(KL_TOKEN_BOUND)); // (B, T)

  const pg = mean(pgTok), opd = mean(opdTok), kl = mean(k3), ent = mean(t.entropy);
  const loss = g.add(
    g.add(g.sub(pg, g.mul(c.entropyCoef, ent)), g.mul(c.opdCoef, opd)),
    g.mul(c.klCoef, kl),
  );

  const stats = g.withoutTape(() => {
    const f = (b: Value) => g.cast(b, t.mask.dtype);
    const teacherMask = g.mul(t.mask, t.opdMask);
    return {
      clipFrac: mean(f(g.compare("Greater", pg2, pg1))),
      dualClipFrac: mean(f(g.and(negative, g.compare("Greater", pgClip, pg3)))),
      gateMean: nn.maskedMean(g, gate, teacherMask),
      deltaMean: nn.maskedMean(g, delta, teacherMask),
    };
  });
  return { loss, pg, opd, kl, entropy: ent, ...stats };
}

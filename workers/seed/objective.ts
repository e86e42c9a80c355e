/**
 * The SEED update objective (Wu et al. 2026, arXiv 2607.14777, the update loss; dual-clip PPO
 * after Ye et al. 2020 as in verl), as a `TrainObjective` the model builds its train graph from.
 * This is the only implementation of the loss: `tests/workers/seed/_objective_oracle.ts` is a
 * float64 hand computation the graph is compared with, nothing more.
 *
 * Names: one table per kind of input, and each name is the JobSpec's (`optim.clip_ratio_low` is
 * the graph input `clip_ratio_low`). Defaults live only in the JobSpec schema (jobs/spec.ts).
 *
 * Per response token (ℓ are natural-log probabilities of the sampled token, all at the rollout
 * temperature: softmax(logits / T), the trainer's concern):
 *   r = exp(ℓθ − ℓold);  pg = −min(r·A, clip(r, 1−ε_low, 1+ε_high)·A), and for A < 0
 *   pg = min(pg, −c·A);
 *   Δ = ℓT − sg(ℓθ);  g = sg(σ(β·Δ));  opd = g·(ℓT − ℓθ)  (tokens with a teacher signal only);
 *   x = ℓref − ℓθ;  k3 = clamp(exp(min(x, 20)) − min(x, 20) − 1, −10, 10).
 * These are the reference code's (github.com/lljcic2024-boop/agent_rl at 2cf2fad,
 * `verl/trainer/ppo/core_algos.py`): `compute_policy_loss` (dual-clip, `clip_ratio_c`),
 * `compute_opd_loss` and `kl_penalty(…, "low_var_kl")`, which clamps only the final k3 to ±10.
 * The one addition, min(x, 20), changes no value and no gradient where theirs is finite: k3 ≥ 10
 * for every x ≥ 2.62, so both give 10 with zero gradient there; it only keeps exp from
 * overflowing at x > 88 (float32), where theirs gets +∞, a NaN gradient and a skipped step.
 * Aggregation (token means; N = response tokens, N_T = response tokens with a teacher signal,
 * each over the tokens one count covers — the mini-batch, or each micro-batch with
 * `optim.loss_aggregation: "micro_batch_token_mean"`, whose means are then averaged: the model's
 * per-token divisors, workers/model/objective.ts):
 *   loss = Σpg/N − entropy_coef·ΣH/N + opd_coef·Σopd/N_T + kl_coef·Σk3/N.
 * L_opd is a token mean over the teacher tokens only, as `compute_opd_loss` (`agg_loss(
 * opd_loss_mat, loss_mask=opd_mask, "token-mean")`); a micro-batch without teacher tokens adds 0
 * to the mean over micro-batches, so the effective λ_opd shrinks with the share of micro-batches
 * that hold none (as theirs).
 * Minimising +λ·L_opd has ∂/∂ℓθ = −λ·g/N_T < 0: it raises ℓθ toward ℓT where the teacher is more
 * confident.
 */
import type { JobSpec } from "../../jobs/mod.ts";
import { type Graph, nn, type Value } from "../engine/mod.ts";
import { type OutputSpec, sumOver, type TrainObjective, type TrainSample } from "../model/mod.ts";
import type { RunPlan } from "./run_plan.ts";

/** Per-token inputs (R,) of the SEED objective. */
export const SEED_TOKEN_INPUTS = [
  /** A: the sample's advantage, broadcast to its tokens. */
  "advantages",
  /** ℓold: log-prob under θ_old (the weights at the start of the update). */
  "old_logprobs",
  /** ℓT: log-prob under θ_old with the hindsight skill in the prompt (0 without a skill). */
  "teacher_logprobs",
  /** ℓref: log-prob under the reference policy π_ref (ℓold when there is none). */
  "ref_logprobs",
  /** 1 where ℓT is valid (the trajectory's skill parsed), else 0: no distillation signal. */
  "opd_mask",
] as const;

/** Coefficients (scalar inputs) of the SEED objective, named as in the JobSpec. */
export const SEED_COEFFICIENTS = [
  /** ε_low of the PPO ratio clip: r ≥ 1 − ε_low (`optim.clip_ratio_low`). */
  "clip_ratio_low",
  /** ε_high of the PPO ratio clip: r ≤ 1 + ε_high (`optim.clip_ratio_high`). */
  "clip_ratio_high",
  /** c > 1 of the dual clip for A < 0 (`optim.dual_clip`). */
  "dual_clip",
  /** β of the gate σ(β·Δ) (`seed.gate_beta`). */
  "gate_beta",
  /** λ_opd (`seed.opd_coef`; the run plan makes it 0 without analysis). */
  "opd_coef",
  /** Weight of the clamped k3 KL to π_ref (`optim.kl_coef`). */
  "kl_coef",
  /** Weight of the entropy bonus (`optim.entropy_coef`). */
  "entropy_coef",
] as const;

/** One per-token input name. */
export type SeedTokenInput = typeof SEED_TOKEN_INPUTS[number];
/** One coefficient name. */
export type SeedCoefficient = typeof SEED_COEFFICIENTS[number];
/** Every coefficient by name. */
export type SeedCoefficients = Record<SeedCoefficient, number>;

/** The step-wide counts the SEED terms are means over. */
const COUNTS = {
  /** N: response tokens. */
  response_tokens: null,
  /** N_T: response tokens with a teacher signal. */
  teacher_tokens: "opd_mask",
} as const;

/**
 * Scalar outputs of the SEED objective (each a metric of the update, same name) → the count it
 * is a mean over and whether it is a term of the loss (0 over no tokens) or a statistic (left out
 * over no tokens). The entropy is a statistic: the loss term is −entropy_coef·H.
 */
export const SEED_OUTPUTS = {
  /** The total loss minimised. */
  loss: { over: "response_tokens", kind: "loss" },
  /** Token mean of the clipped policy-gradient loss. */
  pg_loss: { over: "response_tokens", kind: "loss" },
  /** L_opd: mean of g·(ℓT − ℓθ) over teacher tokens. */
  opd_loss: { over: "teacher_tokens", kind: "loss" },
  /** Token mean of the clamped k3. */
  kl_loss: { over: "response_tokens", kind: "loss" },
  /** Token mean of the policy's entropy H (nats). */
  entropy: { over: "response_tokens", kind: "statistic" },
  /** Share of tokens where the ε-clipped branch is the active one. */
  clip_frac: { over: "response_tokens", kind: "statistic" },
  /** Share of tokens (A < 0) capped by the dual clip −c·A. */
  dual_clip_frac: { over: "response_tokens", kind: "statistic" },
  /** Mean gate g over teacher tokens. */
  gate_mean: { over: "teacher_tokens", kind: "statistic" },
  /** Mean Δ = ℓT − ℓθ over teacher tokens. */
  delta_mean: { over: "teacher_tokens", kind: "statistic" },
} as const satisfies Record<string, OutputSpec<keyof typeof COUNTS>>;

/** Each token's k3 is clamped to [−this, this] (verl `kl_penalty`, `low_var_kl`, at 2cf2fad). */
export const KL_TOKEN_BOUND = 10;
/**
 * ℓref − ℓθ is capped at this before exp (module doc): above 2.62 nats k3 is clamped to 10 with
 * zero gradient anyway, so the cap only keeps exp finite.
 */
export const KL_GAP_CAP = 20;

/** The SEED objective (see module doc); GRPO is this objective with `opd_coef` 0. */
export const SEED_OBJECTIVE: TrainObjective<
  SeedTokenInput,
  SeedCoefficient,
  keyof typeof COUNTS,
  keyof typeof SEED_OUTPUTS
> = {
  name: "seed",
  tokenInputs: SEED_TOKEN_INPUTS,
  scalarInputs: SEED_COEFFICIENTS,
  counts: COUNTS,
  outputs: SEED_OUTPUTS,
  build: seedTerms,
};

/** The SEED loss and its outputs from the token values and the named inputs (see module doc). */
function seedTerms(
  g: Graph,
  t: { logp: Value; entropy: Value; mask: Value },
  x: Readonly<Record<SeedTokenInput | SeedCoefficient | keyof typeof COUNTS, Value>>,
): Record<keyof typeof SEED_OUTPUTS, Value> {
  const one = g.scalar(1);
  const overTokens = (v: Value) => sumOver(g, v, t.mask, x.response_tokens); // ()
  const teacherMask = g.mul(t.mask, x.opd_mask); // (R,)
  const overTeacher = (v: Value) => sumOver(g, v, teacherMask, x.teacher_tokens); // ()

  const a = x.advantages;
  const ratio = g.exp(g.sub(t.logp, x.old_logprobs)); // (R,)
  const clipped = nn.clip(g, ratio, g.sub(one, x.clip_ratio_low), g.add(one, x.clip_ratio_high)); // (R,)
  const pg1 = g.neg(g.mul(a, ratio)); // −r·A
  const pg2 = g.neg(g.mul(a, clipped)); // −clip(r)·A
  const pgClip = nn.maximum(g, pg1, pg2); // −min(r·A, clip(r)·A)
  const pg3 = g.neg(g.mul(a, x.dual_clip)); // −c·A (> 0 when A < 0)
  const negative = g.compare("Less", a, g.scalar(0));
  const pgTok = g.where(negative, nn.minimum(g, pgClip, pg3), pgClip); // (R,)

  const gap = g.sub(x.teacher_logprobs, t.logp); // ℓT − ℓθ, (R,)
  const delta = g.sub(x.teacher_logprobs, g.stopGradient(t.logp)); // Δ = ℓT − sg(ℓθ)
  const gate = g.stopGradient(g.sigmoid(g.mul(x.gate_beta, delta))); // g = sg(σ(βΔ))

  const refGap = nn.minimum(g, g.sub(x.ref_logprobs, t.logp), g.scalar(KL_GAP_CAP)); // (R,)
  const k3 = nn.clip(
    g,
    g.sub(g.sub(g.exp(refGap), refGap), one),
    g.scalar(-KL_TOKEN_BOUND),
    g.scalar(KL_TOKEN_BOUND),
  ); // (R,)

  const pg = overTokens(pgTok), opd = overTeacher(g.mul(gate, gap));
  const kl = overTokens(k3), entropy = overTokens(t.entropy);
  const loss = g.add(
    g.add(g.sub(pg, g.mul(x.entropy_coef, entropy)), g.mul(x.opd_coef, opd)),
    g.mul(x.kl_coef, kl),
  );
  const stats = g.withoutTape(() => {
    const f = (b: Value) => g.cast(b, t.mask.dtype);
    return {
      clip_frac: overTokens(f(g.compare("Greater", pg2, pg1))),
      dual_clip_frac: overTokens(f(g.and(negative, g.compare("Greater", pgClip, pg3)))),
      gate_mean: overTeacher(gate),
      delta_mean: overTeacher(delta),
    };
  });
  return { loss, pg_loss: pg, opd_loss: opd, kl_loss: kl, entropy, ...stats };
}

/**
 * The coefficients of a job by name, from its spec (defaults are the JobSpec schema's) and its
 * run plan (the effective λ_opd).
 */
export function seedCoefficients(spec: JobSpec, plan: RunPlan): SeedCoefficients {
  const { optim, seed } = spec;
  return {
    clip_ratio_low: optim.clip_ratio_low,
    clip_ratio_high: optim.clip_ratio_high,
    dual_clip: optim.dual_clip,
    gate_beta: seed.gate_beta,
    opd_coef: plan.opd_coef,
    kl_coef: optim.kl_coef,
    entropy_coef: optim.entropy_coef,
  };
}

/** The per-token log-probs of one RL sample, each one per response token. */
export interface SeedLogprobs {
  /** A of the sample (broadcast) or one per token. */
  advantages: number | Float32Array;
  old_logprobs: Float32Array;
  ref_logprobs: Float32Array;
  /** ℓT, or null when the trajectory has no parsed skill (no distillation signal). */
  teacher_logprobs: Float32Array | null;
}

/** A sample of the SEED update: token ids plus every SEED token input by name. */
export type SeedSample = TrainSample & {
  inputs: Readonly<Record<SeedTokenInput, number | Float32Array>>;
};

/** The SEED token inputs of a sample: `opd_mask` is 1 exactly when ℓT exists (ℓT is 0 else). */
export function seedInputs(l: SeedLogprobs): Record<SeedTokenInput, number | Float32Array> {
  return {
    advantages: l.advantages,
    old_logprobs: l.old_logprobs,
    teacher_logprobs: l.teacher_logprobs ?? 0,
    ref_logprobs: l.ref_logprobs,
    opd_mask: l.teacher_logprobs ? 1 : 0,
  };
}

/**
 * Advantage estimators of the SEED trainer (workers/seed/README.md, Algorithm, steps 1–2), as pure functions in
 * a typed registry, as verl and TRL do (workers/seed/README.md, Extending).
 *
 * SEED (Wu et al. 2026, "SEED: Self-Evolving On-Policy Distillation", arXiv 2607.14777) keeps
 * the outcome-based GRPO objective: every turn of a multi-turn episode is one training sample,
 * scored with the episode reward minus an invalid-action penalty, and normalised within the group
 * of all samples of the same task. GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization
 * for LLM Agent Training", arXiv 2505.10978) adds a step-level relative advantage computed inside
 * "anchor-state" groups: samples of the same task whose observation is identical.
 *
 * All functions here are pure: arrays in, a new `Float64Array` out, one value per sample (N,).
 */
import type { Trajectory } from "../envs/types.ts";
import { checkNumber } from "./errors.ts";

/** Where the episode reward R comes from: `success` R = 10·won; `score` R = the env's score. */
export type RewardSource = "success" | "score";

/** Normalisation within a group: `mean_std` (s − mean)/(std + ε), or `mean` s − mean. */
export type AdvantageNorm = "mean_std" | "mean";

/** Names of the registered estimators (JobSpec `advantage.estimator`). */
export type AdvantageEstimatorName = "grpo" | "gigpo";

/** Reward for a won episode under `rewardSource: "success"` (workers/seed/README.md, Algorithm, step 1). */
export const SUCCESS_REWARD = 10;

/** The fields of one training sample (one turn) that the estimators read. */
export interface AdvantageSample {
  /** Task id: samples sharing it form one GRPO group (pooled over the task's G trajectories). */
  taskId: string;
  /** Trajectory id: GiGPO discounts step rewards along it. */
  trajectoryId: string;
  /** 0-based turn index within the trajectory (orders the discounted return). */
  turn: number;
  /** Per-sample score s_i = R − p·[action i invalid] (reward units). */
  score: number;
  /** Per-step reward r_t (reward units), used only by GiGPO's step-level returns. */
  stepReward: number;
  /** Observation text the policy saw before acting (the GiGPO anchor state). */
  observation: string;
}

/** Options shared by every estimator. */
export interface AdvantageOptions {
  /** Group normalisation (JobSpec `advantage.norm`). */
  norm: AdvantageNorm;
  /** ε in (s − mean)/(std + ε); default 1e-6 (workers/seed/README.md, Algorithm, step 2). */
  epsilon?: number;
  /** GiGPO discount γ of the step-level return (paper default 0.95). */
  gamma?: number;
  /** GiGPO weight ω of the step-level advantage (paper default 1). */
  stepWeight?: number;
}

/** An advantage estimator: samples (N,) → advantages (N,), one scalar per sample. */
export type AdvantageEstimator = (
  samples: readonly AdvantageSample[],
  options: AdvantageOptions,
) => Float64Array;

/**
 * Episode reward R (workers/seed/README.md, Algorithm, step 1): `success` → 10·won, `score` → `trajectory.score`
 * (the sum of step rewards, or the env's final score where it has one).
 */
export function episodeReward(trajectory: Trajectory, source: RewardSource): number {
  return source === "success" ? (trajectory.won ? SUCCESS_REWARD : 0) : trajectory.score;
}

/** Options of `sampleScores` / `stepRewards`. */
export interface ScoreOptions {
  rewardSource: RewardSource;
  /** Invalid-action penalty p ≥ 0 (JobSpec `advantage.invalid_action_penalty`, default 0.1). */
  invalidPenalty: number;
}

/**
 * Per-sample scores of one trajectory (T,): s_t = R − p·[action t invalid] (workers/seed/README.md, Algorithm,
 * step 1). Throws `SeedOptionError` when p is negative or not finite.
 */
export function sampleScores(trajectory: Trajectory, options: ScoreOptions): number[] {
  checkNumber("invalidPenalty", options.invalidPenalty, { min: 0 });
  const reward = episodeReward(trajectory, options.rewardSource);
  return trajectory.steps.map((step) => reward - (step.valid ? 0 : options.invalidPenalty));
}

/**
 * Per-step rewards r_t of one trajectory (T,) for GiGPO's step-level returns, consistent with R:
 * under `success` the whole reward 10·won arrives at the last step (0 before it), as in
 * ALFWorld; under `score` r_t is the env's step reward. Both subtract p·[action t invalid].
 */
export function stepRewards(trajectory: Trajectory, options: ScoreOptions): number[] {
  checkNumber("invalidPenalty", options.invalidPenalty, { min: 0 });
  const last = trajectory.steps.length - 1;
  return trajectory.steps.map((step, t) => {
    const base = options.rewardSource === "success"
      ? (t === last && trajectory.won ? SUCCESS_REWARD : 0)
      : step.reward;
    return base - (step.valid ? 0 : options.invalidPenalty);
  });
}

/** Indices of `keys` grouped by key value, in first-seen order. */
function groupIndices(keys: readonly string[]): number[][] {
  const groups = new Map<string, number[]>();
  keys.forEach((key, i) => {
    const group = groups.get(key);
    if (group) group.push(i);
    else groups.set(key, [i]);
  });
  return [...groups.values()];
}

/**
 * Group-relative normalisation: for each group of indices, writes into `out`
 * (x − mean)/(std + ε) (`mean_std`, std unbiased: divides by n − 1) or x − mean (`mean`).
 * A group of one sample or of all-equal values gets exactly 0 (never NaN).
 */
export function groupNormalize(
  values: ArrayLike<number>,
  groups: readonly (readonly number[])[],
  options: { norm: AdvantageNorm; epsilon?: number },
): Float64Array {
  const epsilon = options.epsilon ?? 1e-6;
  checkNumber("epsilon", epsilon, { min: 0 });
  const out = new Float64Array(values.length);
  for (const group of groups) {
    const n = group.length;
    if (n < 2) continue; // a single sample has no relative signal: 0
    let min = Infinity, max = -Infinity, sum = 0;
    for (const i of group) {
      const v = values[i];
      min = Math.min(min, v);
      max = Math.max(max, v);
      sum += v;
    }
    if (min === max) continue; // all equal: 0 exactly, not (v − mean) rounding noise
    const mean = sum / n;
    let denom = 1;
    if (options.norm === "mean_std") {
      let ss = 0;
      for (const i of group) ss += (values[i] - mean) ** 2;
      denom = Math.sqrt(ss / (n - 1)) + epsilon; // unbiased std, as torch.std
    }
    for (const i of group) out[i] = (values[i] - mean) / denom;
  }
  return out;
}

/**
 * GRPO, pooled over turns (workers/seed/README.md, Algorithm, step 2; the SEED paper, §3): every sample of a
 * task, over all G trajectories and all their turns, forms one group; A_i = (s_i − mean)/(std + ε)
 * or s_i − mean. Output (N,), aligned with `samples`.
 */
export function grpoAdvantages(
  samples: readonly AdvantageSample[],
  options: AdvantageOptions,
): Float64Array {
  const groups = groupIndices(samples.map((s) => s.taskId));
  return groupNormalize(samples.map((s) => s.score), groups, options);
}

/**
 * Discounted step returns (GiGPO eq. 5): R_t = Σ_{k ≥ t} γ^{k−t} r_k along each trajectory,
 * ordered by `turn`. Output (N,), aligned with `samples`.
 */
export function discountedReturns(
  samples: readonly AdvantageSample[],
  gamma: number,
): Float64Array {
  checkNumber("gamma", gamma, { min: 0, max: 1 });
  const out = new Float64Array(samples.length);
  for (const group of groupIndices(samples.map((s) => s.trajectoryId))) {
    const ordered = [...group].sort((a, b) => samples[a].turn - samples[b].turn);
    let running = 0;
    for (let k = ordered.length - 1; k >= 0; k--) {
      running = samples[ordered[k]].stepReward + gamma * running;
      out[ordered[k]] = running;
    }
  }
  return out;
}

/**
 * Anchor-state groups (GiGPO eq. 6): samples of the same task whose observation text is
 * identical, across the task's trajectories and turns. Returns index groups in first-seen order.
 */
export function anchorStateGroups(samples: readonly AdvantageSample[]): number[][] {
  // JSON of the pair keeps (task, observation) unambiguous whatever characters they contain.
  return groupIndices(samples.map((s) => JSON.stringify([s.taskId, s.observation])));
}

/**
 * GiGPO (Feng et al. 2025, eq. 8): A = A^E + ω·A^S, where A^E is the pooled GRPO advantage above
 * (the episode-level relative advantage, eq. 3, pooled across steps as verl-agent does) and A^S
 * normalises the discounted step returns (eq. 5) within anchor-state groups (eqs. 6–7) with the
 * same `norm`. Singleton anchor groups contribute 0. Output (N,).
 */
export function gigpoAdvantages(
  samples: readonly AdvantageSample[],
  options: AdvantageOptions,
): Float64Array {
  const gamma = options.gamma ?? 0.95;
  const stepWeight = options.stepWeight ?? 1;
  checkNumber("stepWeight", stepWeight, { min: 0 });
  const episode = grpoAdvantages(samples, options);
  const returns = discountedReturns(samples, gamma);
  const step = groupNormalize(returns, anchorStateGroups(samples), options);
  return episode.map((a, i) => a + stepWeight * step[i]);
}

/** The typed registry of advantage estimators (JobSpec `advantage.estimator`). */
export const advantageEstimators: Record<AdvantageEstimatorName, AdvantageEstimator> = {
  grpo: grpoAdvantages,
  gigpo: gigpoAdvantages,
};

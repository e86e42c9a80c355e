/**
 * Advantage estimators of the SEED trainer (workers/seed/README.md, Algorithm, steps 1–2), as pure
 * functions in a typed registry, as verl and TRL do (workers/seed/README.md, Extending).
 *
 * SEED (Wu et al. 2026, "SEED: Self-Evolving On-Policy Distillation", arXiv 2607.14777) keeps
 * the outcome-based GRPO objective: every turn of a multi-turn episode is one training sample,
 * scored with the episode reward minus an invalid-action penalty, and normalised within the group
 * of all samples of one rollout group (the G copies of one drawn task). GiGPO (Feng et al. 2025,
 * "Group-in-Group Policy Optimization for LLM Agent Training", arXiv 2505.10978) adds a
 * step-level relative advantage computed inside "anchor-state" groups: samples of the same rollout
 * group whose observation is identical.
 *
 * Both follow the reference code (github.com/lljcic2024-boop/agent_rl at 2cf2fad,
 * `gigpo/core_gigpo.py` and `verl/trainer/ppo/core_algos.py`; workers/seed/README.md, "Departures
 * from the authors' code"): one group per rollout group (their `uid`), never per task id, so a
 * batch that draws one task twice has two groups; an episode group of one sample keeps its raw
 * score (their mean 0, std 1); equal scores give (s − mean)/(0 + ε), no special case; the
 * invalid-action penalty is subtracted from a step's discounted return after discounting.
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

/**
 * Reward for a won episode under `rewardSource: "success"` (workers/seed/README.md, Algorithm, step
 * 1).
 */
export const SUCCESS_REWARD = 10;

/** The fields of one training sample (one turn) that the estimators read. */
export interface AdvantageSample {
  /**
   * Index of the sample's rollout group in the batch (0..B−1, one per drawn task: its G copies):
   * samples sharing it form one GRPO group, pooled over the group's trajectories and turns (the
   * reference code's `uid`). Two draws of the same task are two groups.
   */
  taskIndex: number;
  /** Trajectory id: GiGPO discounts step rewards along it. */
  trajectoryId: string;
  /** 0-based turn index within the trajectory (orders the discounted return). */
  turn: number;
  /** Per-sample score s_i = R − p·[action i invalid] (reward units). */
  score: number;
  /** Per-step reward r_t (reward units, no penalty), used only by GiGPO's step-level returns. */
  stepReward: number;
  /**
   * p·[action invalid] (reward units): GiGPO subtracts it from this step's discounted return,
   * after discounting (the reference code's `apply_invalid_action_penalty` on `step_rewards`).
   * Absent: 0.
   */
  stepPenalty?: number;
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
 * Episode reward R (workers/seed/README.md, Algorithm, step 1): `success` → 10·won, `score` →
 * `trajectory.score` (the sum of step rewards, or the env's final score where it has one).
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
 * Per-sample scores of one trajectory (T,): s_t = R − p·[action t invalid] (workers/seed/README.md,
 * Algorithm, step 1). Throws `SeedOptionError` when p is negative or not finite.
 */
export function sampleScores(trajectory: Trajectory, options: ScoreOptions): number[] {
  checkNumber("invalidPenalty", options.invalidPenalty, { min: 0 });
  const reward = episodeReward(trajectory, options.rewardSource);
  return trajectory.steps.map((step) => reward - (step.valid ? 0 : options.invalidPenalty));
}

/**
 * Per-step rewards r_t of one trajectory (T,) for GiGPO's step-level returns, consistent with R:
 * under `success` the whole reward 10·won arrives at the last step (0 before it), as in
 * ALFWorld; under `score` r_t is the env's step reward. No penalty: `stepPenalties` is subtracted
 * from the discounted return instead (`gigpoAdvantages`).
 */
export function stepRewards(
  trajectory: Trajectory,
  options: Pick<ScoreOptions, "rewardSource">,
): number[] {
  const last = trajectory.steps.length - 1;
  return trajectory.steps.map((step, t) =>
    options.rewardSource === "success"
      ? (t === last && trajectory.won ? SUCCESS_REWARD : 0)
      : step.reward
  );
}

/**
 * Per-step penalties of one trajectory (T,): p·[action t invalid] (reward units). Throws
 * `SeedOptionError` when p is negative or not finite.
 */
export function stepPenalties(
  trajectory: Trajectory,
  options: Pick<ScoreOptions, "invalidPenalty">,
): number[] {
  checkNumber("invalidPenalty", options.invalidPenalty, { min: 0 });
  return trajectory.steps.map((step) => (step.valid ? 0 : options.invalidPenalty));
}

/** Indices of `keys` grouped by key value, in first-seen order. */
function groupIndices(keys: readonly (string | number)[]): number[][] {
  const groups = new Map<string | number, number[]>();
  keys.forEach((key, i) => {
    const group = groups.get(key);
    if (group) group.push(i);
    else groups.set(key, [i]);
  });
  return [...groups.values()];
}

/**
 * What a group of one sample gets: `raw` its value (mean 0, std 1, as the reference code's
 * `episode_norm_reward`: x/(1 + ε) under `mean_std`, x under `mean`); `zero` 0 (mean x, std 1,
 * as its `step_norm_reward`).
 */
export type SingletonRule = "raw" | "zero";

/**
 * Group-relative normalisation: for each group of indices, writes into `out`
 * (x − mean)/(std + ε) (`mean_std`, std unbiased: divides by n − 1, as torch.std) or x − mean
 * (`mean`). A group of one sample follows `singleton` (default `zero`). Equal values are not a
 * special case (the reference code has none): their std is ~0, so they get (x − mean)/ε, the
 * float rounding of the mean divided by ε (−1.4e-11 for three scores 0.1; exactly 0 when the
 * mean is exact, as for 0 or 10).
 */
export function groupNormalize(
  values: ArrayLike<number>,
  groups: readonly (readonly number[])[],
  options: { norm: AdvantageNorm; epsilon?: number; singleton?: SingletonRule },
): Float64Array {
  const epsilon = options.epsilon ?? 1e-6;
  checkNumber("epsilon", epsilon, { min: 0 });
  const out = new Float64Array(values.length);
  for (const group of groups) {
    const n = group.length;
    let mean = 0, std = 1;
    if (n === 1) {
      if ((options.singleton ?? "zero") === "zero") mean = values[group[0]];
    } else {
      let sum = 0;
      for (const i of group) sum += values[i];
      mean = sum / n;
      let ss = 0;
      for (const i of group) ss += (values[i] - mean) ** 2;
      std = Math.sqrt(ss / (n - 1));
    }
    const denom = options.norm === "mean_std" ? std + epsilon : 1;
    for (const i of group) out[i] = (values[i] - mean) / denom;
  }
  return out;
}

/**
 * GRPO, pooled over turns (workers/seed/README.md, Algorithm, step 2; the SEED paper, §3): every
 * sample of a rollout group (`taskIndex`), over all G trajectories and all their turns, forms one
 * group; A_i = (s_i − mean)/(std + ε) or s_i − mean; a group of one sample keeps its raw score (the
 * reference code's `episode_norm_reward` with `compute_mean_std_cross_steps`). Output (N,),
 * aligned with `samples`.
 */
export function grpoAdvantages(
  samples: readonly AdvantageSample[],
  options: AdvantageOptions,
): Float64Array {
  const groups = groupIndices(samples.map((s) => s.taskIndex));
  return groupNormalize(samples.map((s) => s.score), groups, { ...options, singleton: "raw" });
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
 * Anchor-state groups (GiGPO eq. 6): samples of the same rollout group (`taskIndex`) whose
 * observation text is identical, across the group's trajectories and turns (the reference code's
 * `build_step_group` without similarity). Returns index groups in first-seen order.
 */
export function anchorStateGroups(samples: readonly AdvantageSample[]): number[][] {
  // JSON of the pair keeps (group, observation) unambiguous whatever characters they contain.
  return groupIndices(samples.map((s) => JSON.stringify([s.taskIndex, s.observation])));
}

/**
 * The step returns GiGPO normalises: R_t − p·[action t invalid], the discounted return
 * (`discountedReturns`) minus the step's own `stepPenalty` after discounting, so an invalid
 * action costs p on its own step only (the reference code's `apply_invalid_action_penalty`, which
 * subtracts it from `step_rewards` after `compute_step_discounted_returns`). Output (N,).
 */
export function penalizedStepReturns(
  samples: readonly AdvantageSample[],
  gamma: number,
): Float64Array {
  return discountedReturns(samples, gamma).map((r, i) => r - (samples[i].stepPenalty ?? 0));
}

/**
 * GiGPO (Feng et al. 2025, eq. 8): A = A^E + ω·A^S, where A^E is the pooled GRPO advantage above
 * (the episode-level relative advantage, eq. 3, pooled across steps as verl-agent does) and A^S
 * normalises the penalised step returns (`penalizedStepReturns`, eq. 5) within anchor-state
 * groups (eqs. 6–7) with the same `norm`. Singleton anchor groups contribute 0. Output (N,).
 */
export function gigpoAdvantages(
  samples: readonly AdvantageSample[],
  options: AdvantageOptions,
): Float64Array {
  const gamma = options.gamma ?? 0.95;
  const stepWeight = options.stepWeight ?? 1;
  checkNumber("stepWeight", stepWeight, { min: 0 });
  const episode = grpoAdvantages(samples, options);
  const returns = penalizedStepReturns(samples, gamma);
  const step = groupNormalize(returns, anchorStateGroups(samples), {
    ...options,
    singleton: "zero",
  });
  return episode.map((a, i) => a + stepWeight * step[i]);
}

/** The typed registry of advantage estimators (JobSpec `advantage.estimator`). */
export const advantageEstimators: Record<AdvantageEstimatorName, AdvantageEstimator> = {
  grpo: grpoAdvantages,
  gigpo: gigpoAdvantages,
};

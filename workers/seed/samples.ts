/**
 * From trajectories to training samples (workers/seed/README.md, Algorithm, steps 1–5): each turn
 * is one sample (prompt_i, response_i) with its score and advantage; the teacher mask says which
 * samples get a distillation signal; advantages broadcast to response tokens; `ppo_epochs` ×
 * shuffled mini-batches partition the samples for the update.
 *
 * Everything here is pure; randomness comes in as an `rng: () => number` in [0, 1), so the
 * trainer can pass its seeded, checkpointed generator.
 */
import type { Trajectory } from "../envs/types.ts";
import {
  type AdvantageEstimatorName,
  advantageEstimators,
  type AdvantageNorm,
  type AdvantageSample,
  type RewardSource,
  sampleScores,
  stepPenalties,
  stepRewards,
} from "./advantage.ts";
import { checkNumber, SeedOptionError } from "./errors.ts";
import type { ObservationImage, RolloutTrajectory } from "./rollout.ts";

/** One training sample: one turn of one trajectory (workers/seed/README.md, Algorithm, step 1). */
export interface TurnSample extends AdvantageSample {
  /** Position of the sample in the batch (0-based; rows of every (N, …) tensor). */
  index: number;
  /** The ordinary prompt the policy saw at this turn. */
  prompt: string;
  /** The images of the prompt's `<image>` placeholders (vision variants; absent for text). */
  images?: ObservationImage[];
  /** The sampled response text. */
  response: string;
  /** The sampled response's token ids as scored (`RolloutStep.responseIds`), when known. */
  responseIds?: number[];
  /** The parsed action ("" when none). */
  action: string;
  /** Whether the action was parsed and admissible. */
  valid: boolean;
  /** The task's id (the same task drawn twice has one id and two `taskIndex`es). */
  taskId: string;
  /** Copy of the task (0..G−1). */
  copyIndex: number;
  /** Whether the sample's trajectory was won. */
  won: boolean;
  /** Advantage A_i (normalised score units), broadcast to every response token. */
  advantage: number;
}

/** Options of `buildSamples` (JobSpec `advantage.*`). */
export interface BuildSamplesOptions {
  rewardSource: RewardSource;
  /** Invalid-action penalty p (default in the JobSpec: 0.1). */
  invalidPenalty: number;
  estimator: AdvantageEstimatorName;
  norm: AdvantageNorm;
  /** ε of `mean_std` (default 1e-6). */
  epsilon?: number;
  /** GiGPO discount γ (default 0.95). */
  gamma?: number;
  /** GiGPO step weight ω (default 1). */
  stepWeight?: number;
}

/**
 * Turns rollout trajectories into samples, one per turn in trajectory order, with scores
 * s_i = R − p·[invalid] and advantages from the chosen estimator (grouped by rollout group,
 * `taskIndex`: one group per drawn task, as the reference code's `uid`).
 */
export function buildSamples(
  trajectories: readonly RolloutTrajectory[],
  options: BuildSamplesOptions,
): TurnSample[] {
  const samples: TurnSample[] = [];
  for (const trajectory of trajectories) {
    const scores = sampleScores(trajectory, options);
    const rewards = stepRewards(trajectory, options);
    const penalties = stepPenalties(trajectory, options);
    trajectory.steps.forEach((step, turn) => {
      samples.push({
        index: samples.length,
        prompt: step.prompt,
        ...(step.images ? { images: step.images } : {}),
        response: step.response,
        ...(step.responseIds ? { responseIds: step.responseIds } : {}),
        action: step.action,
        valid: step.valid,
        observation: step.observation,
        taskId: trajectory.task.id,
        trajectoryId: trajectory.id,
        taskIndex: trajectory.taskIndex,
        copyIndex: trajectory.copyIndex,
        turn,
        won: trajectory.won,
        score: scores[turn],
        stepReward: rewards[turn],
        stepPenalty: penalties[turn],
        advantage: 0,
      });
    });
  }
  if (!Object.hasOwn(advantageEstimators, options.estimator)) {
    throw new SeedOptionError(
      `Cannot compute advantages as estimator must be one of ${
        Object.keys(advantageEstimators).join(", ")
      }: current value is ${options.estimator}`,
      { option: "estimator", value: options.estimator },
    );
  }
  const advantages = advantageEstimators[options.estimator](samples, options);
  samples.forEach((s, i) => s.advantage = advantages[i]);
  return samples;
}

/** Which trajectories the analyzer reads (JobSpec `seed.analyze`). */
export type AnalyzeMode = "all" | "failed_only";

/** The trajectories to analyse: all of them, or only those not won (`failed_only`). */
export function selectForAnalysis<T extends Trajectory>(
  trajectories: readonly T[],
  mode: AnalyzeMode,
): T[] {
  return mode === "all" ? [...trajectories] : trajectories.filter((t) => !t.won);
}

/**
 * Teacher mask (N,) of 0/1 (workers/seed/README.md, Algorithm, step 4): 1 when the sample's
 * trajectory has a parsed, non-empty skill in `skills` (keyed by trajectory id); 0 when its
 * analysis failed to parse (null), or it was not analysed (absent, e.g. a won trajectory under
 * `failed_only`). Masked samples get no distillation signal (their L_opd tokens are excluded).
 */
export function teacherMask(
  samples: readonly Pick<TurnSample, "trajectoryId">[],
  skills: ReadonlyMap<string, string | null>,
): Uint8Array {
  return Uint8Array.from(samples, (s) => {
    const skill = skills.get(s.trajectoryId);
    return typeof skill === "string" && skill.trim() !== "" ? 1 : 0;
  });
}

/** Per-sample values broadcast to response tokens, padded to a common width. */
export interface TokenBroadcast {
  /** (N, T) row-major: row i holds values[i] on its first tokenCounts[i] tokens, 0 after. */
  values: Float32Array;
  /** (N, T) row-major: 1 on response tokens, 0 on padding. */
  mask: Float32Array;
  /** N rows. */
  rows: number;
  /** T columns (`padTo`, or the longest response). */
  width: number;
}

/**
 * Broadcasts one value per sample (e.g. the advantage, workers/seed/README.md, Algorithm, step 2)
 * to each of its response tokens. `tokenCounts[i]` is the response length of sample i in tokens.
 * Throws `SeedOptionError` when lengths differ, a count is negative, or a count exceeds `padTo`.
 */
export function broadcastToTokens(
  values: ArrayLike<number>,
  tokenCounts: readonly number[],
  padTo?: number,
): TokenBroadcast {
  if (values.length !== tokenCounts.length) {
    throw new SeedOptionError(
      `Cannot broadcast to tokens as tokenCounts must have one entry per value (${values.length}): current value is ${tokenCounts.length}`,
      { option: "tokenCounts", value: tokenCounts.length },
    );
  }
  tokenCounts.forEach((c) => checkNumber("tokenCounts[i]", c, { min: 0, integer: true }));
  const longest = tokenCounts.reduce((a, b) => Math.max(a, b), 0);
  const width = padTo ?? longest;
  checkNumber("padTo", width, { min: longest, integer: true });
  const rows = values.length;
  const out = new Float32Array(rows * width); // (N, T)
  const mask = new Float32Array(rows * width); // (N, T)
  for (let i = 0; i < rows; i++) {
    out.fill(values[i], i * width, i * width + tokenCounts[i]);
    mask.fill(1, i * width, i * width + tokenCounts[i]);
  }
  return { values: out, mask, rows, width };
}

/**
 * Mean of per-token values over all response tokens of each trajectory, e.g. the teacher gap
 * Δ = ℓ_T − ℓ_old (nats) for the skill library. `tokenValues[i]` holds sample i's response-token
 * values (padding excluded). Trajectories with no tokens are absent from the result.
 */
export function meanPerTrajectory(
  samples: readonly Pick<TurnSample, "trajectoryId">[],
  tokenValues: readonly ArrayLike<number>[],
): Map<string, number> {
  const sums = new Map<string, { total: number; count: number }>();
  samples.forEach((s, i) => {
    const values = tokenValues[i] ?? [];
    const acc = sums.get(s.trajectoryId) ?? { total: 0, count: 0 };
    for (let k = 0; k < values.length; k++) acc.total += values[k];
    acc.count += values.length;
    sums.set(s.trajectoryId, acc);
  });
  const out = new Map<string, number>();
  for (const [id, { total, count }] of sums) if (count > 0) out.set(id, total / count);
  return out;
}

/** Options of `miniBatches` (JobSpec `optim.ppo_epochs`, `optim.mini_batch_size`). */
export interface MiniBatchOptions {
  /** Samples per mini-batch (≥ 1); the last batch of an epoch may be smaller. */
  miniBatchSize: number;
  /** Passes over the samples (≥ 1). */
  epochs: number;
  /** Uniform random numbers in [0, 1), e.g. the trainer's seeded RNG. */
  rng: () => number;
}

/**
 * Partitions sample indices 0..n−1 into `epochs` independent shuffles (Fisher–Yates with `rng`),
 * each cut into consecutive mini-batches: shape (epochs, ⌈n / miniBatchSize⌉, ≤ miniBatchSize).
 * Every epoch holds every index exactly once.
 */
export function miniBatches(n: number, options: MiniBatchOptions): number[][][] {
  checkNumber("n", n, { min: 0, integer: true });
  checkNumber("miniBatchSize", options.miniBatchSize, { min: 1, integer: true });
  checkNumber("epochs", options.epochs, { min: 1, integer: true });
  const epochs: number[][][] = [];
  for (let e = 0; e < options.epochs; e++) {
    const order = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const r = options.rng();
      if (!(r >= 0 && r < 1)) {
        throw new SeedOptionError(
          `Cannot shuffle as rng() must return a number in [0, 1): current value is ${r}`,
          { option: "rng", value: r },
        );
      }
      const j = Math.floor(r * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    const batches: number[][] = [];
    for (let start = 0; start < n; start += options.miniBatchSize) {
      batches.push(order.slice(start, start + options.miniBatchSize));
    }
    epochs.push(batches);
  }
  return epochs;
}

/**
 * Per-step metrics of the SEED trainer that do not depend on the model (every step writes a
 * metrics row; jobs/README.md, "Data flow of one job", step 3): success rate, mean reward, analyzer
 * parse rate, skills added, tokens, seconds per named phase (the training step as named, timed
 * phases), an ETA estimate, and the re-score phase's teacher gaps Δ = ℓ_T − ℓ_old with their
 * metrics and dump records. Loss terms (pg/opd/kl, gate mean, entropy) come from the update, the
 * signal metrics (corr(Δ, A), skill quality) from signal_metrics.ts; the trainer merges them.
 */
import type { Trajectory } from "../envs/types.ts";
import { episodeReward, type RewardSource } from "./advantage.ts";
import { checkNumber, SeedOptionError } from "./errors.ts";

/**
 * Metrics carried by the per-step `step` event (all metrics go to the metrics series): outcome,
 * the update's loss terms (named as the SEED objective's outputs, objective.ts), analysis and
 * time.
 */
export const STEP_EVENT_METRICS = [
  "success_rate",
  "mean_reward",
  "invalid_action_rate",
  "loss",
  "pg_loss",
  "opd_loss",
  "kl_loss",
  "entropy",
  "analyzer_parse_rate",
  "skills_added",
  "step_seconds",
] as const;

/** The named phases of one training step (and evaluation). */
export const PHASES = ["rollout", "analyze", "rescore", "advantage", "update", "eval"] as const;

/** One named phase. */
export type Phase = typeof PHASES[number];

/** Seconds spent per phase. */
export type PhaseSeconds = Record<Phase, number>;

/**
 * Accumulates wall time per phase. `now` returns milliseconds (default `performance.now`); pass a
 * fake clock in tests. A phase may run several times per step; its seconds add up.
 */
export class PhaseTimer {
  readonly #now: () => number;
  readonly #seconds: PhaseSeconds = zeroPhases();
  readonly #started = new Map<Phase, number>();

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /** Starts `phase`. Throws `SeedOptionError` when it is already running. */
  start(phase: Phase): void {
    if (this.#started.has(phase)) {
      throw new SeedOptionError(
        `Cannot start phase ${phase} as it must be stopped first: current state is running`,
        { option: "phase", value: phase },
      );
    }
    this.#started.set(phase, this.#now());
  }

  /** Stops `phase` and returns the seconds of this run. Throws when it was not started. */
  stop(phase: Phase): number {
    const started = this.#started.get(phase);
    if (started === undefined) {
      throw new SeedOptionError(
        `Cannot stop phase ${phase} as it must be running: current state is stopped`,
        { option: "phase", value: phase },
      );
    }
    this.#started.delete(phase);
    const seconds = (this.#now() - started) / 1000;
    this.#seconds[phase] += seconds;
    return seconds;
  }

  /** Runs `f` inside `phase` (stopped even when `f` throws) and returns its result. */
  async time<T>(phase: Phase, f: () => T | Promise<T>): Promise<T> {
    this.start(phase);
    try {
      return await f();
    } finally {
      this.stop(phase);
    }
  }

  /** Seconds per phase accumulated so far (a copy). */
  seconds(): PhaseSeconds {
    return { ...this.#seconds };
  }

  /** Sum of all phases' seconds. */
  total(): number {
    return PHASES.reduce((sum, p) => sum + this.#seconds[p], 0);
  }
}

/** Every phase at 0 s. */
export function zeroPhases(): PhaseSeconds {
  return { rollout: 0, analyze: 0, rescore: 0, advantage: 0, update: 0, eval: 0 };
}

/** Inputs of `stepMetrics`. */
export interface StepMetricsInput {
  /** The step's rollout trajectories. */
  trajectories: readonly Trajectory[];
  /** How R is computed (JobSpec `advantage`), for `mean_reward`. */
  rewardSource: RewardSource;
  /** Trajectories sent to the analyzer. */
  analyzed: number;
  /** Of those, analyses whose skill parsed. */
  parsed: number;
  /** Skills new to the library this step. */
  skillsAdded: number;
  /** Response tokens generated this step (rollout + analysis). */
  tokensGenerated: number;
  /** Response tokens in the update's loss (per epoch × epochs). */
  tokensTrained: number;
  /** Seconds per phase of this step. */
  seconds: PhaseSeconds;
}

/** Model-independent metrics of one step (snake_case: they are stored and served as series). */
export interface StepMetrics {
  /** Share of trajectories won, in [0, 1]. */
  success_rate: number;
  /** Mean episode reward R (reward units). */
  mean_reward: number;
  /** Mean env score (`trajectory.score`). */
  mean_score: number;
  /** Mean turns per trajectory. */
  mean_turns: number;
  /** Share of turns whose action was invalid, in [0, 1]. */
  invalid_action_rate: number;
  /** parsed / analyzed, in [0, 1]; null when nothing was analysed (e.g. `grpo`). */
  analyzer_parse_rate: number | null;
  analyzed: number;
  skills_added: number;
  tokens_generated: number;
  tokens_trained: number;
  /** (tokens_generated + tokens_trained) / step seconds; 0 when no time was measured. */
  tokens_per_second: number;
  /** Seconds of the whole step (sum of phases). */
  step_seconds: number;
  seconds: PhaseSeconds;
}

/** Mean of `values`, 0 for none. */
function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}

/** Aggregates one step's metrics. Throws `SeedOptionError` when parsed > analyzed or counts < 0. */
export function stepMetrics(input: StepMetricsInput): StepMetrics {
  for (
    const key of ["analyzed", "parsed", "skillsAdded", "tokensGenerated", "tokensTrained"] as const
  ) {
    checkNumber(key, input[key], { min: 0, integer: true });
  }
  checkNumber("parsed", input.parsed, { min: 0, max: input.analyzed, integer: true });
  const t = input.trajectories;
  const turns = t.reduce((sum, x) => sum + x.steps.length, 0);
  const invalid = t.reduce((sum, x) => sum + x.steps.filter((s) => !s.valid).length, 0);
  const stepSeconds = PHASES.reduce((sum, p) => sum + input.seconds[p], 0);
  const tokens = input.tokensGenerated + input.tokensTrained;
  return {
    success_rate: mean(t.map((x) => (x.won ? 1 : 0))),
    mean_reward: mean(t.map((x) => episodeReward(x, input.rewardSource))),
    mean_score: mean(t.map((x) => x.score)),
    mean_turns: t.length === 0 ? 0 : turns / t.length,
    invalid_action_rate: turns === 0 ? 0 : invalid / turns,
    analyzer_parse_rate: input.analyzed === 0 ? null : input.parsed / input.analyzed,
    analyzed: input.analyzed,
    skills_added: input.skillsAdded,
    tokens_generated: input.tokensGenerated,
    tokens_trained: input.tokensTrained,
    tokens_per_second: stepSeconds > 0 ? tokens / stepSeconds : 0,
    step_seconds: stepSeconds,
    seconds: { ...input.seconds },
  };
}

/**
 * Flattens metrics into `name → value` for a metrics series: phases become `seconds_<phase>`;
 * null values are left out.
 */
export function metricSeries(metrics: StepMetrics): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(metrics)) {
    if (typeof value === "number") out[key] = value;
  }
  for (const phase of PHASES) out[`seconds_${phase}`] = metrics.seconds[phase];
  return out;
}

/** Inputs of `estimateEtaSeconds`. */
export interface EtaInput {
  /** Steps finished so far (≥ 0). */
  completedSteps: number;
  /** Steps of the job (≥ completedSteps). */
  totalSteps: number;
  /** Seconds of each finished step, oldest first (e.g. `step_seconds`, eval included). */
  stepSeconds: readonly number[];
  /** Recent steps averaged (default 5): early steps (warm-up, compilation) weigh less. */
  window?: number;
}

/**
 * Remaining seconds ≈ mean of the last `window` step durations × remaining steps.
 * 0 when done; null when no step has been timed yet.
 */
export function estimateEtaSeconds(input: EtaInput): number | null {
  const window = input.window ?? 5;
  checkNumber("completedSteps", input.completedSteps, { min: 0, integer: true });
  checkNumber("totalSteps", input.totalSteps, { min: input.completedSteps, integer: true });
  checkNumber("window", window, { min: 1, integer: true });
  const remaining = input.totalSteps - input.completedSteps;
  if (remaining === 0) return 0;
  const recent = input.stepSeconds.slice(-window);
  if (recent.length === 0) return null;
  return mean(recent) * remaining;
}

/**
 * The teacher gaps of one step's re-scored turns: Δ = ℓ_T − ℓ_old per response token, in nats,
 * where ℓ_T is a token's log-probability under the teacher prompt (the skill inserted) and ℓ_old
 * under the ordinary prompt, both from θ_old at the scoring temperature (README.md, Algorithm,
 * step 4). `teacher[i]` (T_i,) is null where sample i has no teacher pass (no parsed skill, or
 * GRPO); its gap is then null. Float32 inputs give Float32 gaps (the subtraction is rounded to
 * float32, as the score graph's outputs are).
 * @throws RangeError when `teacher` and `old` differ in length, or a turn's token counts differ.
 */
export function teacherGaps(
  teacher: readonly (Float32Array | null)[],
  old: readonly ArrayLike<number>[],
): (Float32Array | null)[] {
  if (teacher.length !== old.length) {
    throw new RangeError(
      `Cannot compute teacher gaps as teacher and old must have one row per sample: current lengths are ${teacher.length} and ${old.length}`,
    );
  }
  return teacher.map((t, i) => {
    if (t === null) return null;
    if (t.length !== old[i].length) {
      throw new RangeError(
        `Cannot compute the teacher gaps of sample ${i} as both passes must score the same tokens: current counts are ${t.length} and ${
          old[i].length
        }`,
      );
    }
    return t.map((x, k) => x - old[i][k]);
  });
}

/** One re-scored turn's teacher gaps, as a rollout dump shows them. */
export interface TokenGap {
  trajectoryId: string;
  /** 0-based turn within the trajectory. */
  turn: number;
  /** The sampled response token ids (T,). */
  responseIds: readonly number[];
  /** Δ = ℓ_T − ℓ_old per response token (T,), nats (float32 from the score graph). */
  gaps: ArrayLike<number>;
  /** The critical-step skill the turn was scored under; absent: its trajectory's episode skill. */
  stepSkill?: string;
}

/**
 * The {@link TokenGap} of every turn that has teacher gaps, in sample order: `gaps[i]` (T_i,) of
 * `samples[i]`, whose scored response ids are `responses[i]` (T_i,); `stepSkills` (trajectory id →
 * turn → skill) names the turns scored under a critical-step skill.
 */
export function tokenGapsOf(
  samples: readonly { trajectoryId: string; turn: number }[],
  gaps: readonly (ArrayLike<number> | null)[],
  responses: readonly (readonly number[])[],
  stepSkills: ReadonlyMap<string, ReadonlyMap<number, string>> = new Map(),
): TokenGap[] {
  return samples.flatMap((s, i) => {
    const g = gaps[i];
    if (!g) return [];
    const stepSkill = stepSkills.get(s.trajectoryId)?.get(s.turn);
    return [{
      trajectoryId: s.trajectoryId,
      turn: s.turn,
      responseIds: responses[i],
      gaps: g,
      ...(stepSkill !== undefined ? { stepSkill } : {}),
    }];
  });
}

/** Inputs of {@link rescoreMetrics}. */
export interface RescoreMetricsInput {
  /** The step's turn samples with their advantages A (one per turn). */
  samples: readonly { advantage: number }[];
  /** Per sample: its teacher gaps Δ (T,), or null ({@link teacherGaps}). */
  gaps: readonly (ArrayLike<number> | null)[];
  /** Wall seconds of the teacher pass (0 when none ran). */
  teacherSeconds: number;
}

/**
 * The step's re-score metrics: `samples` (turns in the update), `teacher_samples` (turns with a
 * teacher pass), `teacher_gap_mean` (mean Δ over every teacher token, nats; left out when there is
 * none), `teacher_pass_seconds`, and `advantage_abs_mean` (mean |A| over the turns, 0 for none).
 */
export function rescoreMetrics(input: RescoreMetricsInput): Record<string, number> {
  const { samples, gaps } = input;
  let gapTokens = 0, gapSum = 0, withTeacher = 0;
  for (const g of gaps) {
    if (g === null) continue;
    withTeacher++;
    gapTokens += g.length;
    let row = 0; // a turn's sum first, then across turns
    for (let k = 0; k < g.length; k++) row += g[k];
    gapSum += row;
  }
  return {
    samples: samples.length,
    teacher_samples: withTeacher,
    ...(gapTokens > 0 ? { teacher_gap_mean: gapSum / gapTokens } : {}),
    teacher_pass_seconds: input.teacherSeconds,
    advantage_abs_mean: samples.reduce((n, s) => n + Math.abs(s.advantage), 0) /
      Math.max(1, samples.length),
  };
}

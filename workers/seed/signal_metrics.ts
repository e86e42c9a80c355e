/**
 * Is there a distillation signal? Per-step diagnostics of SEED's teacher gap Δ = ℓ_T − ℓ_old (nats
 * per response token, workers/seed/README.md, Algorithm, steps 4–5) and of the skills it comes
 * from. They are the numbers that tell a SEED run from GRPO plus noise: when a skill in the prompt
 * does not move the policy's action probabilities, Δ ≈ 0 on every token and L_opd carries no
 * information.
 *
 * Metric names (stored in the metrics series, announced in the `step` event):
 * - `teacher_gap_won_mean`, `teacher_gap_lost_mean`: mean Δ over the response tokens of samples
 *   (turns) with a teacher signal whose trajectory was won / not won.
 * - `old_logprob_won_mean`: mean ℓ_old over those won tokens. Since ℓ_T ≤ 0, Δ ≤ −ℓ_old on every
 *   token, so `teacher_gap_won_mean` ≤ −`old_logprob_won_mean`: a confident policy (ℓ_old ≈ 0 on
 *   the actions of its wins) leaves a skill no room to raise them, whatever the skill says.
 * - `teacher_gap_advantage_corr`: Pearson correlation, over samples with a teacher signal, of the
 *   sample's mean Δ (over its tokens) with its advantage A. Positive when the skill raises the
 *   probability of good actions and lowers that of bad ones. Left out when every such A is zero
 *   (|A| ≤ {@link ZERO_ADVANTAGE}: equal scores leave float noise of ~1e-11, not a signal).
 * - `zero_advantage_group_share`: share of GRPO groups (samples of one rollout group, `taskIndex`,
 *   see advantage.ts) whose advantages are all zero: such a group gives no policy-gradient signal.
 * - `all_fail_group_share`: share of groups none of whose trajectories was won (no outcome signal;
 *   with an invalid-action penalty their advantages need not be zero).
 * - `skills_judged`, `skill_well_formed_rate`, `skill_truthful_rate`: of this step's parsed
 *   skills, the share the environment's reference-analyzer grammar accepts and the share that
 *   state only true facts of their own trajectory (`judgeSkill`, workers/envs/skill_judge.ts;
 *   household: the workflow of a win, or any mistake the loss really shows).
 * - `skill_reference_match_rate`: the share equal (normalised) to the reference analysis' skill
 *   of the same trajectory — what `skill_truthful_rate` counted before household's judge became
 *   fact-level; the same number in the other environments.
 * - `skill_truthful_won_rate`, `skill_truthful_lost_rate`: the truthful share among the skills of
 *   won / not-won trajectories (workflows vs avoidance rules; left out when a class has none).
 * - `step_skill_samples`: samples (turns) the teacher scored under a critical-step skill
 *   (`seed.max_step_skills`); `teacher_gap_step_mean`: mean Δ over their tokens — the teacher's
 *   verdict on the very turns a step skill advises on (negative: the skill disfavours the action
 *   the policy took there).
 *
 * Undefined values are left out of the result (never NaN, never a made-up 0): no teacher tokens
 * in a class, fewer than two samples or a constant Δ or A for the correlation, no groups, an
 * environment without `judgeSkill` or no parsed skill. A chart then shows a gap at that step.
 */
import type { AsyncEnvironment, SkillAnalysis, Trajectory } from "../envs/types.ts";

/** Names of the metrics of this module, in the order the `step` event shows them. */
export const SIGNAL_METRIC_NAMES = [
  "teacher_gap_won_mean",
  "teacher_gap_lost_mean",
  "old_logprob_won_mean",
  "teacher_gap_advantage_corr",
  "zero_advantage_group_share",
  "all_fail_group_share",
  "skills_judged",
  "skill_well_formed_rate",
  "skill_truthful_rate",
  "skill_reference_match_rate",
  "skill_truthful_won_rate",
  "skill_truthful_lost_rate",
  "step_skill_samples",
  "teacher_gap_step_mean",
] as const;

/** The fields of a training sample (samples.ts `TurnSample`) these metrics read. */
export interface SignalSample {
  /** GRPO group key: the rollout group's index in the batch (one per drawn task). */
  taskIndex: number;
  /** Whether the sample's trajectory was won. */
  won: boolean;
  /** Advantage A of the sample (broadcast to its tokens). */
  advantage: number;
}

/** Mean of `values`; undefined for none. */
function mean(values: Iterable<number>): number | undefined {
  let sum = 0, n = 0;
  for (const v of values) {
    sum += v;
    n++;
  }
  return n > 0 ? sum / n : undefined;
}

/**
 * Pearson correlation of paired values, r = Σ(x−x̄)(y−ȳ) / √(Σ(x−x̄)² Σ(y−ȳ)²); undefined for
 * fewer than two pairs or when either side is constant.
 */
export function pearson(xs: readonly number[], ys: readonly number[]): number | undefined {
  const n = Math.min(xs.length, ys.length);
  if (n < 2) return undefined;
  const mx = mean(xs.slice(0, n))!, my = mean(ys.slice(0, n))!;
  let sxy = 0, sxx = 0, syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = xs[i] - mx, dy = ys[i] - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx === 0 || syy === 0) return undefined;
  return Math.max(-1, Math.min(1, sxy / Math.sqrt(sxx * syy)));
}

/**
 * Teacher-gap and advantage metrics of one step (see module doc). `gaps[i]` holds sample i's
 * per-token Δ (nats; one value per response token), or null when the sample has no teacher signal;
 * `oldLogProbs[i]`, when given, sample i's per-token ℓ_old (nats, the same tokens).
 * Throws `RangeError` when `gaps` or `oldLogProbs` and `samples` differ in length.
 */
export function teacherGapMetrics(
  samples: readonly SignalSample[],
  gaps: readonly (ArrayLike<number> | null)[],
  oldLogProbs?: readonly ArrayLike<number>[],
): Record<string, number> {
  for (const [name, list] of [["gaps", gaps], ["oldLogProbs", oldLogProbs]] as const) {
    if (list !== undefined && list.length !== samples.length) {
      throw new RangeError(
        `Cannot compute teacher-gap metrics as ${name} must have one entry per sample (${samples.length}): current length is ${list.length}`,
      );
    }
  }
  const won: number[] = [], lost: number[] = [], wonOld: number[] = [];
  const sampleGap: number[] = [], sampleAdvantage: number[] = [];
  samples.forEach((s, i) => {
    const g = gaps[i];
    if (g === null || g.length === 0) return;
    const tokens = Array.from(g);
    (s.won ? won : lost).push(...tokens);
    if (s.won && oldLogProbs) wonOld.push(...Array.from(oldLogProbs[i]).slice(0, tokens.length));
    sampleGap.push(mean(tokens)!);
    sampleAdvantage.push(s.advantage);
  });
  const out: Record<string, number> = {};
  const put = (name: string, v: number | undefined) => {
    if (v !== undefined && Number.isFinite(v)) out[name] = v;
  };
  put("teacher_gap_won_mean", mean(won));
  put("teacher_gap_lost_mean", mean(lost));
  put("old_logprob_won_mean", mean(wonOld));
  // Advantages all within float noise of 0 (every group's scores equal) are constant: no corr.
  if (sampleAdvantage.some((a) => Math.abs(a) > ZERO_ADVANTAGE)) {
    put("teacher_gap_advantage_corr", pearson(sampleGap, sampleAdvantage));
  }
  put("zero_advantage_group_share", zeroAdvantageGroupShare(samples));
  put("all_fail_group_share", allFailGroupShare(samples));
  return out;
}

/**
 * Share of GRPO groups (by `taskIndex`) in which no sample's trajectory was won: groups whose
 * outcome gives no signal, even where an invalid-action penalty spreads their advantages (so
 * `zero_advantage_group_share` misses them); undefined when there are no samples.
 */
export function allFailGroupShare(samples: readonly SignalSample[]): number | undefined {
  const allFail = new Map<number, boolean>();
  for (const s of samples) allFail.set(s.taskIndex, (allFail.get(s.taskIndex) ?? true) && !s.won);
  if (allFail.size === 0) return undefined;
  return [...allFail.values()].filter((f) => f).length / allFail.size;
}

/**
 * Largest |A| counted as zero by `zeroAdvantageGroupShare`: a group of equal scores gets
 * (s − mean)/(0 + 1e-6), the float rounding of its mean over 1e-6 (advantage.ts), far below this.
 */
export const ZERO_ADVANTAGE = 1e-4;

/**
 * Share of GRPO groups (by `taskIndex`) in which every sample's advantage is zero
 * (|A| ≤ {@link ZERO_ADVANTAGE}); undefined when there are no samples.
 */
export function zeroAdvantageGroupShare(samples: readonly SignalSample[]): number | undefined {
  const allZero = new Map<number, boolean>();
  for (const s of samples) {
    const zero = Math.abs(s.advantage) <= ZERO_ADVANTAGE;
    allZero.set(s.taskIndex, (allZero.get(s.taskIndex) ?? true) && zero);
  }
  if (allZero.size === 0) return undefined;
  return [...allZero.values()].filter((z) => z).length / allZero.size;
}

/**
 * Skill-quality metrics of one step: every parsed skill in `analyses` (by trajectory id; null =
 * did not parse, not counted) judged by `env.judgeSkill` against its own trajectory. Empty when
 * the environment has no judge (a remote one without the endpoint) or nothing parsed.
 */
export async function skillQualityMetrics(
  env: Pick<AsyncEnvironment, "judgeSkill">,
  trajectories: readonly (Trajectory & { id: string })[],
  analyses: ReadonlyMap<string, SkillAnalysis | null>,
): Promise<Record<string, number>> {
  const judge = env.judgeSkill?.bind(env);
  if (!judge) return {};
  const judged = await Promise.all(
    trajectories.flatMap((t) => {
      const skill = analyses.get(t.id)?.episode_skill;
      return skill === undefined
        ? []
        : [judge(stripIds(t), skill).then((j) => ({ ...j, won: t.won }))];
    }),
  );
  if (judged.length === 0) return {};
  const truthfulShare = (of: readonly { truthful: boolean }[]) =>
    of.filter((j) => j.truthful).length / of.length;
  const won = judged.filter((j) => j.won);
  const lost = judged.filter((j) => !j.won);
  return {
    skills_judged: judged.length,
    skill_well_formed_rate: judged.filter((j) => j.wellFormed).length / judged.length,
    skill_truthful_rate: truthfulShare(judged),
    skill_reference_match_rate: judged.filter((j) => j.matchesReference).length / judged.length,
    ...(won.length > 0 ? { skill_truthful_won_rate: truthfulShare(won) } : {}),
    ...(lost.length > 0 ? { skill_truthful_lost_rate: truthfulShare(lost) } : {}),
  };
}

/** The plain `Trajectory` of a rollout trajectory (what the HTTP protocol accepts). */
function stripIds(t: Trajectory): Trajectory {
  return {
    task: t.task,
    won: t.won,
    score: t.score,
    steps: t.steps.map((s) => ({
      observation: s.observation,
      response: s.response,
      action: s.action,
      valid: s.valid,
      reward: s.reward,
      ...(s.feedback !== undefined ? { feedback: s.feedback } : {}),
    })),
  };
}

/**
 * `step_skill_samples` and `teacher_gap_step_mean` (see module doc): `stepSkilled[i]` says whether
 * sample i was scored under a critical-step skill, `gaps[i]` its per-token Δ (nats). Both are left
 * out when no sample had a teacher pass (GRPO, nothing parsed), the mean also when no turn was
 * scored under a step skill. Throws `RangeError` when the lengths differ.
 */
export function stepSkillMetrics(
  gaps: readonly (ArrayLike<number> | null)[],
  stepSkilled: readonly boolean[],
): Record<string, number> {
  if (gaps.length !== stepSkilled.length) {
    throw new RangeError(
      `Cannot compute step-skill metrics as stepSkilled must have one entry per sample (${gaps.length}): current length is ${stepSkilled.length}`,
    );
  }
  const tokens: number[] = [];
  let samples = 0;
  gaps.forEach((g, i) => {
    if (!stepSkilled[i] || g === null) return;
    samples++;
    tokens.push(...Array.from(g));
  });
  if (gaps.every((g) => g === null)) return {};
  const m = mean(tokens);
  return { step_skill_samples: samples, ...(m !== undefined ? { teacher_gap_step_mean: m } : {}) };
}

/** Inputs of {@link signalMetrics}: one step's samples, gaps, trajectories and analyses. */
export interface SignalMetricsInput {
  env: Pick<AsyncEnvironment, "judgeSkill">;
  samples: readonly SignalSample[];
  /** Per sample: per-token Δ, or null without a teacher signal (aligned with `samples`). */
  gaps: readonly (ArrayLike<number> | null)[];
  /** Per sample: per-token ℓ_old (nats; aligned with `samples`), for `old_logprob_won_mean`. */
  oldLogProbs?: readonly ArrayLike<number>[];
  trajectories: readonly (Trajectory & { id: string })[];
  analyses: ReadonlyMap<string, SkillAnalysis | null>;
  /** Per sample: scored under a critical-step skill (aligned with `samples`; default none). */
  stepSkilled?: readonly boolean[];
}

/** All metrics of this module for one step (see module doc). */
export async function signalMetrics(input: SignalMetricsInput): Promise<Record<string, number>> {
  return {
    ...teacherGapMetrics(input.samples, input.gaps, input.oldLogProbs),
    ...stepSkillMetrics(input.gaps, input.stepSkilled ?? input.gaps.map(() => false)),
    ...await skillQualityMetrics(input.env, input.trajectories, input.analyses),
  };
}

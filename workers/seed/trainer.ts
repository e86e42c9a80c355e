/**
 * One SEED (or GRPO) update as named, timed phases (DESIGN.md §8; STYLE.md "the training step as
 * named, timed phases"): rollout → advantage → analyze → rescore → update. The trainer only
 * orchestrates; the math lives in the phase modules (rollout.ts, samples.ts/advantage.ts,
 * analyze.ts/skills.ts) and in the model's train graph (`Policy.trainStep`).
 *
 * Randomness: every draw of a step comes from the trainer's `Rng` (task seed, sampling seeds,
 * mini-batch shuffles), whose state is checkpointed, so a resumed job repeats the exact draws.
 */
import type { JobSpec } from "../../jobs/mod.ts";
import type { AsyncEnvironment } from "../envs/mod.ts";
import {
  type AdamW,
  clipGradNorm,
  learningRate,
  type Policy,
  type RlSample,
  type Rng,
  type Sample,
} from "../model/mod.ts";
import {
  analyzeTrajectories,
  recordSkills,
  skillsByTrajectory,
  teacherPrompts,
} from "./analyze.ts";
import { metricSeries, PhaseTimer, stepMetrics } from "./metrics.ts";
import { signalMetrics } from "./signal_metrics.ts";
import { type RolloutTrajectory, runRollouts } from "./rollout.ts";
import { buildSamples, meanPerTrajectory, miniBatches, type TurnSample } from "./samples.ts";
import type { SkillLibrary } from "./skill_library.ts";
import { ACTION_STOP, ANALYSIS_STOP, type TextPolicy } from "./text_policy.ts";

/** What the trainer works with. */
export interface TrainerParts {
  spec: JobSpec;
  env: AsyncEnvironment;
  /** θ (updated in place). */
  theta: TextPolicy;
  /** π_ref for ℓ_ref (null when `kl_coef` is 0: ℓ_ref is then ℓ_old and unused). */
  reference: Policy | null;
  optimizer: AdamW;
  rng: Rng;
  library: SkillLibrary;
}

/** Called when a phase starts (progress and stage events). */
export type StageHook = (stage: "rollout" | "analyze" | "rescore" | "update") => Promise<void>;

/** One step's outcome. */
export interface StepOutcome {
  /** Flat metric series of the step (see README: metric names). */
  metrics: Record<string, number>;
  trajectories: RolloutTrajectory[];
}

/** True when the job distils skills (method seed with analysis on). */
export function usesAnalysis(spec: JobSpec): boolean {
  return spec.method === "seed" && spec.seed.analyze !== "none";
}

/** Runs SEED/GRPO updates (see module doc). */
export class SeedTrainer {
  constructor(readonly parts: TrainerParts) {}

  /** Runs update `step` (1-based) and returns its metrics. */
  async step(step: number, onStage: StageHook, signal?: AbortSignal): Promise<StepOutcome> {
    const { spec, rng } = this.parts;
    const timer = new PhaseTimer();
    const stepSeed = rng.nextUint32();
    let generated = 0;

    await onStage("rollout");
    const trajectories = await timer.time("rollout", () => this.#rollout(step, stepSeed, signal));
    generated += trajectories.tokens;
    const samples = await timer.time("advantage", () =>
      buildSamples(trajectories.list, {
        rewardSource: spec.advantage.reward_source,
        invalidPenalty: spec.advantage.invalid_action_penalty,
        estimator: spec.advantage.estimator,
        norm: spec.advantage.norm,
        gamma: spec.advantage.gamma,
      }));
    signal?.throwIfAborted();

    let analysis = { analyses: new Map(), analyzed: 0, parsed: 0, tokens: 0 };
    if (usesAnalysis(spec)) {
      await onStage("analyze");
      analysis = await timer.time("analyze", () => this.#analyze(trajectories.list));
      generated += analysis.tokens;
      signal?.throwIfAborted();
    }

    await onStage("rescore");
    const skills = skillsByTrajectory(analysis.analyses);
    const scored = await timer.time("rescore", () => this.#rescore(samples, skills));
    const gaps = scored.rl.map((s) =>
      s.teacherLogprobs ? s.teacherLogprobs.map((t, i) => t - s.oldLogprobs[i]) : null
    );
    const withTeacher = samples.filter((_, i) => gaps[i] !== null);
    const meanGaps = meanPerTrajectory(withTeacher, gaps.filter((g) => g !== null));
    const skillsAdded = recordSkills(this.parts.library, {
      step,
      trajectories: trajectories.list,
      analyses: analysis.analyses,
      meanGaps,
    });
    // Δ on won vs lost tokens, corr(Δ, A), all-zero groups, skill quality (signal_metrics.ts).
    const signalStats = await signalMetrics({
      env: this.parts.env,
      samples,
      gaps,
      trajectories: trajectories.list,
      analyses: analysis.analyses,
    });
    const gapTokens = gaps.reduce((n, g) => n + (g?.length ?? 0), 0);
    const gapSum = gaps.reduce((n, g) => n + (g?.reduce((a, b) => a + b, 0) ?? 0), 0);
    signal?.throwIfAborted();

    await onStage("update");
    const update = await timer.time("update", () => this.#update(step, scored.rl, signal));

    const base = stepMetrics({
      trajectories: trajectories.list,
      rewardSource: spec.advantage.reward_source,
      analyzed: analysis.analyzed,
      parsed: analysis.parsed,
      skillsAdded,
      tokensGenerated: generated,
      tokensTrained: update.tokens,
      seconds: timer.seconds(),
    });
    const metrics: Record<string, number> = {
      ...metricSeries(base),
      ...update.stats,
      samples: samples.length,
      teacher_samples: withTeacher.length,
      teacher_gap_mean: gapTokens > 0 ? gapSum / gapTokens : 0,
      skill_library_size: this.parts.library.size,
      advantage_abs_mean: samples.reduce((n, s) => n + Math.abs(s.advantage), 0) /
        Math.max(1, samples.length),
      ...signalStats,
    };
    return { metrics, trajectories: trajectories.list };
  }

  async #rollout(step: number, seed: number, signal?: AbortSignal) {
    const { spec, env, theta } = this.parts;
    const tasks = await env.sampleTasks(
      "train",
      spec.rollout.tasks_per_step,
      seed,
      spec.env.options,
    );
    let turn = 0, tokens = 0;
    const list = await runRollouts({
      env,
      tasks,
      groupSize: spec.rollout.group_size,
      maxTurns: spec.env.max_turns,
      historyLength: spec.env.history,
      idPrefix: `step-${step}/`,
      signal,
      policy: async (prompts, images) => {
        const g = await theta.generate(prompts, {
          maxNewTokens: spec.rollout.max_new_tokens,
          temperature: spec.rollout.temperature,
          seed: (seed + 0x9e3779b1 * ++turn) >>> 0,
          stop: [ACTION_STOP],
          images,
        });
        tokens += g.tokens;
        return g.texts;
      },
    });
    return { list, tokens };
  }

  async #analyze(trajectories: RolloutTrajectory[]) {
    const { spec, theta } = this.parts;
    let tokens = 0;
    const r = await analyzeTrajectories(trajectories, {
      mode: spec.seed.analyze === "failed_only" ? "failed_only" : "all",
      prompt: {
        maxSteps: spec.seed.analyzer_max_steps,
        maxFieldChars: spec.seed.analyzer_max_field_chars,
      },
      generate: async (prompts) => {
        const g = await theta.generate(prompts, {
          maxNewTokens: spec.seed.analyzer_max_new_tokens,
          temperature: 0,
          seed: 0,
          stop: [ANALYSIS_STOP],
        });
        tokens += g.tokens;
        return g.texts;
      },
    });
    return { ...r, tokens };
  }

  /**
   * ℓ_old and ℓ_ref under the ordinary prompt; ℓ_T under the skill prompt where there is one.
   * Every pass (and the update) sees the turn's images; the skill prompt keeps its `<image>`.
   */
  async #rescore(samples: TurnSample[], skills: Map<string, string | null>) {
    const { theta, reference, spec } = this.parts;
    const plain: Sample[] = samples.map((s) => theta.sample(s.prompt, s.response, false, s.images));
    const old = await theta.policy.score(plain);
    const ref = reference && spec.optim.kl_coef > 0 ? await reference.score(plain) : old;
    const prompts = teacherPrompts(samples, skills);
    const teacherIdx = prompts.flatMap((p, i) => (p === null ? [] : [i]));
    const teacher = await theta.policy.score(
      teacherIdx.map((i) => ({ ...plain[i], prompt: theta.promptIds(prompts[i]!) })),
    );
    const teacherOf = new Map(teacherIdx.map((i, k) => [i, teacher.logprobs[k]]));
    const rl: RlSample[] = samples.map((s, i) => ({
      ...plain[i],
      advantage: s.advantage,
      oldLogprobs: old.logprobs[i],
      refLogprobs: ref.logprobs[i],
      teacherLogprobs: teacherOf.get(i) ?? null,
    }));
    return { rl };
  }

  /** `ppo_epochs` × mini-batches of Policy.trainStep, clipped, AdamW at the scheduled lr. */
  async #update(step: number, rl: RlSample[], signal?: AbortSignal) {
    const { spec, theta, optimizer, rng } = this.parts;
    const o = spec.optim;
    const lr = learningRate(step - 1, {
      kind: o.lr_schedule,
      lr: o.lr,
      warmupSteps: o.warmup_steps,
      totalSteps: spec.steps,
    });
    const coefs = {
      clipEps: o.clip_ratio,
      dualClip: o.dual_clip,
      gateBeta: spec.seed.gate_beta,
      opdCoef: usesAnalysis(spec) ? spec.seed.opd_coef : 0,
      klCoef: o.kl_coef,
      entropyCoef: o.entropy_coef,
    };
    const sums: Record<string, number> = {};
    let tokens = 0, teacherTokens = 0, optimizerSteps = 0, gradNorm = 0;
    const epochs = miniBatches(rl.length, {
      miniBatchSize: o.mini_batch_size,
      epochs: o.ppo_epochs,
      rng: () => rng.next(),
    });
    for (const batches of epochs) {
      for (const batch of batches) {
        signal?.throwIfAborted();
        const rows = batch.map((i) => rl[i]);
        const r = await theta.policy.trainStep(rows, coefs);
        if (r.tokens === 0) continue;
        const norm = o.max_grad_norm > 0 ? clipGradNorm(r.grads, o.max_grad_norm) : 0;
        optimizer.step(theta.policy.params, r.grads, lr);
        const t = rows.reduce((n, s) => n + (s.teacherLogprobs ? s.response.length : 0), 0);
        const add = (k: string, v: number, w: number) => (sums[k] = (sums[k] ?? 0) + v * w);
        add("loss", r.loss, r.tokens);
        add("pg_loss", r.pgLoss, r.tokens);
        add("opd_loss", r.opdLoss, r.tokens);
        add("kl_loss", r.klLoss, r.tokens);
        add("entropy", r.entropy, r.tokens);
        add("clip_frac", r.clipFrac, r.tokens);
        add("dual_clip_frac", r.dualClipFrac, r.tokens);
        add("gate_mean", r.gateMean, t);
        add("delta_mean", r.deltaMean, t);
        tokens += r.tokens;
        teacherTokens += t;
        gradNorm += norm;
        optimizerSteps++;
      }
    }
    const stats: Record<string, number> = { lr, optimizer_steps: optimizerSteps };
    for (const k of ["loss", "pg_loss", "opd_loss", "kl_loss", "entropy", "clip_frac"]) {
      stats[k] = tokens > 0 ? (sums[k] ?? 0) / tokens : 0;
    }
    stats.dual_clip_frac = tokens > 0 ? (sums.dual_clip_frac ?? 0) / tokens : 0;
    stats.gate_mean = teacherTokens > 0 ? (sums.gate_mean ?? 0) / teacherTokens : 0;
    stats.delta_mean = teacherTokens > 0 ? (sums.delta_mean ?? 0) / teacherTokens : 0;
    stats.grad_norm = optimizerSteps > 0 ? gradNorm / optimizerSteps : 0;
    return { stats, tokens };
  }
}

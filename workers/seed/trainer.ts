/**
 * One SEED (or GRPO) update as named, timed phases (README.md, Algorithm, steps 1–5): rollout →
 * advantage → analyze → rescore → update. The trainer only orchestrates; the math lives in the
 * phase modules (rollout.ts, samples.ts/advantage.ts, analyze.ts, metrics.ts and
 * signal_metrics.ts for the teacher gaps and step metrics, and workers/skills, which also
 * holds the analyzer's generation settings) and in the SEED
 * objective (objective.ts) the model's train graph is built from (`Policy.trainStep`). What the
 * method means (analysis, λ_opd, π_ref) comes from the run plan (run_plan.ts).
 *
 * Randomness: every draw of a step comes from the trainer's `Rng` (task seed, sampling seeds,
 * mini-batch shuffles), whose state is checkpointed, so a resumed job repeats the exact draws.
 *
 * Temperature: every pass that scores the rollout's tokens (ℓ_old, ℓ_ref, ℓ_T and the update's
 * ℓθ and entropy) uses softmax(logits / T) at the rollout temperature T (`scoringTemperature`),
 * as the reference code's actor does in each of them.
 */
import { type JobSpec, maxTurnsOf } from "../../jobs/mod.ts";
import type { AsyncEnvironment, SkillAnalysis } from "../envs/mod.ts";
import {
  type AdamW,
  clipGradNorm,
  learningRate,
  type Policy,
  type Rng,
  type Sample,
  stepMeans,
} from "../model/mod.ts";
import { analyzeTrajectories, referenceAnalyses } from "./analyze.ts";
import { RolloutError } from "./errors.ts";
import {
  metricSeries,
  PhaseTimer,
  rescoreMetrics,
  stepMetrics,
  teacherGaps,
  type TokenGap,
  tokenGapsOf,
} from "./metrics.ts";
import {
  SEED_OBJECTIVE,
  SEED_OUTPUTS,
  seedCoefficients,
  seedInputs,
  type SeedSample,
} from "./objective.ts";
import type { RunPlan } from "./run_plan.ts";
import { signalMetrics } from "./signal_metrics.ts";
import { type BatchPolicy, type RolloutTrajectory, runRollouts } from "./rollout.ts";
import { logprobGap, type PublishedPolicy, type RemoteRolloutEngine } from "./remote_rollout.ts";
import { buildSamples, meanPerTrajectory, miniBatches, type TurnSample } from "./samples.ts";
import {
  analyzerGenerateOptions,
  analyzerPromptOptions,
  recordSkills,
  type SkillLibrary,
  skillsByTrajectory,
  stepSkillsByTrajectory,
  teacherPrompts,
} from "../skills/mod.ts";
import { ACTION_STOP, actionPolicy, type TextPolicy, turnSeed } from "./text_policy.ts";

/** What the trainer works with. */
export interface TrainerParts {
  spec: JobSpec;
  /** What the spec's method means for the run (`runPlan(spec)`). */
  plan: RunPlan;
  env: AsyncEnvironment;
  /** θ (updated in place). */
  theta: TextPolicy;
  /** π_ref for ℓ_ref (null when the plan has none: ℓ_ref is then ℓ_old and unused). */
  reference: Policy | null;
  optimizer: AdamW;
  rng: Rng;
  library: SkillLibrary;
  /**
   * `rollout.engine` endpoints (remote_rollout.ts): before each step's rollouts the policy is
   * published (`publish(version)`, version = updates done) and loaded on every endpoint, which
   * then generate the rollouts. Absent: the local decode.
   */
  remote?: {
    engine: RemoteRolloutEngine;
    publish(version: number): Promise<PublishedPolicy>;
  };
  /**
   * Most bytes of prompt-prefix KV caches the teacher pass holds at once
   * (`Policy.scoreSharedPrefixes`' `cacheBytes`; the worker's `WORKER_PREFIX_CACHE_MB`). Absent:
   * the policy's default, `PREFIX_CACHE_BYTES`.
   */
  prefixCacheBytes?: number;
}

/** Called when a phase starts (progress and stage events). */
export type StageHook = (stage: "rollout" | "analyze" | "rescore" | "update") => Promise<void>;

export type { TokenGap } from "./metrics.ts";

/** What the analyze and re-score phases of a step learned (a rollout dump shows it). */
export interface StepTeacher {
  /** Per analysed trajectory id: the parsed analysis, or null when it did not parse. */
  analyses: ReadonlyMap<string, SkillAnalysis | null>;
  /** Per analysed trajectory id: the analyzer's raw answer. */
  raw?: ReadonlyMap<string, string>;
  /** Every re-scored turn's token gaps. */
  tokenGaps: readonly TokenGap[];
}

/** One step's outcome. */
export interface StepOutcome {
  /** Flat metric series of the step (names: README.md, Metrics). */
  metrics: Record<string, number>;
  trajectories: RolloutTrajectory[];
  /** The step's analyses and teacher gaps, for its rollout dump (run/trajectory_dump.ts). */
  teacher: StepTeacher;
}

/**
 * The temperature the RL passes score tokens at (module doc): `rollout.temperature`, or 1 for
 * greedy rollouts (temperature 0), whose tokens were not sampled from any softmax (the reference
 * code would divide by 0).
 */
export function scoringTemperature(spec: JobSpec): number {
  return spec.rollout.temperature > 0 ? spec.rollout.temperature : 1;
}

/**
 * The micro-batches of one mini-batch (sample positions within it): consecutive runs of
 * `optim.micro_batch_size` under `micro_batch_token_mean` (the last may be smaller), else one
 * micro-batch of all (`token_mean`). Shape (⌈n / size⌉, ≤ size).
 */
export function microBatchesOf(n: number, optim: JobSpec["optim"]): number[][] {
  const size = optim.loss_aggregation === "token_mean" ? Math.max(n, 1) : optim.micro_batch_size;
  const out: number[][] = [];
  for (let a = 0; a < n; a += size) {
    out.push(Array.from({ length: Math.min(size, n - a) }, (_, k) => a + k));
  }
  return out;
}

/** Runs SEED/GRPO updates (see module doc). */
export class SeedTrainer {
  constructor(readonly parts: TrainerParts) {}

  /** Runs update `step` (1-based) and returns its metrics. */
  async step(step: number, onStage: StageHook, signal?: AbortSignal): Promise<StepOutcome> {
    const { spec, plan, rng } = this.parts;
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

    let analysis = { analyses: new Map(), raw: new Map(), analyzed: 0, parsed: 0, tokens: 0 };
    if (plan.analysis) {
      await onStage("analyze");
      analysis = await timer.time("analyze", () => this.#analyze(trajectories.list));
      generated += analysis.tokens;
      signal?.throwIfAborted();
    }

    await onStage("rescore");
    const skills = skillsByTrajectory(analysis.analyses);
    const stepSkills = stepSkillsByTrajectory(
      analysis.analyses,
      new Map(trajectories.list.map((t) => [t.id, t.steps.length])),
      spec.seed.max_step_skills,
    );
    const scored = await timer.time("rescore", () => this.#rescore(samples, skills, stepSkills));
    const gaps = teacherGaps(scored.teacher, scored.old);
    const stepSkilled = samples.map((s) => stepSkills.get(s.trajectoryId)?.has(s.turn) ?? false);
    // The library's mean Δ of an episode skill: over the turns scored under it (not step skills).
    const underEpisodeSkill = samples.flatMap((_, i) =>
      gaps[i] !== null && !stepSkilled[i] ? [i] : []
    );
    const meanGaps = meanPerTrajectory(
      underEpisodeSkill.map((i) => samples[i]),
      underEpisodeSkill.map((i) => gaps[i]!),
    );
    const skillsAdded = recordSkills(this.parts.library, {
      step,
      trajectories: trajectories.list,
      analyses: analysis.analyses,
      meanGaps,
      source: plan.skillSource,
    });
    // Δ on won vs lost tokens, corr(Δ, A), all-zero groups, skill quality (signal_metrics.ts).
    const signalStats = await signalMetrics({
      env: this.parts.env,
      samples,
      gaps,
      oldLogProbs: scored.old,
      trajectories: trajectories.list,
      analyses: analysis.analyses,
      stepSkilled,
    });
    const engineGap = this.parts.remote
      ? this.#engineGap(samples, trajectories.list, scored.old)
      : {};
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
      // SEED's own work inside the rescore phase (0 for GRPO), wall seconds.
      ...rescoreMetrics({ samples, gaps, teacherSeconds: scored.teacherSeconds }),
      skill_library_size: this.parts.library.size,
      // Skills written by the environment's reference analyzer (seed.skill_source "reference").
      reference_analyses: plan.analysis && plan.skillSource === "reference" ? analysis.analyzed : 0,
      ...signalStats,
      ...engineGap,
    };
    // Per-token teacher gaps of the re-scored turns, for the trajectory dump.
    const tokenGaps = tokenGapsOf(samples, gaps, scored.rl.map((r) => r.response), stepSkills);
    const teacher = { analyses: analysis.analyses, raw: analysis.raw, tokenGaps };
    return { metrics, trajectories: trajectories.list, teacher };
  }

  /**
   * Remote engines: the step's `rollout/…` counters and the gap between the engine's sampling
   * log-probs and θ_old (`logprobGap`). Every turn must come from version `step − 1`.
   * @throws RolloutError when a turn carries another version (the engine refuses those).
   */
  #engineGap(samples: TurnSample[], list: RolloutTrajectory[], old: ArrayLike<number>[]) {
    const byId = new Map(list.map((t) => [t.id, t]));
    const engine = samples.map((s) => byId.get(s.trajectoryId)!.steps[s.turn].samplingLogprobs);
    const stats = this.parts.remote!.engine.takeStats();
    const gap = logprobGap(engine, old);
    return {
      "rollout/engine_requests": stats.requests,
      "rollout/engine_reruns": stats.reruns,
      "rollout/stale_refused": stats.staleRefused,
      "rollout/endpoint_failures": stats.endpointFailures,
      ...(gap
        ? {
          "rollout/logprob_abs_diff_mean": gap.absMean,
          "rollout/logprob_abs_diff_max": gap.absMax,
          "rollout/engine_kl": gap.kl,
        }
        : {}),
    };
  }

  async #rollout(step: number, seed: number, signal?: AbortSignal) {
    const { spec, env, theta, remote } = this.parts;
    const tasks = await env.sampleTasks(
      "train",
      spec.rollout.tasks_per_step,
      seed,
      spec.env.options,
    );
    let tokens = 0;
    const list = await runRollouts({
      env,
      tasks,
      groupSize: spec.rollout.group_size,
      maxTurns: maxTurnsOf(spec, env),
      historyLength: spec.env.history,
      idPrefix: `step-${step}/`,
      signal,
      policy: remote
        ? await this.#remotePolicy(step, seed, signal, (n) => tokens += n)
        : actionPolicy(theta, {
          maxNewTokens: spec.rollout.max_new_tokens,
          temperature: spec.rollout.temperature,
          seed,
          keepIds: true,
          onTokens: (n) => tokens += n,
        }),
    });
    if (remote) {
      const stale = list.flatMap((t) => t.steps).find((s) => s.policyVersion !== step - 1);
      if (stale) {
        throw new RolloutError(
          `Cannot train step ${step} on a response of policy version ${stale.policyVersion} as every rollout must come from version ${
            step - 1
          }`,
          { turn: 0 },
        );
      }
    }
    return { list, tokens };
  }

  /**
   * The remote engine's policy for step `step`: publishes version `step − 1` and loads it on the
   * endpoints (unless they hold it), then samples each turn with the seed the local decode would
   * use (remote_rollout.ts `sampling_stream`).
   */
  async #remotePolicy(
    step: number,
    seed: number,
    signal: AbortSignal | undefined,
    count: (tokens: number) => void,
  ): Promise<BatchPolicy> {
    const { spec, theta } = this.parts;
    const { engine, publish } = this.parts.remote!;
    if (engine.version !== step - 1) await engine.sync(step - 1, await publish(step - 1), signal);
    let turn = 0;
    const inner = engine.policy(theta, {
      maxNewTokens: spec.rollout.max_new_tokens,
      temperature: spec.rollout.temperature,
      stop: [ACTION_STOP],
      signal,
    }, () => turnSeed(seed, ++turn));
    return async (prompts, images) => {
      const r = await inner(prompts, images);
      if (!Array.isArray(r)) count(r.tokens ?? 0);
      return r;
    };
  }

  async #analyze(trajectories: RolloutTrajectory[]) {
    const { spec, plan, theta, env } = this.parts;
    let tokens = 0;
    // The oracle arm: the environment's reference analyzer writes every skill (no decoding).
    const r = plan.skillSource === "reference"
      ? await referenceAnalyses(trajectories, {
        mode: plan.analyze,
        analyze: (t) => env.referenceAnalysis(t),
      })
      : await analyzeTrajectories(trajectories, {
        mode: plan.analyze,
        prompt: analyzerPromptOptions(spec.seed),
        generate: async (prompts, analysed) => {
          const won = analysed.map((t) => t.won);
          const g = await theta.generate(prompts, analyzerGenerateOptions(spec, env, won));
          tokens += g.tokens;
          return g.texts;
        },
      });
    return { ...r, tokens };
  }

  /**
   * ℓ_old and ℓ_ref under the ordinary prompt; ℓ_T under the skill prompt where there is one
   * (and the seconds that teacher pass took). All three passes and the update score the same
   * response ids, the ones the rollout kept (`TurnSample.responseIds`: the sampled ids under a
   * chat template); only the prompt ids change. Every pass sees the turn's images; the skill
   * prompt keeps its `<image>`.
   */
  async #rescore(
    samples: TurnSample[],
    skills: Map<string, string | null>,
    stepSkills: Map<string, Map<number, string>>,
  ) {
    const { theta, reference, spec } = this.parts;
    const temperature = scoringTemperature(spec);
    const plain: Sample[] = samples.map((s) =>
      theta.sample(s.prompt, s.responseIds ?? s.response, false, s.images)
    );
    const old = await theta.policy.score(plain, { temperature });
    const ref = reference ? await reference.score(plain, { temperature }) : old;
    const prompts = teacherPrompts(samples, skills, stepSkills);
    const teacherIdx = prompts.flatMap((p, i) => (p === null ? [] : [i]));
    // A trajectory's episode-skill teacher prompts share their task line and skill block
    // (insertSkill puts it after the task line): that prefix is computed once per trajectory, not
    // once per turn. Its step-skill prompts (block near the end) form a group of their own.
    const started = performance.now();
    const byTrajectory = new Map<string, number[]>();
    teacherIdx.forEach((i, k) => {
      const s = samples[i];
      const id = stepSkills.get(s.trajectoryId)?.has(s.turn)
        ? `${s.trajectoryId}\u0000step`
        : s.trajectoryId;
      const group = byTrajectory.get(id);
      if (group) group.push(k);
      else byTrajectory.set(id, [k]);
    });
    const teacher = await theta.policy.scoreSharedPrefixes(
      teacherIdx.map((i) => ({ ...plain[i], prompt: theta.promptIds(prompts[i]!) })),
      [...byTrajectory.values()],
      { temperature, cacheBytes: this.parts.prefixCacheBytes },
    );
    // 0 when no pass ran (GRPO, or no analysis parsed).
    const teacherSeconds = teacherIdx.length > 0 ? (performance.now() - started) / 1000 : 0;
    const teacherOf = new Map(teacherIdx.map((i, k) => [i, teacher.logprobs[k]]));
    const teacherLogprobs = samples.map((_, i) => teacherOf.get(i) ?? null);
    const rl: SeedSample[] = samples.map((s, i) => ({
      ...plain[i],
      inputs: seedInputs({
        advantages: s.advantage,
        old_logprobs: old.logprobs[i],
        ref_logprobs: ref.logprobs[i],
        teacher_logprobs: teacherLogprobs[i],
      }),
    }));
    return { rl, old: old.logprobs, teacher: teacherLogprobs, teacherSeconds };
  }

  /**
   * `ppo_epochs` × mini-batches of `Policy.trainStep` on the SEED objective, clipped, AdamW at
   * the scheduled lr. Each mini-batch's loss aggregates as `optim.loss_aggregation` says (its
   * micro-batches, `microBatchesOf`), its log-probs and entropy at the rollout temperature. Each
   * output of the objective becomes a metric of the same name: its mean over the step's
   * mini-batches, weighted by the count the objective averages it over.
   */
  async #update(step: number, rl: SeedSample[], signal?: AbortSignal) {
    const { spec, plan, theta, optimizer, rng } = this.parts;
    const o = spec.optim;
    const lr = learningRate(step - 1, {
      kind: o.lr_schedule,
      lr: o.lr,
      warmupSteps: o.warmup_steps,
      totalSteps: spec.steps,
    });
    const coefficients = seedCoefficients(spec, plan);
    const outputs = Object.keys(SEED_OUTPUTS) as (keyof typeof SEED_OUTPUTS)[];
    const sums: Record<string, number> = {}, counts: Record<string, number> = {};
    let tokens = 0, optimizerSteps = 0, gradNorm = 0;
    const epochs = miniBatches(rl.length, {
      miniBatchSize: o.mini_batch_size,
      epochs: o.ppo_epochs,
      rng: () => rng.next(),
    });
    for (const batches of epochs) {
      for (const batch of batches) {
        signal?.throwIfAborted();
        // LoRA dropout masks come from the trainer's Rng (no draw without dropout), so a resumed
        // run repeats them.
        const dropout = () =>
          theta.policy.opts.lora?.dropout ? { dropoutSeed: rng.nextUint32() } : {};
        const r = await theta.policy.trainStep(
          SEED_OBJECTIVE,
          batch.map((i) => rl[i]),
          coefficients,
          {
            ...dropout(),
            microBatches: microBatchesOf(batch.length, o),
            temperature: scoringTemperature(spec),
          },
        );
        if (r.tokens === 0) continue;
        const norm = o.max_grad_norm > 0 ? clipGradNorm(r.grads, o.max_grad_norm) : 0;
        optimizer.step(theta.policy.params, r.grads, lr);
        for (const name of outputs) {
          sums[name] = (sums[name] ?? 0) + r.outputs[name] * r.counts[SEED_OUTPUTS[name].over];
        }
        for (const [count, n] of Object.entries(r.counts)) counts[count] = (counts[count] ?? 0) + n;
        tokens += r.tokens;
        gradNorm += norm;
        optimizerSteps++;
      }
    }
    // Over no tokens a loss term is 0 and a statistic (gate_mean) is left out: the objective
    // declares which is which.
    const stats: Record<string, number> = {
      lr,
      optimizer_steps: optimizerSteps,
      ...stepMeans(SEED_OUTPUTS, sums, counts),
    };
    stats.grad_norm = optimizerSteps > 0 ? gradNorm / optimizerSteps : 0;
    return { stats, tokens };
  }
}

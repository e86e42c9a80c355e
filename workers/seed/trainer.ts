/**
 * One SEED (or GRPO) update as named, timed phases (README.md, Algorithm, steps 1–5): rollout →
 * advantage → analyze → rescore → update. The trainer only orchestrates; the math lives in the
 * phase modules (rollout.ts, samples.ts/advantage.ts, analyze.ts/skills.ts) and in the SEED
 * objective (objective.ts) the model's train graph is built from (`Policy.trainStep`). What the
 * method means (analysis, λ_opd, π_ref) comes from the run plan (run_plan.ts).
 *
 * Randomness: every draw of a step comes from the trainer's `Rng` (task seed, sampling seeds,
 * mini-batch shuffles), whose state is checkpointed, so a resumed job repeats the exact draws.
 */
import { type JobSpec, maxTurnsOf } from "../../jobs/mod.ts";
import type { AsyncEnvironment, SkillAnalysis } from "../envs/mod.ts";
import {
  type AdamW,
  clipGradNorm,
  type JsonObjectSchema,
  learningRate,
  type Policy,
  type Rng,
  type Sample,
  stepMeans,
  TOKEN_NLL,
} from "../model/mod.ts";
import {
  analyzeTrajectories,
  recordSkills,
  skillsByTrajectory,
  teacherPrompts,
} from "./analyze.ts";
import { SeedOptionError } from "./errors.ts";
import { metricSeries, PhaseTimer, stepMetrics } from "./metrics.ts";
import {
  SEED_OBJECTIVE,
  SEED_OUTPUTS,
  seedCoefficients,
  seedInputs,
  type SeedSample,
} from "./objective.ts";
import { type RunPlan, runPlan } from "./run_plan.ts";
import { signalMetrics } from "./signal_metrics.ts";
import { type RolloutTrajectory, runRollouts } from "./rollout.ts";
import { buildSamples, meanPerTrajectory, miniBatches, type TurnSample } from "./samples.ts";
import type { SkillLibrary } from "./skill_library.ts";
import {
  analysisSchema,
  analysisTarget,
  analyzerPromptOptions,
  buildAnalyzerPrompt,
} from "./skills.ts";
import {
  actionPolicy,
  ANALYSIS_STOP,
  SUMMARY_KEY_STOPS,
  type TextGenerateOptions,
  type TextPolicy,
} from "./text_policy.ts";

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
}

/** Called when a phase starts (progress and stage events). */
export type StageHook = (stage: "rollout" | "analyze" | "rescore" | "update") => Promise<void>;

/** One re-scored turn's teacher gaps (the trainer's re-score phase). */
export interface TokenGap {
  trajectoryId: string;
  /** 0-based turn within the trajectory. */
  turn: number;
  /** The sampled response token ids (T,). */
  responseIds: readonly number[];
  /** Δ = ℓ_T − ℓ_old per response token (T,), nats (float32 from the score graph). */
  gaps: ArrayLike<number>;
}

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
 * How the analyzer generates (θ_old, greedy, `analyzer_max_new_tokens`) for trajectories of these
 * outcomes (`won[i]` of prompt i): under the analysis schema (every answer parses; the skill held
 * to the environment's grammar for that outcome per `seed.skill_grammar`; no summary field when
 * `seed.analyzer_summary` is false) unless `seed.analyzer_constrained` is false, then free text
 * cut at `ANALYSIS_STOP` (and, without the summary, at `SUMMARY_KEY_STOPS`). Evaluation or any
 * other caller of the analyzer uses the same options.
 */
export function analyzerGenerateOptions(
  spec: JobSpec,
  env: Pick<AsyncEnvironment, "skillPatterns">,
  won: readonly boolean[],
): TextGenerateOptions {
  // the analyzer prompts of one outcome begin with the same instructions: prefilled once
  const base = {
    maxNewTokens: spec.seed.analyzer_max_new_tokens,
    temperature: 0,
    seed: 0,
    sharePrefixes: true,
  };
  if (!spec.seed.analyzer_constrained) {
    const stop = spec.seed.analyzer_summary
      ? [ANALYSIS_STOP]
      : [ANALYSIS_STOP, ...SUMMARY_KEY_STOPS];
    return { ...base, stop };
  }
  const schemas = analyzerSchemas(spec, env);
  return { ...base, schema: won.map((w) => (w ? schemas.won : schemas.lost)) };
}

/**
 * The analysis schemas of a job by outcome: the skill held to the environment's skill grammar
 * for a won or a lost trajectory (`skillPatterns`) when `seed.skill_grammar` is `env` and the
 * environment has one, else free text for both; with the summary field unless
 * `seed.analyzer_summary` is false. The one place RL-time analysis schemas are built (generation
 * and `checkAnalyzerBudget` both read it).
 */
export function analyzerSchemas(
  spec: JobSpec,
  env: Pick<AsyncEnvironment, "skillPatterns">,
): { won: JsonObjectSchema; lost: JsonObjectSchema } {
  const summary = spec.seed.analyzer_summary;
  const patterns = spec.seed.skill_grammar === "env" ? env.skillPatterns : undefined;
  if (!patterns) {
    const free = analysisSchema({ summary });
    return { won: free, lost: free };
  }
  return {
    won: analysisSchema({ skillPattern: patterns.won, summary }),
    lost: analysisSchema({ skillPattern: patterns.lost, summary }),
  };
}

/**
 * Fails early when the analyzer's budget cannot hold the shortest analysis object with this
 * tokenizer (constrained decoding needs `decoder.minTokens` tokens: free text 12 for GPT-2's and
 * ~20 for builtin tokenizers; more under an environment's skill grammar, with builtin tokenizers
 * Sokoban's 47 (won) and 34 (lost), household's 52 and 75; fewer without the summary field,
 * `seed.analyzer_summary: false`), for each outcome the job analyses (`seed.analyze`), under the
 * schemas generation uses (`analyzerSchemas`). Builds and keeps the constrained decoders (indexes
 * the vocabulary once).
 * @throws {SeedOptionError} naming `seed.analyzer_max_new_tokens`.
 */
export function checkAnalyzerBudget(
  spec: JobSpec,
  theta: TextPolicy,
  env: Pick<AsyncEnvironment, "skillPatterns">,
): void {
  const plan = runPlan(spec);
  if (!plan.analysis || !spec.seed.analyzer_constrained) return;
  const schemas = analyzerSchemas(spec, env);
  const used = plan.analyze === "failed_only" ? [schemas.lost] : [schemas.won, schemas.lost];
  const budget = spec.seed.analyzer_max_new_tokens;
  for (const schema of used) {
    const decoder = theta.jsonDecoder(schema);
    if (budget < decoder.minTokens) {
      throw new SeedOptionError(
        `Cannot analyze trajectories as seed.analyzer_max_new_tokens must be ≥ ${decoder.minTokens} (the tokens of ${decoder.exampleObject()} with this tokenizer) under constrained decoding: current value is ${budget}`,
        { option: "seed.analyzer_max_new_tokens", value: budget },
      );
    }
  }
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
    const scored = await timer.time("rescore", () => this.#rescore(samples, skills));
    const gaps = scored.teacher.map((t, i) => t ? t.map((x, k) => x - scored.old[i][k]) : null);
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
      oldLogProbs: scored.old,
      trajectories: trajectories.list,
      analyses: analysis.analyses,
    });
    const gapTokens = gaps.reduce((n, g) => n + (g?.length ?? 0), 0);
    const gapSum = gaps.reduce((n, g) => n + (g?.reduce((a, b) => a + b, 0) ?? 0), 0);
    signal?.throwIfAborted();

    await onStage("update");
    const replay = plan.analysis ? await this.#analyzerReplay(trajectories.list) : [];
    const update = await timer.time("update", () => this.#update(step, scored.rl, replay, signal));

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
      ...(gapTokens > 0 ? { teacher_gap_mean: gapSum / gapTokens } : {}),
      skill_library_size: this.parts.library.size,
      // SEED's own work inside the rescore and update phases (0 for GRPO), wall seconds.
      teacher_pass_seconds: scored.teacherSeconds,
      analyzer_replay_seconds: update.replaySeconds,
      advantage_abs_mean: samples.reduce((n, s) => n + Math.abs(s.advantage), 0) /
        Math.max(1, samples.length),
      ...signalStats,
    };
    // Per-token teacher gaps of the re-scored turns, for the trajectory dump.
    const tokenGaps: TokenGap[] = samples.flatMap((s, i) => {
      const g = gaps[i];
      if (!g) return [];
      return [{
        trajectoryId: s.trajectoryId,
        turn: s.turn,
        responseIds: scored.rl[i].response,
        gaps: g,
      }];
    });
    const teacher = { analyses: analysis.analyses, raw: analysis.raw, tokenGaps };
    return { metrics, trajectories: trajectories.list, teacher };
  }

  async #rollout(step: number, seed: number, signal?: AbortSignal) {
    const { spec, env, theta } = this.parts;
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
      policy: actionPolicy(theta, {
        maxNewTokens: spec.rollout.max_new_tokens,
        temperature: spec.rollout.temperature,
        seed,
        keepIds: true,
        onTokens: (n) => tokens += n,
      }),
    });
    return { list, tokens };
  }

  async #analyze(trajectories: RolloutTrajectory[]) {
    const { spec, plan, theta, env } = this.parts;
    let tokens = 0;
    const r = await analyzeTrajectories(trajectories, {
      mode: plan.analyze,
      prompt: analyzerPromptOptions(spec.seed),
      generate: async (prompts, analysed) => {
        const won = analysed.map((t) => t.won);
        const g = await theta.generate(prompts, analyzerGenerateOptions(spec, env, won));
        tokens += g.tokens;
        return g.texts;
      },
    });
    if (!spec.seed.analyzer_summary) {
      // Free text may still carry one (a summary written first, or a layout the stops miss):
      // the job asked for none, so the library and the dumps carry none (JobSpec doc).
      for (const [id, a] of r.analyses) if (a) r.analyses.set(id, { ...a, episode_summary: "" });
    }
    return { ...r, tokens };
  }

  /**
   * ℓ_old and ℓ_ref under the ordinary prompt; ℓ_T under the skill prompt where there is one
   * (and the seconds that teacher pass took). All three passes and the update score the same
   * response ids, the ones the rollout kept (`TurnSample.responseIds`: the sampled ids under a
   * chat template); only the prompt ids change. Every pass sees the turn's images; the skill
   * prompt keeps its `<image>`.
   */
  async #rescore(samples: TurnSample[], skills: Map<string, string | null>) {
    const { theta, reference } = this.parts;
    const plain: Sample[] = samples.map((s) =>
      theta.sample(s.prompt, s.responseIds ?? s.response, false, s.images)
    );
    const old = await theta.policy.score(plain);
    const ref = reference ? await reference.score(plain) : old;
    const prompts = teacherPrompts(samples, skills);
    const teacherIdx = prompts.flatMap((p, i) => (p === null ? [] : [i]));
    // A trajectory's teacher prompts share their task line and skill block (insertSkill puts it
    // after the task line): that prefix is computed once per trajectory, not once per turn.
    const started = performance.now();
    const byTrajectory = new Map<string, number[]>();
    teacherIdx.forEach((i, k) => {
      const id = samples[i].trajectoryId;
      const group = byTrajectory.get(id);
      if (group) group.push(k);
      else byTrajectory.set(id, [k]);
    });
    const teacher = await theta.policy.scoreSharedPrefixes(
      teacherIdx.map((i) => ({ ...plain[i], prompt: theta.promptIds(prompts[i]!) })),
      [...byTrajectory.values()],
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
   * Analyzer replay (this service's departure from the paper; README.md, Algorithm, step 5): up to
   * `seed.analyzer_replay_samples` of this step's trajectories, drawn with the trainer's Rng, as
   * (analyzer prompt → the environment's reference analysis) SFT samples. Their token-mean NLL,
   * weighted by `seed.analyzer_replay_coef`, is added to every update of the shared weights, so RL
   * does not wear away the analyzer's skill-writing (without it the demo's skills turned into word
   * salad within 16 updates). Empty when either setting is 0.
   */
  async #analyzerReplay(trajectories: RolloutTrajectory[]): Promise<Sample[]> {
    const { spec, env, theta, rng } = this.parts;
    const n = Math.min(spec.seed.analyzer_replay_samples, trajectories.length);
    if (n === 0 || spec.seed.analyzer_replay_coef === 0) return [];
    const pool = [...trajectories];
    const out: Sample[] = [];
    for (let i = 0; i < n; i++) {
      const j = i + rng.nextInt(pool.length - i);
      [pool[i], pool[j]] = [pool[j], pool[i]];
      const reference = await env.referenceAnalysis(pool[i]);
      const prompt = buildAnalyzerPrompt(pool[i], analyzerPromptOptions(spec.seed));
      out.push(theta.sample(prompt, analysisTarget(reference), true));
    }
    return out;
  }

  /**
   * `ppo_epochs` × mini-batches of `Policy.trainStep` on the SEED objective, clipped, AdamW at
   * the scheduled lr. Each output of the objective becomes a metric of the same name: its mean
   * over the step's mini-batches, weighted by the count the objective averages it over.
   */
  async #update(step: number, rl: SeedSample[], replay: Sample[], signal?: AbortSignal) {
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
    let tokens = 0, optimizerSteps = 0, gradNorm = 0, replayLoss = 0, replaySeconds = 0;
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
          dropout(),
        );
        if (r.tokens === 0) continue;
        if (replay.length > 0) {
          // loss += analyzer_replay_coef · NLL(replay): the gradients add.
          const started = performance.now();
          const sft = await theta.policy.trainStep(TOKEN_NLL, replay, {}, dropout());
          const c = spec.seed.analyzer_replay_coef;
          for (const [name, g] of sft.grads) {
            const acc = r.grads.get(name)!;
            for (let k = 0; k < acc.length; k++) acc[k] += c * g[k];
          }
          replayLoss += sft.outputs.loss;
          replaySeconds += (performance.now() - started) / 1000;
        }
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
    stats.analyzer_replay_loss = optimizerSteps > 0 ? replayLoss / optimizerSteps : 0;
    return { stats, tokens, replaySeconds };
  }
}

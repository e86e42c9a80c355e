/**
 * Warm-up (workers/seed/README.md, Algorithm, "Warm-up"): before RL, the policy is fine-tuned on
 * expert demonstrations of the job's environment (policy SFT), then on analyses of its own
 * trajectories written by the environment's reference analyzer (analyzer SFT), so that it can both
 * act and write parseable hindsight skills (or by an LLM annotator, as the paper does). The model
 * after warm-up is the reference policy π_ref.
 *
 * Data (all from the `train` split, seeded by the job's `random_seed`):
 * - policy SFT: each turn of an expert episode is one sample, prompt = `env.buildPrompt(…)` as in
 *   rollouts (with the observation's image where the prompt shows `<image>`), target =
 *   `<action>{expert action}</action>`;
 * - analyzer SFT: trajectories of the warmed policy sampled at temperature 1 (successes and
 *   failures alike), prompt = `buildAnalyzerPrompt(trajectory)` (text only: observations as
 *   their text descriptions), target =
 *   `analysisTarget(env.referenceAnalysis(trajectory))` + EOS, or the LLM annotator's parsed
 *   label (annotator.ts; unparseable labels are dropped).
 */
import type {
  AsyncEnvironment,
  AsyncExpert,
  Observation,
  SkillAnalysis,
  Task,
  Trajectory,
} from "../envs/mod.ts";
import { AdamW, clipGradNorm, learningRate, Rng, type Sample, TOKEN_NLL } from "../model/mod.ts";
import { promptImages, type RolloutOptions, type RolloutStep, runRollouts } from "./rollout.ts";
import { miniBatches } from "./samples.ts";
import {
  analysisTarget,
  type AnalyzerPromptOptions,
  buildAnalyzerPrompt,
  insertSkill,
  meaningful,
} from "../skills/mod.ts";
import { ACTION_STOP, actionPolicy, type TextPolicy } from "./text_policy.ts";

/** One phase of an SFT stage: `epochs` shuffled passes over `samples`. */
export interface SftPhase {
  samples: Sample[];
  epochs: number;
}

/** One SFT stage's settings (JobSpec `warmup.policy` / `warmup.analyzer`, `optim`). */
export interface SftOptions {
  /** Samples per optimizer step. */
  batchSize: number;
  lr: number;
  /** Global gradient-norm clip (0 = none). */
  maxGradNorm: number;
  /** Seed of the shuffles. */
  seed: number;
  signal?: AbortSignal;
  /** Called (and awaited) once before the first optimizer step with the planned total steps. */
  onStart?: (total: number) => void | Promise<void>;
  /** Called after each optimizer step with (done, total) steps and the step's loss. */
  onStep?: (done: number, total: number, loss: number) => void | Promise<void>;
  /**
   * `constant` (default), or `cosine`: lr · ½(1 + cos(π·k/total)) at optimizer step k of the
   * planned `total` (to 0 at the end of the last phase; workers/model/optim.ts `learningRate`).
   */
  lrSchedule?: "constant" | "cosine";
  /**
   * Called after every `every`-th optimizer step (not after the last one) with (done, total):
   * when it resolves true the stage stops there (held-out success reached its target).
   */
  check?: { every: number; run: (done: number, total: number) => Promise<boolean> };
}

/** What an SFT stage did. */
export interface SftReport {
  /** Samples of the largest phase (the stage's data set). */
  samples: number;
  optimizerSteps: number;
  /** Token-mean NLL of the first and the last optimizer step (nats per token). */
  firstLoss: number;
  lastLoss: number;
  tokens: number;
  /** True when `check` stopped the stage before its planned steps. */
  stoppedEarly: boolean;
}

/**
 * Supervised fine-tuning of `text.policy` in place: the phases in order, each `epochs` shuffled
 * passes over its samples, with one AdamW (fresh state, no weight decay, lr by `lrSchedule`)
 * across all of them, on the token-mean NLL of the responses, with gradient clipping. A phase of
 * no samples or no epochs is skipped. `check` may stop it early.
 */
export async function sftTrain(
  text: TextPolicy,
  phases: SftPhase[],
  options: SftOptions,
): Promise<SftReport> {
  const report: SftReport = {
    samples: Math.max(0, ...phases.map((p) => p.samples.length)),
    optimizerSteps: 0,
    firstLoss: NaN,
    lastLoss: NaN,
    tokens: 0,
    stoppedEarly: false,
  };
  if (options.lr === 0) return report;
  const { policy } = text;
  const optimizer = new AdamW(policy.trainableSpecs(), { lr: options.lr, weightDecay: 0 });
  const rng = new Rng(options.seed);
  // (phase samples, mini-batch indices into them), every pass of every phase in order.
  const passes = phases.flatMap(({ samples, epochs }) =>
    samples.length === 0 || epochs === 0 ? [] : miniBatches(samples.length, {
      miniBatchSize: options.batchSize,
      epochs,
      rng: () => rng.next(),
    }).map((batches) => ({ samples, batches }))
  );
  const total = passes.reduce((n, p) => n + p.batches.length, 0);
  await options.onStart?.(total);
  for (const { samples, batches } of passes) {
    for (const batch of batches) {
      options.signal?.throwIfAborted();
      // LoRA dropout masks come from this stage's seeded stream (no draw without dropout).
      const dropout = policy.opts.lora?.dropout ? { dropoutSeed: rng.nextUint32() } : {};
      const r = await policy.trainStep(TOKEN_NLL, batch.map((i) => samples[i]), {}, dropout);
      const loss = r.outputs.loss;
      if (options.maxGradNorm > 0) clipGradNorm(r.grads, options.maxGradNorm);
      const lr = learningRate(report.optimizerSteps, {
        kind: options.lrSchedule ?? "constant",
        lr: options.lr,
        warmupSteps: 0,
        totalSteps: total,
      });
      optimizer.step(policy.params, r.grads, lr);
      report.optimizerSteps++;
      report.tokens += r.tokens;
      if (report.optimizerSteps === 1) report.firstLoss = loss;
      report.lastLoss = loss;
      await options.onStep?.(report.optimizerSteps, total, loss);
      const { check } = options;
      if (
        check && check.every > 0 && report.optimizerSteps % check.every === 0 &&
        report.optimizerSteps < total && await check.run(report.optimizerSteps, total)
      ) {
        report.stoppedEarly = true;
        return report;
      }
    }
  }
  return report;
}

/** Options of the data builders. */
export interface WarmupDataOptions {
  env: AsyncEnvironment;
  /** JobSpec `env.options`. */
  envOptions: Record<string, unknown>;
  episodes: number;
  maxTurns: number;
  historyLength: number;
  seed: number;
}

/** Options of {@link expertSamples}: the data, and the skill-conditioned share of it. */
export interface DemonstrationOptions extends WarmupDataOptions {
  /**
   * Share of the demonstration turns (0–1) shown with their own episode's reference skill in the
   * teacher prompt's position (`insertSkill`, as re-scoring writes it) instead of the ordinary
   * prompt (JobSpec `warmup.policy.skill_share`; default 0).
   */
  skillShare?: number;
  /**
   * Corrective samples to add, as a share of the demonstration turns (JobSpec
   * `experimental.corrective_share`; default 0): see {@link correctiveSteps}.
   */
  correctiveShare?: number;
}

/** What {@link expertSamples} built. */
export interface Demonstrations {
  /** The SFT samples: demonstrations (ordinary or skill prompt), then corrective samples. */
  samples: Sample[];
  /**
   * The same demonstrations, every one with its ordinary prompt (no corrective samples): the
   * data of the passes before skill-conditioned ones (JobSpec `warmup.policy.skill_epochs`).
   */
  ordinary: Sample[];
  /** Expert episodes won. */
  won: number;
  /** Demonstration turns shown with their episode's skill. */
  skilled: number;
  /** Corrective samples (failure skill in the prompt, the expert's action as target). */
  corrective: number;
}

/**
 * Expert demonstrations as (prompt, `<action>…</action>`) samples: one per turn of `episodes`
 * expert episodes on `train` tasks. With `skillShare` > 0 a seeded share carries a skill in the
 * prompt: a pretrained instruct model already acts on a hint in its context, a model trained from
 * scratch must be taught to, or the skill in the teacher prompt changes nothing (ℓ_T = ℓ_old and
 * SEED is GRPO). Where the environment has a skilled demonstration
 * (`env.skilledDemonstration`), that share of the tasks is replaced by it (its expert, its skill
 * in every prompt), so the skill is needed to predict the target; elsewhere that share of the
 * turns shows its own episode's reference skill (`env.referenceAnalysis`) with the same target.
 * With `correctiveShare` > 0, corrective samples follow ({@link correctiveSteps}).
 */
export async function expertSamples(
  text: TextPolicy,
  options: DemonstrationOptions,
): Promise<Demonstrations> {
  const { env } = options;
  const out: Demonstrations = { samples: [], ordinary: [], won: 0, skilled: 0, corrective: 0 };
  if (options.episodes === 0) return out;
  const tasks = await env.sampleTasks("train", options.episodes, options.seed, options.envOptions);
  const skillShare = options.skillShare ?? 0;
  const rng = new Rng((options.seed ^ 0x5eed5) >>> 0);
  for (const task of tasks) {
    const episode = await expertEpisode(env, task, options);
    const ordinary = episode.steps.map((s) => text.sample(s.prompt, s.response, false, s.images));
    out.ordinary.push(...ordinary);
    if (episode.won) out.won++;
    if (skillShare === 0) {
      out.samples.push(...ordinary);
    } else if (env.skilledDemonstration !== undefined) {
      if (rng.next() >= skillShare) {
        out.samples.push(...ordinary);
        continue;
      }
      const demo = await env.skilledDemonstration(task);
      const skilled = await expertEpisode(env, task, options, undefined, demo.expert);
      for (const s of skilled.steps) {
        out.samples.push(
          text.sample(insertSkill(s.prompt, demo.skill), s.response, false, s.images),
        );
      }
      out.skilled += skilled.steps.length;
    } else {
      const trajectory = { task, ...episode, score: episode.won ? 10 : 0 };
      const skill = (await env.referenceAnalysis(trajectory)).episode_skill;
      episode.steps.forEach((s, i) => {
        const withSkill = meaningful(skill) && rng.next() < skillShare;
        out.samples.push(
          withSkill
            ? text.sample(insertSkill(s.prompt, skill), s.response, false, s.images)
            : ordinary[i],
        );
        if (withSkill) out.skilled++;
      });
    }
  }
  const wanted = Math.round((options.correctiveShare ?? 0) * out.samples.length);
  if (wanted > 0) {
    const steps = await correctiveSteps(env, tasks, { ...options, seed: options.seed + 1 });
    for (let i = 0; i < wanted && steps.length > 0; i++) {
      const s = steps[i % steps.length];
      out.samples.push(text.sample(s.prompt, s.response, false, s.images));
      out.corrective++;
    }
  }
  return out;
}

/** Probability of a random admissible action at each turn of a corrective episode. */
export const CORRECTIVE_EPSILON = 0.5;

/**
 * Corrective turns: each task is played by a noisy expert (at each turn, with probability
 * {@link CORRECTIVE_EPSILON}, a random admissible action that differs from the expert's). For each
 * episode that fails, every turn where the random action was taken becomes a sample whose prompt
 * carries the failure's reference skill (the avoidance rule: "never push the box into a corner")
 * and whose target is the expert's action at that state — so the rule lowers exactly the mistaken
 * action. Environments without a finite list of admissible actions give none. Order: by task,
 * then turn; shuffled by the SFT stage.
 */
export async function correctiveSteps(
  env: AsyncEnvironment,
  tasks: readonly Task[],
  options: WarmupDataOptions,
): Promise<RolloutStep[]> {
  const rng = new Rng(options.seed >>> 0);
  const out: RolloutStep[] = [];
  for (const task of tasks) {
    const deviations: { turn: number; expert: string }[] = [];
    const { steps, won } = await expertEpisode(env, task, options, (observation, best, turn) => {
      const others = (observation.admissibleActions ?? []).filter((a) => a !== best);
      if (others.length === 0 || rng.next() >= CORRECTIVE_EPSILON) return best;
      deviations.push({ turn, expert: best });
      return others[rng.nextInt(others.length)];
    });
    if (won || deviations.length === 0) continue;
    const skill = (await env.referenceAnalysis({ task, steps, won, score: 0 })).episode_skill;
    if (!meaningful(skill)) continue;
    for (const d of deviations) {
      const s = steps[d.turn];
      out.push({
        ...s,
        prompt: insertSkill(s.prompt, skill),
        response: `<action>${d.expert}${ACTION_STOP}`,
        action: d.expert,
      });
    }
  }
  return out;
}

/**
 * One episode of `task` played by the expert, or by `choose` (given the observation, the expert's
 * action and the 0-based turn; it returns the action to take), with each turn's prompt as
 * rollouts build it.
 */
export async function expertEpisode(
  env: AsyncEnvironment,
  task: Task,
  options: WarmupDataOptions,
  choose: (observation: Observation, expert: string, turn: number) => string = (_, a) => a,
  expert: AsyncExpert = env.createExpert(task),
): Promise<{ steps: RolloutStep[]; won: boolean }> {
  const episode = env.createEpisode(task);
  const steps: RolloutStep[] = [];
  try {
    let observation = await episode.reset();
    for (let turn = 1; turn <= options.maxTurns; turn++) {
      const prompt = await env.buildPrompt({
        task,
        history: steps,
        observation,
        historyLength: options.historyLength,
        turn,
      });
      const images = promptImages(prompt, observation, turn);
      const action = choose(observation, await expert.act(observation), steps.length);
      const result = await episode.step(action);
      steps.push({
        prompt,
        ...(images.length > 0 ? { images } : {}),
        observation: observation.text,
        response: `<action>${action}${ACTION_STOP}`,
        action,
        valid: result.valid,
        reward: result.reward,
        ...(result.feedback !== undefined ? { feedback: result.feedback } : {}),
      });
      observation = result.observation;
      if (result.done) return { steps, won: result.won };
    }
    return { steps, won: false };
  } finally {
    await Promise.allSettled([episode.close(), expert.close()]);
  }
}

/** Options of {@link analyzerSamples}. */
export interface AnalyzerDataOptions extends WarmupDataOptions {
  /** Rollout sampling: temperature (1 in the paper's spirit: successes and failures). */
  temperature: number;
  maxNewTokens: number;
  prompt: AnalyzerPromptOptions;
  signal?: AbortSignal;
  /**
   * Labels the trajectories instead of the reference analyzer (the LLM annotator, annotator.ts):
   * one analysis per trajectory, in order, null where there is none (that trajectory is dropped).
   */
  label?: (trajectories: Trajectory[]) => Promise<(SkillAnalysis | null)[]>;
  /** Called (and awaited) after each turn of the trajectories (rollout.ts `onTurn`). */
  onTurn?: RolloutOptions["onTurn"];
}

/**
 * Analyzer SFT data: `episodes` trajectories of the (warmed) policy on `train` tasks, each
 * paired with its label's JSON (+ EOS) as the target: the reference analyzer's, or `label`'s
 * (trajectories it leaves unlabelled are dropped).
 */
export async function analyzerSamples(
  text: TextPolicy,
  options: AnalyzerDataOptions,
): Promise<{ samples: Sample[]; won: number; tokensGenerated: number }> {
  const { env } = options;
  if (options.episodes === 0) return { samples: [], won: 0, tokensGenerated: 0 };
  const tasks = await env.sampleTasks("train", options.episodes, options.seed, options.envOptions);
  let tokensGenerated = 0;
  const trajectories = await runRollouts({
    env,
    tasks,
    groupSize: 1,
    maxTurns: options.maxTurns,
    historyLength: options.historyLength,
    signal: options.signal,
    idPrefix: "warmup/",
    onTurn: options.onTurn,
    policy: actionPolicy(text, {
      maxNewTokens: options.maxNewTokens,
      temperature: options.temperature,
      seed: options.seed,
      onTokens: (n) => tokensGenerated += n,
    }),
  });
  let labels: (SkillAnalysis | null)[] = [];
  if (options.label) labels = await options.label(trajectories);
  else for (const t of trajectories) labels.push(await env.referenceAnalysis(t));
  const samples: Sample[] = [];
  trajectories.forEach((t, i) => {
    const label = labels[i];
    if (!label) return;
    samples.push(text.sample(buildAnalyzerPrompt(t, options.prompt), analysisTarget(label), true));
  });
  return { samples, won: trajectories.filter((t) => t.won).length, tokensGenerated };
}

/** Thrown when user-supplied warm-up data (`warmup.data`) cannot be used. */
export class WarmupDataError extends Error {
  override name = "WarmupDataError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** Largest `warmup.data` object read (bytes) and most lines used. */
export const MAX_WARMUP_DATA_BYTES = 64 * 1024 * 1024;
/** See {@link MAX_WARMUP_DATA_BYTES}. */
export const MAX_WARMUP_DATA_LINES = 100_000;

/**
 * Parses user warm-up data: JSONL, one `{"prompt": string, "response": string}` per line (blank
 * lines skipped); `"kind": "analyzer"` marks an analyzer example (trained with an EOS), anything
 * else is a policy example. Prompts are used as given (the trainer appends its separator).
 * @throws WarmupDataError naming the first bad line, or when the data is too large.
 */
export function parseWarmupData(
  bytes: Uint8Array,
): {
  policy: { prompt: string; response: string }[];
  analyzer: { prompt: string; response: string }[];
} {
  if (bytes.length > MAX_WARMUP_DATA_BYTES) {
    throw new WarmupDataError(
      `Cannot use warmup.data as it must be at most ${MAX_WARMUP_DATA_BYTES} bytes: current size is ${bytes.length}`,
    );
  }
  const out = {
    policy: [] as { prompt: string; response: string }[],
    analyzer: [] as { prompt: string; response: string }[],
  };
  const lines = new TextDecoder().decode(bytes).split("\n");
  let used = 0;
  for (const [i, line] of lines.entries()) {
    if (line.trim() === "") continue;
    if (++used > MAX_WARMUP_DATA_LINES) {
      throw new WarmupDataError(
        `Cannot use warmup.data as it must have at most ${MAX_WARMUP_DATA_LINES} examples: it has more`,
      );
    }
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch (cause) {
      throw new WarmupDataError(`Cannot use warmup.data as line ${i + 1} must be JSON`, { cause });
    }
    const r = row as { prompt?: unknown; response?: unknown; kind?: unknown };
    if (typeof r?.prompt !== "string" || typeof r.response !== "string" || r.response === "") {
      throw new WarmupDataError(
        `Cannot use warmup.data as line ${
          i + 1
        } must be {"prompt": string, "response": non-empty string}`,
      );
    }
    (r.kind === "analyzer" ? out.analyzer : out.policy).push({
      prompt: r.prompt,
      response: r.response,
    });
  }
  return out;
}

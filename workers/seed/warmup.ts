/**
 * Warm-up (DESIGN.md §8, "Warm-up"): before RL, the policy is fine-tuned on expert
 * demonstrations of the job's environment (policy SFT), then on analyses of its own trajectories
 * written by the environment's reference analyzer (analyzer SFT), so that it can both act and
 * write parseable hindsight skills. The model after warm-up is the reference policy π_ref.
 *
 * Data (all from the `train` split, seeded by the job's `random_seed`):
 * - policy SFT: each turn of an expert episode is one sample, prompt = `env.buildPrompt(…)` as in
 *   rollouts (with the observation's image where the prompt shows `<image>`), target =
 *   `<action>{expert action}</action>`;
 * - analyzer SFT: trajectories of the warmed policy sampled at temperature 1 (successes and
 *   failures alike), prompt = `buildAnalyzerPrompt(trajectory)` (text only: observations as
 *   their text descriptions), target =
 *   `analysisTarget(env.referenceAnalysis(trajectory))` + EOS.
 */
import type { AsyncEnvironment, Task } from "../envs/mod.ts";
import { AdamW, clipGradNorm, parameterSpecs, Rng, type Sample, TOKEN_NLL } from "../model/mod.ts";
import { promptImages, type RolloutStep, runRollouts } from "./rollout.ts";
import { miniBatches } from "./samples.ts";
import { analysisTarget, type AnalyzerPromptOptions, buildAnalyzerPrompt } from "./skills.ts";
import { ACTION_STOP, type TextPolicy } from "./text_policy.ts";

/** One SFT stage's settings (JobSpec `warmup.policy` / `warmup.analyzer`, `optim`). */
export interface SftOptions {
  epochs: number;
  /** Samples per optimizer step. */
  batchSize: number;
  lr: number;
  /** Global gradient-norm clip (0 = none). */
  maxGradNorm: number;
  /** Seed of the shuffles. */
  seed: number;
  signal?: AbortSignal;
  /** Called after each optimizer step with (done, total) steps and the step's loss. */
  onStep?: (done: number, total: number, loss: number) => void | Promise<void>;
}

/** What an SFT stage did. */
export interface SftReport {
  samples: number;
  optimizerSteps: number;
  /** Token-mean NLL of the first and the last optimizer step (nats per token). */
  firstLoss: number;
  lastLoss: number;
  tokens: number;
}

/**
 * Supervised fine-tuning of `text.policy` in place: `epochs` shuffled passes, AdamW (fresh
 * state, no weight decay) on the token-mean NLL of the responses, with gradient clipping.
 */
export async function sftTrain(
  text: TextPolicy,
  samples: Sample[],
  options: SftOptions,
): Promise<SftReport> {
  const report: SftReport = {
    samples: samples.length,
    optimizerSteps: 0,
    firstLoss: NaN,
    lastLoss: NaN,
    tokens: 0,
  };
  if (samples.length === 0 || options.epochs === 0 || options.lr === 0) return report;
  const { policy } = text;
  const optimizer = new AdamW(parameterSpecs(policy.config), { lr: options.lr, weightDecay: 0 });
  const rng = new Rng(options.seed);
  const epochs = miniBatches(samples.length, {
    miniBatchSize: options.batchSize,
    epochs: options.epochs,
    rng: () => rng.next(),
  });
  const total = epochs.reduce((n, e) => n + e.length, 0);
  for (const batches of epochs) {
    for (const batch of batches) {
      options.signal?.throwIfAborted();
      const r = await policy.trainStep(TOKEN_NLL, batch.map((i) => samples[i]));
      const loss = r.outputs.loss;
      if (options.maxGradNorm > 0) clipGradNorm(r.grads, options.maxGradNorm);
      optimizer.step(policy.params, r.grads);
      report.optimizerSteps++;
      report.tokens += r.tokens;
      if (report.optimizerSteps === 1) report.firstLoss = loss;
      report.lastLoss = loss;
      await options.onStep?.(report.optimizerSteps, total, loss);
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

/**
 * Expert demonstrations as (prompt, `<action>…</action>`) samples: one per turn of
 * `episodes` expert episodes on `train` tasks.
 */
export async function expertSamples(
  text: TextPolicy,
  options: WarmupDataOptions,
): Promise<{ samples: Sample[]; won: number }> {
  const { env } = options;
  if (options.episodes === 0) return { samples: [], won: 0 };
  const tasks = await env.sampleTasks("train", options.episodes, options.seed, options.envOptions);
  const samples: Sample[] = [];
  let won = 0;
  for (const task of tasks) {
    const steps = await expertEpisode(env, task, options);
    for (const s of steps.steps) samples.push(text.sample(s.prompt, s.response, false, s.images));
    if (steps.won) won++;
  }
  return { samples, won };
}

async function expertEpisode(
  env: AsyncEnvironment,
  task: Task,
  options: WarmupDataOptions,
): Promise<{ steps: RolloutStep[]; won: boolean }> {
  const episode = env.createEpisode(task);
  const expert = env.createExpert(task);
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
      const action = await expert.act(observation);
      const result = await episode.step(action);
      steps.push({
        prompt,
        ...(images.length > 0 ? { images } : {}),
        observation: observation.text,
        response: `<action>${action}${ACTION_STOP}`,
        action,
        valid: result.valid,
        reward: result.reward,
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
}

/**
 * Analyzer SFT data: `episodes` trajectories of the (warmed) policy on `train` tasks, each
 * paired with the reference analyzer's JSON (+ EOS) as the target.
 */
export async function analyzerSamples(
  text: TextPolicy,
  options: AnalyzerDataOptions,
): Promise<{ samples: Sample[]; won: number; tokensGenerated: number }> {
  const { env } = options;
  if (options.episodes === 0) return { samples: [], won: 0, tokensGenerated: 0 };
  const tasks = await env.sampleTasks("train", options.episodes, options.seed, options.envOptions);
  let turn = 0, tokensGenerated = 0;
  const trajectories = await runRollouts({
    env,
    tasks,
    groupSize: 1,
    maxTurns: options.maxTurns,
    historyLength: options.historyLength,
    signal: options.signal,
    idPrefix: "warmup/",
    policy: async (prompts, images) => {
      const g = await text.generate(prompts, {
        maxNewTokens: options.maxNewTokens,
        temperature: options.temperature,
        seed: (options.seed + 7919 * ++turn) >>> 0,
        stop: [ACTION_STOP],
        images,
      });
      tokensGenerated += g.tokens;
      return g.texts;
    },
  });
  const samples: Sample[] = [];
  for (const t of trajectories) {
    const reference = await env.referenceAnalysis(t);
    samples.push(
      text.sample(buildAnalyzerPrompt(t, options.prompt), analysisTarget(reference), true),
    );
  }
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

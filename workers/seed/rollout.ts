/**
 * The multi-turn rollout loop (workers/seed/README.md, Algorithm, step 1), independent of the
 * model: B tasks × G copies are stepped together; each turn collects the prompts of all live
 * episodes, makes ONE batched policy call, parses each response's action and steps the
 * environments. Episodes leave when done; the loop ends when none is live or after `maxTurns`.
 * Every turn keeps its prompt, response, action, validity and reward, so each turn can become one
 * training sample.
 *
 * Works with in-process environments (via `asAsync`) and HTTP ones alike: it only needs the
 * small `AsyncEnvironmentLike` interface below, whose methods may return values or promises.
 *
 * Images (vision variants): a prompt that shows the `<image>` placeholder shows the current
 * observation's image there ({@link promptImages}); the policy gets each prompt's images beside
 * it, and the turn keeps them (`RolloutStep.images`), so re-scoring and the update see the same
 * pixels. Observation texts stay the full descriptions (what the analyzer reads).
 */
import type {
  Environment,
  Observation,
  PromptInput,
  StepResult,
  Task,
  Trajectory,
  TrajectoryStep,
} from "../envs/types.ts";
import { IMAGE_PLACEHOLDER } from "../envs/prompt.ts";
import { checkNumber, RolloutError } from "./errors.ts";

/** An observation image: RGB bytes, row-major (structurally the model's `RgbImage`). */
export type ObservationImage = NonNullable<Observation["image"]>;

/**
 * The images a turn prompt shows: the observation's image when the observation has one and the
 * prompt holds the `<image>` placeholder (built-in prompts show one image, the current
 * observation's); none otherwise (a text observation's prompt is text, even if it quotes
 * `<image>`).
 * @throws {RolloutError} when the observation has an image and the prompt shows the placeholder
 *   more than once (one image cannot fill two places).
 */
export function promptImages(
  prompt: string,
  observation: Observation,
  turn: number,
): ObservationImage[] {
  if (!observation.image) return [];
  const shown = prompt.split(IMAGE_PLACEHOLDER).length - 1;
  if (shown <= 1) return shown === 1 ? [observation.image] : [];
  throw new RolloutError(
    `Cannot pair the prompt of turn ${turn} with its observation's image as the prompt must show ${IMAGE_PLACEHOLDER} at most once: current count is ${shown}`,
    { turn },
  );
}

/** A value or a promise of it: lets sync and async environments share one interface. */
export type MaybePromise<T> = T | Promise<T>;

/** A live episode the loop can drive (an `Episode` with possibly asynchronous methods). */
export interface AsyncEpisodeLike {
  readonly task: Task;
  /** The initial observation. */
  reset(): MaybePromise<Observation>;
  /** Applies an action text (already parsed from the response). */
  step(actionText: string): MaybePromise<StepResult>;
  /** Releases the episode (e.g. an HTTP env's session); called once when the rollout ends. */
  close?(): MaybePromise<void>;
}

/** The part of an environment the rollout loop uses (structurally met by `Environment`). */
export interface AsyncEnvironmentLike {
  createEpisode(task: Task): MaybePromise<AsyncEpisodeLike>;
  buildPrompt(input: PromptInput): MaybePromise<string>;
  parseAction(response: string): MaybePromise<string | null>;
}

/** Adapts a synchronous in-process `Environment` to `AsyncEnvironmentLike` (promise-returning). */
export function asAsync(env: Environment): AsyncEnvironmentLike & {
  createEpisode(task: Task): Promise<AsyncEpisodeLike>;
} {
  return {
    createEpisode(task: Task): Promise<AsyncEpisodeLike> {
      const episode = env.createEpisode(task);
      return Promise.resolve({
        task: episode.task,
        reset: () => Promise.resolve().then(() => episode.reset()),
        step: (action: string) => Promise.resolve().then(() => episode.step(action)),
      });
    },
    buildPrompt: (input) => env.buildPrompt(input),
    parseAction: (response) => env.parseAction(response),
  };
}

/** One turn as the trainer needs it: the `TrajectoryStep` plus the exact prompt and its images. */
export interface RolloutStep extends TrajectoryStep {
  /** The ordinary prompt the policy answered at this turn. */
  prompt: string;
  /**
   * The response's token ids as the trainer scores them (text_policy.ts
   * `TextGeneration.responseIds`: the sampled ids under a chat template), when the policy
   * reported them; absent: the trainer encodes `response`.
   */
  responseIds?: number[];
  /** The images of the prompt's `<image>` placeholders, in order; absent for text prompts. */
  images?: ObservationImage[];
  /**
   * Remote engines: the engine's log-prob of each sampled id (the first ids of `responseIds`),
   * compared with the trainer's θ_old in the step's `rollout/logprob_*` metrics.
   */
  samplingLogprobs?: number[];
  /** Remote engines: the policy version (updates done) that produced the response. */
  policyVersion?: number;
}

/** A finished rollout episode: a `Trajectory` with ids, group position and per-turn prompts. */
export interface RolloutTrajectory extends Trajectory {
  /** `${idPrefix}b{taskIndex}g{copyIndex}`, unique within one `runRollouts` call. */
  id: string;
  /** Index of the task in `tasks` (0..B−1). */
  taskIndex: number;
  /** Copy of the task (0..G−1). */
  copyIndex: number;
  steps: RolloutStep[];
  /** True when `maxTurns` ran out before the environment said done. */
  truncated: boolean;
}

/** A batch of responses with the token ids each is trained as (`responseIds[i]` for `texts[i]`). */
export interface PolicyResponses {
  texts: string[];
  responseIds: number[][];
  /** A remote engine's log-prob of each sampled id (remote_rollout.ts), per response. */
  logprobs?: number[][];
  /** The policy version (updates done) that produced each response. */
  versions?: number[];
  /** Tokens generated. */
  tokens?: number;
}

/**
 * A batched policy: one response per prompt, in the same order, as texts or as texts with their
 * token ids (kept on each turn as `RolloutStep.responseIds`); `images[i]` are the images of
 * prompt i's placeholders (empty for a text prompt).
 */
export type BatchPolicy = (
  prompts: string[],
  images: ObservationImage[][],
) => Promise<string[] | PolicyResponses>;

/** Options of `runRollouts`. */
export interface RolloutOptions {
  env: AsyncEnvironmentLike;
  /** The B tasks; each runs `groupSize` times from the same initial state. */
  tasks: readonly Task[];
  /** G copies per task (≥ 1). */
  groupSize: number;
  /** Turn limit per episode (≥ 1, JobSpec `env.max_turns`). */
  maxTurns: number;
  /** Steps of history shown in each prompt (≥ 0, JobSpec `env.history`). */
  historyLength: number;
  policy: BatchPolicy;
  /** Prefix of trajectory ids (e.g. `step-3/`). Default "". */
  idPrefix?: string;
  /** Aborts between turns (cancel within a step); the reason is rethrown. */
  signal?: AbortSignal;
  /**
   * Called (and awaited) after each turn with the number of episodes that acted and that are
   * still live.
   */
  onTurn?: (progress: { turn: number; acted: number; live: number }) => void | Promise<void>;
}

interface LiveEpisode {
  episode: AsyncEpisodeLike;
  trajectory: RolloutTrajectory;
  observation: Observation;
  done: boolean;
  lastInfo: Record<string, unknown>;
}

/** Sum of step rewards, or the final step's numeric `info.score` where the env reports one. */
function finalScore(live: LiveEpisode): number {
  const score = live.lastInfo.score;
  if (typeof score === "number" && Number.isFinite(score)) return score;
  return live.trajectory.steps.reduce((sum, s) => sum + s.reward, 0);
}

/** Runs `f`, wrapping any failure in a `RolloutError` that names the turn and the stage. */
async function stage<T>(turn: number, what: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (error) {
    if (error instanceof RolloutError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw new RolloutError(`Cannot ${what} at turn ${turn}: ${message}`, { turn, cause: error });
  }
}

/**
 * Runs B·G episodes together (see the module doc) and returns their trajectories ordered by
 * (taskIndex, copyIndex). Each turn's prompts are ordered the same way among live episodes.
 * An unparseable response counts as an invalid turn (action "", reward 0, state unchanged, the
 * environment is not stepped); an inadmissible action is stepped and the env reports it invalid.
 * Throws `RolloutError` when the policy returns the wrong number of responses or an environment
 * call fails; episodes are closed in every case.
 */
export async function runRollouts(options: RolloutOptions): Promise<RolloutTrajectory[]> {
  const { env, tasks, groupSize, maxTurns, historyLength, policy, signal } = options;
  checkNumber("groupSize", groupSize, { min: 1, integer: true });
  checkNumber("maxTurns", maxTurns, { min: 1, integer: true });
  checkNumber("historyLength", historyLength, { min: 0, integer: true });
  const prefix = options.idPrefix ?? "";
  const all: LiveEpisode[] = [];
  try {
    await stage(0, "create the episodes", async () => {
      const pairs = tasks.flatMap((task, b) =>
        Array.from({ length: groupSize }, (_, g) => ({ task, b, g }))
      );
      const episodes = await Promise.all(pairs.map(({ task }) => env.createEpisode(task)));
      // Record episodes before reset so that a failing reset still closes every one of them.
      pairs.forEach(({ task, b, g }, i) =>
        all.push({
          episode: episodes[i],
          observation: { text: "" },
          done: false,
          lastInfo: {},
          trajectory: {
            id: `${prefix}b${b}g${g}`,
            taskIndex: b,
            copyIndex: g,
            task,
            steps: [],
            won: false,
            score: 0,
            truncated: false,
          },
        })
      );
      const observations = await Promise.all(episodes.map((e) => e.reset()));
      observations.forEach((o, i) => all[i].observation = o);
    });
    for (let turn = 1; turn <= maxTurns; turn++) {
      signal?.throwIfAborted();
      const live = all.filter((e) => !e.done);
      if (live.length === 0) break;
      await playTurn(live, turn);
      await options.onTurn?.({
        turn,
        acted: live.length,
        live: live.filter((e) => !e.done).length,
      });
    }
    for (const e of all) {
      e.trajectory.truncated = !e.done;
      e.trajectory.score = finalScore(e);
    }
    return all.map((e) => e.trajectory);
  } finally {
    await Promise.allSettled(all.filter((e) => e.episode.close).map((e) => e.episode.close!()));
  }

  /** One turn: prompts → one policy call → parse → step (all live episodes). */
  async function playTurn(live: LiveEpisode[], turn: number): Promise<void> {
    const prompts = await stage(
      turn,
      "build the prompts",
      () =>
        Promise.all(live.map((e) =>
          env.buildPrompt({
            task: e.trajectory.task,
            history: e.trajectory.steps.slice(),
            observation: e.observation,
            historyLength,
            turn,
          })
        )),
    );
    const images = prompts.map((p, i) => promptImages(p, live[i].observation, turn));
    const answer = await stage(turn, "run the policy", () => policy(prompts, images));
    const responses = Array.isArray(answer) ? answer : answer?.texts;
    const ids = Array.isArray(answer) ? undefined : answer?.responseIds;
    const logprobs = Array.isArray(answer) ? undefined : answer?.logprobs;
    const versions = Array.isArray(answer) ? undefined : answer?.versions;
    if (
      !Array.isArray(responses) || responses.length !== prompts.length ||
      (ids !== undefined && ids.length !== prompts.length)
    ) {
      throw new RolloutError(
        `Cannot continue the rollout as the policy must return one response per prompt (${prompts.length}): current value is ${
          Array.isArray(responses) ? responses.length : typeof responses
        }`,
        { turn },
      );
    }
    const actions = await stage(
      turn,
      "parse the actions",
      () => Promise.all(responses.map((r) => env.parseAction(r))),
    );
    const results = await stage(
      turn,
      "step the environments",
      () =>
        Promise.all(live.map((e, i) => actions[i] === null ? null : e.episode.step(actions[i]!))),
    );
    live.forEach((e, i) => {
      const result = results[i];
      e.trajectory.steps.push({
        prompt: prompts[i],
        ...(images[i].length > 0 ? { images: images[i] } : {}),
        observation: e.observation.text,
        response: responses[i],
        ...(ids ? { responseIds: ids[i] } : {}),
        ...(logprobs ? { samplingLogprobs: logprobs[i] } : {}),
        ...(versions ? { policyVersion: versions[i] } : {}),
        action: actions[i] ?? "",
        valid: result?.valid ?? false,
        reward: result?.reward ?? 0,
        ...(result?.feedback !== undefined ? { feedback: result.feedback } : {}),
      });
      if (result === null) return;
      e.observation = result.observation;
      e.lastInfo = result.info ?? {};
      if (result.done) {
        e.done = true;
        e.trajectory.won = result.won;
      }
    });
  }
}

/*
 * Changes (backwards compatible):
 * - Environment gained an optional `splitDescriptions` (what each split holds, for GET /v1/envs).
 * - Async variants for environments served over HTTP: `AsyncEpisode`, `AsyncExpert`,
 *   `AsyncEnvironment`. The SEED pipeline talks to `AsyncEnvironment` only; `toAsyncEnvironment`
 *   in workers/envs/async.ts wraps any sync `Environment`, workers/envs/http/client.ts is the
 *   remote one.
 * - Optional `judgeSkill` on both forms: is a skill well-formed under the environment's
 *   reference-analyzer grammar, truthful for a trajectory, the reference's own skill
 *   (workers/envs/skill_judge.ts)?
 * - Shared errors live in workers/envs/errors.ts: `EnvOptionsError` + `parseEnvOptions` (options),
 *   `TaskSamplingError` + `checkSampleArgs` (split/count/seed), `InvalidTaskError`.
 */

/**
 * The one interface every environment implements (workers/envs/README.md; Extending, "A new
 * environment"), built-in or served over HTTP.
 *
 * An environment draws tasks deterministically by split and seed; an episode is created from a
 * task, `reset()` gives the first observation and `step(actionText)` advances it. The SEED
 * pipeline only ever talks to these types.
 */
import type { z } from "zod";
import type { SkillJudgement, SkillPatterns } from "./skill_judge.ts";

export type { SkillJudgement, SkillPattern, SkillPatterns } from "./skill_judge.ts";

/** Task splits: `test_seen` = new episodes of training layouts, `test_unseen` = held-out ones. */
export type Split = "train" | "test_seen" | "test_unseen";

/** All splits, in a stable order. */
export const SPLITS: readonly Split[] = ["train", "test_seen", "test_unseen"];

/** One task: everything needed to recreate the same initial state anywhere. */
export interface Task {
  /** Environment id, e.g. `sokoban`. */
  envId: string;
  /** Stable id, unique within the environment, e.g. `sokoban/train/17`. */
  id: string;
  split: Split;
  /** Generator seed of this task (a uint32). */
  seed: number;
  /**
   * Task family for per-family metrics (e.g. `pick_and_place`); the env id when there is one
   * family.
   */
  family: string;
  /** The instruction shown after `Your task is to: ` (one line, no trailing period needed). */
  instruction: string;
  /** The environment options this task was generated with (validated by the env's schema). */
  options: Record<string, unknown>;
}

/**
 * What the agent sees after reset and after each step.
 *
 * With an image (vision variants: `sokoban` with `render: "image"`, `ezpoints`), `text` is still
 * a truthful textual description of the whole observation (what the analyzer and the experts
 * read); the policy prompt shows `<image>` (`IMAGE_PLACEHOLDER`) in place of the part the image
 * carries (see prompt.ts).
 */
export interface Observation {
  /** Text observation (for Sokoban the grid); for image observations their full description. */
  text: string;
  /** Actions admissible now, where the environment has a finite list; undefined otherwise. */
  admissibleActions?: string[];
  /**
   * Optional image for vision variants: RGB, row-major, `height * width * 3` bytes (uint8),
   * pixel (x, y) at byte `3 * (y * width + x)`. One per observation; `encodePng` writes it as PNG.
   */
  image?: { width: number; height: number; rgb: Uint8Array };
}

/** The result of one `step`. */
export interface StepResult {
  observation: Observation;
  /**
   * Reward of this step (env units: Sokoban −0.1 per step, +1 per box, +10 on solve; household 10
   * on success).
   */
  reward: number;
  /** True when the episode is over (won, lost, or no further progress possible). */
  done: boolean;
  /** True when the task was accomplished. */
  won: boolean;
  /**
   * False when the action could not be parsed or was not admissible; the state is then unchanged.
   */
  valid: boolean;
  /** Env-specific extras (e.g. WebShop's reward breakdown); JSON-serialisable. */
  info: Record<string, unknown>;
  /**
   * Optional: one short sentence saying what the action did (Sokoban: `pushed the box up`,
   * `walked left into a wall and changed nothing`), for environments whose observations do not
   * say it themselves (a grid shows the new state, not the move). The analyzer prompt shows it as
   * the step's `Effect:` line (workers/skills/prompt.ts); `buildTurnPrompt` never shows it to the
   * policy (an environment's own `buildPrompt` gets it back in `history` and may).
   */
  feedback?: string;
}

/** A live episode of one task. Not thread-safe; one per rollout copy. */
export interface Episode {
  readonly task: Task;
  /** Returns the initial observation. Calling it again restarts the same task from scratch. */
  reset(): Observation;
  /**
   * Applies an action given as plain text (already extracted from the response, see `parseAction`).
   */
  step(actionText: string): StepResult;
}

/** One turn of a finished or running trajectory, as the prompt builder and analyzer see it. */
export interface TrajectoryStep {
  /** The observation text before acting (for an image observation, its textual description). */
  observation: string;
  /** The raw policy response (may hold `<think>…</think><action>…</action>`). */
  response: string;
  /** The action text extracted from the response ("" when none could be parsed). */
  action: string;
  valid: boolean;
  reward: number;
  /** The environment's {@link StepResult.feedback} for this step, when it gave one. */
  feedback?: string;
}

/** A whole episode, for the analyzer (workers/seed/README.md, Algorithm, step 3). */
export interface Trajectory {
  task: Task;
  steps: TrajectoryStep[];
  won: boolean;
  /** Sum of step rewards, or the env's final score where it has one (WebShop). */
  score: number;
}

/**
 * The JSON the analyzer (policy or reference) returns (workers/seed/README.md, Algorithm, step 3).
 */
export interface SkillAnalysis {
  episode_summary: string;
  episode_skill: string;
  /**
   * Optional critical-step skills: 0-based turn index (a decimal string, the JSON key of the
   * reference code's `step_skills`, agent_rl `seed/analysis.py`) → one short imperative sentence
   * for the policy at that turn. The teacher scores such a turn under its step skill instead of
   * the episode skill (`seed.max_step_skills`, workers/seed/README.md, Algorithm, step 4).
   */
  step_skills?: Record<string, string>;
}

/** Scripted expert: acts from full knowledge of the task (used for warm-up demonstrations). */
export interface Expert {
  /** The next action text for the current observation. */
  act(observation: Observation): string;
}

/** Inputs of the per-environment prompt template. */
export interface PromptInput {
  task: Task;
  /**
   * Earlier steps of this episode, oldest first; the template shows only the last `historyLength`.
   */
  history: TrajectoryStep[];
  observation: Observation;
  /** Steps of history to show (JobSpec `env.history`). */
  historyLength: number;
  /** Turn number, 1-based. */
  turn: number;
}

/**
 * One environment: its task generator, episodes, prompt, expert, reference analyzer, vocabulary.
 */
export interface Environment {
  readonly id: string;
  /** One paragraph for `GET /v1/envs`. */
  readonly description: string;
  /** zod schema of `env.options` with defaults (e.g. Sokoban `{size, boxes}`). */
  readonly optionsSchema: z.ZodType<Record<string, unknown>>;
  /** Default and maximum turns per episode. */
  readonly defaultMaxTurns: number;
  /** Task families (for per-family eval metrics). */
  readonly families: readonly string[];
  /**
   * Draws `count` tasks of `split` deterministically from `seed` (same inputs → same tasks).
   * Throws `EnvOptionsError` when `options` do not match `optionsSchema`.
   */
  sampleTasks(split: Split, count: number, seed: number, options?: Record<string, unknown>): Task[];
  /** Creates an episode of `task` (call `reset()` before the first step). */
  createEpisode(task: Task): Episode;
  /**
   * The prompt for one turn in the field's style (system line, `Your task is to: …`, history,
   * observation, admissible actions, answer format).
   */
  buildPrompt(input: PromptInput): string;
  /** Extracts the action from a response, leniently; `null` when nothing parseable is present. */
  parseAction(response: string): string | null;
  /** A scripted expert for `task` that solves ≥ 99% of tasks within the default turn limit. */
  createExpert(task: Task): Expert;
  /**
   * A truthful skill for a finished trajectory (workflow on success, the actual mistake on
   * failure).
   */
  referenceAnalysis(trajectory: Trajectory): SkillAnalysis;
  /** Every word that prompts, observations, actions and reference skills can contain. */
  vocabulary(): string[];
  /**
   * Optional: judges a skill written for a finished `trajectory` against the reference analyzer
   * (workers/envs/skill_judge.ts): `wellFormed` when the analyzer's grammar accepts it (one of
   * its skill templates with legal slot values), `truthful` when every fact it states holds for
   * the trajectory (household: any mistake the replay shows, lists as sets; elsewhere the same as
   * `matchesReference`), `matchesReference` when it equals (normalised)
   * `referenceAnalysis(trajectory).episode_skill`. Environments without it report no skill
   * quality metrics.
   */
  judgeSkill?(trajectory: Trajectory, skill: string): SkillJudgement;
  /**
   * Optional: the reference analyzer's skill sentences as literal text, split by outcome (regular
   * patterns, see {@link SkillPatterns}); the analyzer decodes a won trajectory's `episode_skill`
   * under `won` and a lost one's under `lost`, so every skill is well-formed by construction and of
   * the kind its outcome calls for.
   */
  readonly skillPatterns?: SkillPatterns;
  /** Optional: one sentence per split saying what it holds (held-out layouts, objects, …). */
  readonly splitDescriptions?: Partial<Record<Split, string>>;
  /**
   * Optional: a demonstration of `task` that needs its skill. `skill` is a reference skill that
   * states what the observation hides (household: where the goal object type usually is) and
   * `expert` acts on that knowledge (household: searches those places first).
   * The warm-up's skill-conditioned demonstrations (JobSpec `warmup.policy.skill_share`) use it
   * instead of the ordinary expert with its own solve's skill, whose actions can be read off the
   * observation alone (a policy taught on those learns to ignore the skill).
   */
  skilledDemonstration?(task: Task): SkilledDemonstration;
}

/** What {@link Environment.skilledDemonstration} returns. */
export interface SkilledDemonstration {
  /** The skill shown in every prompt of the demonstration (`insertSkill`'s position). */
  skill: string;
  /** The expert whose actions are the demonstration's targets. */
  expert: Expert;
}

/** {@link Episode} with Promise-returning methods (remote or wrapped local). */
export interface AsyncEpisode {
  readonly task: Task;
  /** The initial observation; calling it again restarts the same task from scratch. */
  reset(): Promise<Observation>;
  /** Applies an action given as plain text; call `reset()` first. */
  step(actionText: string): Promise<StepResult>;
  /** Frees what the episode holds (a remote episode is deleted); idempotent. */
  close(): Promise<void>;
}

/** {@link Expert} with a Promise-returning `act`. */
export interface AsyncExpert {
  act(observation: Observation): Promise<string>;
  /** Frees what the expert holds (a remote expert is deleted); idempotent. */
  close(): Promise<void>;
}

/**
 * {@link Environment} with Promise-returning methods, so built-in and HTTP environments look
 * the same to the pipeline. Options are validated where the environment lives (for a remote
 * one: by its server, answering 400), so instead of a zod schema it carries the JSON schema.
 */
export interface AsyncEnvironment {
  readonly id: string;
  readonly description: string;
  /** JSON schema (draft 2020-12, input side: defaulted fields are optional) of the options. */
  readonly optionsJsonSchema: Record<string, unknown>;
  readonly defaultMaxTurns: number;
  readonly families: readonly string[];
  /**
   * Same contract as {@link Environment.sampleTasks}; rejects with `EnvOptionsError` on bad
   * options.
   */
  sampleTasks(
    split: Split,
    count: number,
    seed: number,
    options?: Record<string, unknown>,
  ): Promise<Task[]>;
  /** An episode of `task`; nothing happens until `reset()`. */
  createEpisode(task: Task): AsyncEpisode;
  buildPrompt(input: PromptInput): Promise<string>;
  parseAction(response: string): Promise<string | null>;
  createExpert(task: Task): AsyncExpert;
  referenceAnalysis(trajectory: Trajectory): Promise<SkillAnalysis>;
  vocabulary(): Promise<string[]>;
  /**
   * Optional, as {@link Environment.judgeSkill}; absent when the environment cannot judge skills.
   */
  judgeSkill?(trajectory: Trajectory, skill: string): Promise<SkillJudgement>;
  /** As {@link Environment.skillPatterns}; absent for environments served over HTTP. */
  readonly skillPatterns?: SkillPatterns;
  /**
   * As {@link Environment.skilledDemonstration}; absent when the environment has none (served over
   * HTTP: when its server does not advertise `skilled_demonstration`).
   */
  skilledDemonstration?(task: Task): Promise<{ skill: string; expert: AsyncExpert }>;
}

/**
 * Errors shared by every environment, and the one helper that validates `env.options`.
 */
import type { z } from "zod";

/** Thrown when `env.options` do not match an environment's schema (maps to HTTP 400). */
export class EnvOptionsError extends Error {
  /** Environment id. */
  readonly envId: string;
  /** zod issues: `path` (field path) and `message` each. */
  readonly issues: { path: (string | number)[]; message: string }[];

  /** @param envId environment id; @param issues the zod issues; @param cause the ZodError. */
  constructor(
    envId: string,
    issues: { path: (string | number)[]; message: string }[],
    cause?: unknown,
  ) {
    const first = issues[0];
    const where = first && first.path.length > 0 ? first.path.join(".") : "(root)";
    super(
      `Cannot use options for environment ${envId} as ${where} must be valid: ` +
        `current value is invalid (${first?.message ?? "unknown issue"})`,
      { cause },
    );
    this.name = "EnvOptionsError";
    this.envId = envId;
    this.issues = issues;
  }
}

/** Thrown by the registry for an id it does not know. */
export class UnknownEnvironmentError extends Error {
  readonly envId: string;
  readonly known: readonly string[];

  /** @param envId the id asked for; @param known the registered ids. */
  constructor(envId: string, known: readonly string[]) {
    super(
      `Cannot find environment as the id must be one of ${known.join(", ")}: ` +
        `current value is ${JSON.stringify(envId)}`,
    );
    this.name = "UnknownEnvironmentError";
    this.envId = envId;
    this.known = known;
  }
}

/** Thrown when a task given to an environment is not one of its tasks (wrong env, bad options). */
export class InvalidTaskError extends Error {
  /** @param message "Cannot X as Y must be Z: current value is V". */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "InvalidTaskError";
  }
}

/**
 * Validates `options` (undefined → `{}`) against `schema`, filling defaults.
 * @throws EnvOptionsError with zod's field paths when they do not match.
 */
export function parseEnvOptions<T extends Record<string, unknown>>(
  envId: string,
  schema: z.ZodType<T>,
  options: Record<string, unknown> | undefined,
): T {
  const result = schema.safeParse(options ?? {});
  if (!result.success) {
    const issues = result.error.issues.map((i) => ({
      path: i.path.map((p) => (typeof p === "symbol" ? String(p) : p)),
      message: i.message,
    }));
    throw new EnvOptionsError(envId, issues, result.error);
  }
  return result.data;
}

/**
 * Thrown when `sampleTasks` gets an unknown split, a negative or fractional count, or a bad seed.
 */
export class TaskSamplingError extends Error {
  /** @param message "Cannot sample tasks as X must be Y: current value is V". */
  constructor(message: string) {
    super(message);
    this.name = "TaskSamplingError";
  }
}

/**
 * Checks the arguments of `sampleTasks`: split one of train/test_seen/test_unseen, count an
 * integer in 0..100 000, seed an integer in 0..2^32−1.
 * @throws TaskSamplingError naming the first bad argument.
 */
export function checkSampleArgs(split: string, count: number, seed: number): void {
  if (split !== "train" && split !== "test_seen" && split !== "test_unseen") {
    throw new TaskSamplingError(
      `Cannot sample tasks as split must be train, test_seen or test_unseen: current value is ${split}`,
    );
  }
  if (!Number.isInteger(count) || count < 0 || count > 100_000) {
    throw new TaskSamplingError(
      `Cannot sample tasks as count must be an integer in 0..100000: current value is ${count}`,
    );
  }
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new TaskSamplingError(
      `Cannot sample tasks as seed must be an integer in 0..4294967295: current value is ${seed}`,
    );
  }
}

/**
 * Thrown when an environment cannot read an observation text it is handed (an expert's or the
 * reference analyzer's input, e.g. over HTTP): the input is wrong, so the env server answers 400.
 */
export class ObservationParseError extends Error {
  /** @param message "Cannot parse observation as X must be Y: current value is V". */
  constructor(message: string) {
    super(message);
    this.name = "ObservationParseError";
  }
}

/** Thrown when `step` is called before `reset`. */
export class EpisodeNotStartedError extends Error {
  /** @param taskId the task of the episode. */
  constructor(taskId: string) {
    super(
      `Cannot step episode of ${taskId} as reset() must be called first: current value is none`,
    );
    this.name = "EpisodeNotStartedError";
  }
}

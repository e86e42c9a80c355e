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

/**
 * Object key layout (workers/seed/README.md, "Checkpoints and skill libraries" and "Trajectories
 * and evaluations"). Every key of a job lives under its tenant and job, so a tenant's objects never
 * share a prefix with another's:
 *
 * ```
 * tenants/{tenant}/jobs/{job}/checkpoints/step-{N}/attempt-{A}/{file}   config.json, …
 * tenants/{tenant}/jobs/{job}/skills/step-{N}/attempt-{A}.json
 * tenants/{tenant}/jobs/{job}/eval/step-{N}/attempt-{A}.json
 * tenants/{tenant}/jobs/{job}/trajectories/step-{N}/attempt-{A}.json
 * tenants/{tenant}/jobs/{job}/trajectories/step-{N}/attempt-{A}/images/{name}.png
 * ```
 *
 * Checkpoints, skill libraries and trajectory dumps are written under the writing run's attempt
 * `A`: a worker whose
 * lease was reaped may still be uploading while the next attempt commits the same step, and with
 * one shared key its late upload overwrote the committed object (which then failed its recorded
 * SHA-256 for ever). Readers take keys from the committed rows, never from this layout.
 * Without `attempt`, the functions give the layout of older rows (`…/step-{N}/{file}`,
 * `…/skills/step-{N}.json`).
 */

/** The writing attempt of an object (see the module doc). */
export interface AttemptOption {
  /** 0-based run number of the job (its fence's `attempt`). */
  attempt?: number;
}

function attemptOf(attempt: number): string {
  if (!Number.isInteger(attempt) || attempt < 0) {
    throw new RangeError(
      `Cannot build an object key as attempt must be a non-negative integer: current value is ${attempt}`,
    );
  }
  return `attempt-${attempt}`;
}

/** A file name inside a checkpoint: no slashes, not `.`/`..`, printable, at most 200 chars. */
export const FILE_NAME_PATTERN = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,200}$/;

/**
 * A file name inside a checkpoint: a {@link FILE_NAME_PATTERN} name, optionally in one folder
 * named the same way (`merged/config.json`: a LoRA checkpoint's merged weights). No leading `/`,
 * no empty, `.` or `..` segment, at most one `/`.
 */
export const CHECKPOINT_FILE_PATTERN =
  /^(?:(?!\.{1,2}\/)[A-Za-z0-9._-]{1,64}\/)?(?!\.{1,2}$)[A-Za-z0-9._-]{1,200}$/;

/** Thrown when a key component is not a safe name. */
export class InvalidKeyError extends Error {
  constructor(what: string, value: string, pattern: RegExp = FILE_NAME_PATTERN) {
    super(
      `Cannot build an object key as ${what} must match ${pattern}: current value is "${value}"`,
    );
    this.name = "InvalidKeyError";
  }
}

function safe(what: string, value: string, pattern: RegExp = FILE_NAME_PATTERN): string {
  if (!pattern.test(value)) throw new InvalidKeyError(what, value, pattern);
  return value;
}

function stepOf(step: number): string {
  if (!Number.isInteger(step) || step < 0) {
    throw new RangeError(
      `Cannot build an object key as step must be a non-negative integer: current value is ${step}`,
    );
  }
  return `step-${step}`;
}

/** `tenants/{tenant}/jobs/{job}/` */
export function jobPrefix(tenantId: string, jobId: string): string {
  return `tenants/${safe("the tenant id", tenantId)}/jobs/${safe("the job id", jobId)}/`;
}

/** `…/checkpoints/step-{N}/attempt-{A}/` (`…/checkpoints/step-{N}/` without an attempt). */
export function checkpointPrefix(
  tenantId: string,
  jobId: string,
  step: number,
  options: AttemptOption = {},
): string {
  const attempt = options.attempt === undefined ? "" : `${attemptOf(options.attempt)}/`;
  return `${jobPrefix(tenantId, jobId)}checkpoints/${stepOf(step)}/${attempt}`;
}

/**
 * `…/checkpoints/step-{N}/attempt-{A}/{name}`; `name` may hold one folder
 * ({@link CHECKPOINT_FILE_PATTERN}). @throws InvalidKeyError for an unsafe name.
 */
export function checkpointKey(
  tenantId: string,
  jobId: string,
  step: number,
  name: string,
  options: AttemptOption = {},
): string {
  const file = safe("the file name", name, CHECKPOINT_FILE_PATTERN);
  return `${checkpointPrefix(tenantId, jobId, step, options)}${file}`;
}

/** `…/skills/step-{N}/attempt-{A}.json` (`…/skills/step-{N}.json` without an attempt). */
export function skillsKey(
  tenantId: string,
  jobId: string,
  step: number,
  options: AttemptOption = {},
): string {
  const base = `${jobPrefix(tenantId, jobId)}skills/${stepOf(step)}`;
  return options.attempt === undefined
    ? `${base}.json`
    : `${base}/${attemptOf(options.attempt)}.json`;
}

/** `…/eval/step-{N}/attempt-{A}.json`: a step's evaluation (results and eval trajectories). */
export function evalKey(
  tenantId: string,
  jobId: string,
  step: number,
  options: Required<AttemptOption>,
): string {
  return `${jobPrefix(tenantId, jobId)}eval/${stepOf(step)}/${attemptOf(options.attempt)}.json`;
}

/** `…/trajectories/step-{N}/attempt-{A}.json`: a step's training rollouts. */
export function trajectoriesKey(
  tenantId: string,
  jobId: string,
  step: number,
  options: Required<AttemptOption>,
): string {
  const base = `${jobPrefix(tenantId, jobId)}trajectories/${stepOf(step)}`;
  return `${base}/${attemptOf(options.attempt)}.json`;
}

/**
 * `…/trajectories/step-{N}/attempt-{A}/images/{name}`: one observation image (PNG) of a step's
 * rollout or eval dump. @throws InvalidKeyError for an unsafe name.
 */
export function trajectoryImageKey(
  tenantId: string,
  jobId: string,
  step: number,
  name: string,
  options: Required<AttemptOption>,
): string {
  const base = `${jobPrefix(tenantId, jobId)}trajectories/${stepOf(step)}`;
  return `${base}/${attemptOf(options.attempt)}/images/${safe("the image name", name)}`;
}

/**
 * Error classes of the SEED algorithm modules (workers/seed). Messages follow the house form
 * "Cannot X as Y must be Z: current value is V"; structured fields carry the offending value so
 * the worker can report it without parsing the message.
 */

/** An option or argument of a SEED function is out of its documented range. */
export class SeedOptionError extends Error {
  override name = "SeedOptionError";
  /** Name of the option, e.g. `miniBatchSize`. */
  readonly option: string;
  /** The value that was given. */
  readonly value: unknown;

  constructor(message: string, fields: { option: string; value: unknown; cause?: unknown }) {
    super(message, { cause: fields.cause });
    this.option = fields.option;
    this.value = fields.value;
  }
}

/**
 * The rollout loop could not continue (policy returned the wrong number of responses, env failed).
 */
export class RolloutError extends Error {
  override name = "RolloutError";
  /** 1-based turn at which the loop stopped. */
  readonly turn: number;

  constructor(message: string, fields: { turn: number; cause?: unknown }) {
    super(message, { cause: fields.cause });
    this.turn = fields.turn;
  }
}

/** A skill could not be used (empty after normalisation) or a stored skill library is malformed. */
export class SkillError extends Error {
  override name = "SkillError";

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Throws `SeedOptionError` unless `value` is a finite number within [min, max]. */
export function checkNumber(
  option: string,
  value: number,
  range: { min?: number; max?: number; integer?: boolean },
): void {
  const { min = -Infinity, max = Infinity, integer = false } = range;
  const ok = Number.isFinite(value) && value >= min && value <= max &&
    (!integer || Number.isInteger(value));
  if (!ok) {
    const kind = integer ? "an integer" : "a finite number";
    throw new SeedOptionError(
      `Cannot use option ${option} as it must be ${kind} in [${min}, ${max}]: current value is ${value}`,
      { option, value },
    );
  }
}

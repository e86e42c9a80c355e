/** Errors of the household and webshop environments. */

/** Thrown when `env.options` do not match the environment's options schema. */
export class EnvOptionsError extends Error {
  /** Environment id whose options were rejected. */
  readonly envId: string;
  /** The rejected options as given. */
  readonly options: unknown;

  /**
   * @param envId environment id, e.g. `household`.
   * @param detail the validator's message (zod's, with field paths).
   * @param options the rejected options.
   */
  constructor(envId: string, detail: string, options: unknown) {
    super(
      `Cannot create ${envId} tasks as options must match the ${envId} options schema: ` +
        `current value is ${JSON.stringify(options)} (${detail})`,
    );
    this.name = "EnvOptionsError";
    this.envId = envId;
    this.options = options;
  }
}

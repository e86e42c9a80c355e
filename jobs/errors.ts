/**
 * Typed errors of the job domain. The API maps them to problem+json in one place; the worker
 * maps {@link FenceLostError} to "stop now".
 */

/**
 * The `(job_id, attempt, worker_id)` triple every worker write carries (jobs/README.md, "The queue:
 * lease, heartbeat, fence").
 */
export interface Fence {
  jobId: string;
  /** The job's attempt when the worker claimed it. */
  attempt: number;
  /** The claiming worker's unique id. */
  workerId: string;
}

/**
 * Thrown when a worker's write matched nothing because its fence no longer holds: the lease was
 * reaped (the job was requeued, failed or cancelled) or another worker holds the job now. The
 * worker must stop working on the job at once; nothing it wrote after losing the fence is stored.
 */
export class FenceLostError extends Error {
  /** The fence that no longer matches. */
  readonly fence: Fence;
  /** The write that was refused, e.g. `heartbeat`, `event`, `metrics`. */
  readonly operation: string;
  constructor(fence: Fence, operation: string) {
    super(
      `Cannot ${operation} for job ${fence.jobId} as the worker must hold its lease: attempt ${fence.attempt} of worker ${fence.workerId} no longer does`,
    );
    this.name = "FenceLostError";
    this.fence = fence;
    this.operation = operation;
  }
}

/** Thrown when an Idempotency-Key is reused with a different request body (HTTP 409/422). */
export class IdempotencyConflictError extends Error {
  /** The reused key. */
  readonly key: string;
  /** The job the key already names. */
  readonly jobId: string;
  constructor(key: string, jobId: string) {
    super(
      `Cannot reuse Idempotency-Key "${key}" as it must come with the same request body: it already created job ${jobId} from a different one`,
    );
    this.name = "IdempotencyConflictError";
    this.key = key;
    this.jobId = jobId;
  }
}

/**
 * Thrown by a submit whose `model.base` names a job (`job:<id>[@step]`) or an uploaded model
 * (`model:<id>`) the tenant does not have any more, directly or as a link of its `job:` chain (the
 * base of the job it continues, and so on): deleted, or being deleted, by a delete that took that
 * link's row lock first (jobs/queue.ts `submitJob` with `requireBase`; jobs/delete.ts,
 * jobs/models.ts `deleteModel`). Nothing is stored. HTTP 422 at `model.base` with `code`.
 */
export class BaseGoneError extends Error {
  /** `unknown_job` or `unknown_model`: the error code at `model.base`. */
  readonly code: "unknown_job" | "unknown_model";
  /** The link that is gone: `job:<id>` or `model:<id>`. */
  readonly ref: string;
  /**
   * @param via the id of the chain's job whose `model.base` names the gone link; left out when
   *   the submit's own `model.base` names it.
   */
  constructor(kind: "job" | "model", id: string, via?: string) {
    const ref = `${kind}:${id}`;
    const gone = kind === "job" ? "is deleted or being deleted" : "is deleted";
    super(
      via !== undefined
        ? `Cannot queue the job as each link of model.base's job: chain must be this tenant's: ${ref}, the base of job:${via}, ${gone}`
        : kind === "job"
        ? `Cannot queue the job as model.base must name a job of this tenant: ${ref} ${gone}`
        : `Cannot queue the job as model.base must name a model of this tenant: ${ref} ${gone}`,
    );
    this.name = "BaseGoneError";
    this.code = kind === "job" ? "unknown_job" : "unknown_model";
    this.ref = ref;
  }
}

/**
 * Thrown by a submit whose checkpoints would need more adapter-only LoRA checkpoints loaded in a
 * row (each of a `model.lora` job without `save_merged`, applying to its job's base) than the
 * worker and the inference server load (jobs/spec.ts `MAX_ADAPTER_CHAIN`). Either `model.base`'s
 * chain alone holds more than that many adapter-only jobs (`path` `model.base`: the job could only
 * fail when it starts), or it holds exactly that many and the job is adapter-only too (`path`
 * `model.lora`: it would train, but its own checkpoints could be neither served nor continued
 * from). Nothing is stored. HTTP 422 at `path`, code `adapter_chain_too_long`.
 */
export class BaseChainTooLongError extends Error {
  /** The error code at {@link path}. */
  readonly code = "adapter_chain_too_long";
  /** The submit's `model.base`. */
  readonly base: string;
  /**
   * The spec field whose value is refused: `model.base`, or `model.lora` for the job's own adapter.
   */
  readonly path: "model.base" | "model.lora";
  /**
   * @param max the most adapter-only jobs in a row (MAX_ADAPTER_CHAIN).
   * @param ownAdapter true when the base's chain holds exactly `max` adapter-only jobs and the
   *   job's own adapter-only checkpoints would be one more; false when the chain alone is longer.
   */
  constructor(base: string, max: number, ownAdapter = false) {
    super(
      ownAdapter
        ? `Cannot queue the job as the chain of LoRA adapters loading its checkpoints reads must be at most ${max} jobs long: ${base} and the jobs it continues from are already ${max} adapter-only jobs in a row, and this job's model.lora without save_merged would be adapter ${
          max + 1
        }; set model.lora.save_merged: true (its checkpoints then hold full weights and load alone), or continue from a job whose checkpoints hold full weights (trained without model.lora, or with model.lora.save_merged)`
        : `Cannot queue the job as model.base's chain of LoRA adapters must be at most ${max} jobs long: ${base} and the jobs it continues from are more than ${max} adapter-only jobs in a row; continue from a job whose checkpoints hold full weights (trained without model.lora, or with model.lora.save_merged)`,
    );
    this.name = "BaseChainTooLongError";
    this.base = base;
    this.path = ownAdapter ? "model.lora" : "model.base";
  }
}

/** Thrown when an object read from the store does not hash to the SHA-256 recorded for it. */
export class IntegrityError extends Error {
  /** Object key. */
  readonly key: string;
  /** Recorded (expected) hex SHA-256. */
  readonly expected: string;
  /** Hex SHA-256 of the bytes read. */
  readonly actual: string;
  constructor(key: string, expected: string, actual: string) {
    super(
      `Cannot return object ${key} as its SHA-256 must be ${expected}: the stored bytes hash to ${actual}`,
    );
    this.name = "IntegrityError";
    this.key = key;
    this.expected = expected;
    this.actual = actual;
  }
}

/**
 * A setting read at start (an environment variable) is invalid. Its message is the one line a
 * process prints before it exits: the variable, the rule, and the value it has.
 */
export class ConfigurationError extends Error {
  /** The variable, e.g. `S3_BUCKET`. */
  readonly variable: string;
  constructor(variable: string, rule: string, value: unknown) {
    super(`Cannot start as ${variable} must be ${rule}: current value is ${JSON.stringify(value)}`);
    this.name = "ConfigurationError";
    this.variable = variable;
  }
}

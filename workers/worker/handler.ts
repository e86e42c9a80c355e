/**
 * The handler contract: what a training pipeline (the SEED trainer) implements to run jobs of one
 * method, and the registry the worker loop looks handlers up in.
 *
 * A handler is an async function of a {@link JobContext}. It is registered in one of two ways:
 * - **in a compute process** ({@link ProcessHandler}: a module that exports
 *   `createHandler(options)`): the worker runs it in a child process of its own
 *   (workers/worker/compute.ts), so no synchronous stretch of it (a long onnxruntime call) can
 *   delay the worker's control loop — heartbeats, cancels, and the fenced writes, which the
 *   child asks the control loop to make. A cancel or a lost fence kills the child at once: the
 *   step it was computing is lost, never half-written. This is how the trainer runs.
 * - **in process** (a plain {@link JobHandler} function): it shares the control loop's event
 *   loop, so timers only fire when it yields; keep every synchronous stretch far below the lease.
 *   On a cancel the worker stops waiting for it and refuses its later writes, but cannot stop
 *   its computation before it next checks `ctx.signal`. For tests and handlers that only wait.
 *
 * How a handler ends decides the job's fate:
 * - it resolves (`undefined` or `"succeeded"`) → `succeeded`;
 * - it resolves `"drained"` (after `ctx.draining` became true and it checkpointed) → the job goes
 *   back to the queue without burning an attempt and resumes from that checkpoint;
 * - it throws → `failed` with the error's message (never its stack) as the job's error; but if
 *   `ctx.signal` was aborted by a cancel, the cancel is acknowledged (`cancelled`), and if it was
 *   aborted because the fence was lost, nothing more is written (the job is no longer ours).
 */
import type {
  Checkpoint,
  CheckpointFile,
  Job,
  JobProgress,
  JobSpec,
  Logger,
  SkillLibrary,
  StepRecord,
  TrajectoryDump,
  TrajectoryDumpInput,
} from "../../jobs/mod.ts";
import type { ExecutionProvider } from "../engine/mod.ts";

/** A committed checkpoint as seen by a resuming handler. */
export interface ResumePoint {
  /** The step the checkpoint was taken after. */
  step: number;
  /** Its files (name, key, bytes, sha256). */
  files: CheckpointFile[];
  /** Reads one file, verified against its SHA-256 (IntegrityError on mismatch). */
  read(name: string): Promise<Uint8Array>;
  /**
   * Downloads one file to `path` without holding it whole, verified like `read` (the file is
   * removed on a mismatch). Optional: the worker's context has it (compute.ts hands resume reads
   * to its compute process this way); a context without it is read with `read`.
   */
  readToFile?(name: string, path: string): Promise<void>;
}

/** An uploaded model's files (a checkpoint-like file set without a step) and its upload name. */
export type UploadedModelFiles = Omit<ResumePoint, "step"> & {
  /** The name given at upload (`POST /v1/models?name=`), or null. */
  name?: string | null;
};

/**
 * Thrown when a handler asks for an artifact it may not read (another tenant's, another bucket).
 */
export class ArtifactAccessError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ArtifactAccessError";
  }
}

/**
 * Read-only access to stored artifacts on behalf of the job's tenant (e.g. to load `model.base`).
 * Tenant isolation: another tenant's job reads as missing; keys under another tenant's
 * `tenants/{id}/` prefix and buckets other than the service's are refused.
 */
export interface ArtifactReader {
  /**
   * A committed checkpoint of a job of this tenant: at `step`, or the latest when `step` is
   * undefined; null when the job (of this tenant) or the checkpoint does not exist.
   */
  checkpoint(jobId: string, step?: number): Promise<ResumePoint | null>;
  /**
   * Reads one object of the service bucket; null when it does not exist.
   * @throws ArtifactAccessError when `bucket` is not the service bucket or `key` lies under
   *   another tenant's `tenants/` prefix (or is not a plain key: `..`, leading `/`).
   */
  readObject(bucket: string, key: string): Promise<Uint8Array | null>;
  /**
   * The files of a model this tenant uploaded (`POST /v1/models`), each read verified against
   * its recorded SHA-256; null when the tenant has no such model.
   */
  model?(modelId: string): Promise<UploadedModelFiles | null>;
}

/** What a handler gets for one run of one job. Every write is fenced to this run. */
export interface JobContext {
  readonly jobId: string;
  readonly tenantId: string;
  /** 0-based run number (> 0 after a lost worker: resume from `latestCheckpoint()`). */
  readonly attempt: number;
  readonly workerId: string;
  /** The job's parsed spec (defaults filled in). */
  readonly spec: JobSpec;
  /** The job row as claimed. */
  readonly job: Job;
  /**
   * Aborted when the job is cancelled (reason: `JobCancelledError`) or the fence is lost
   * (reason: `FenceLostError`). Check it between steps: `ctx.signal.throwIfAborted()`.
   */
  readonly signal: AbortSignal;
  /**
   * True once the worker is draining (SIGTERM): finish the current step, save a checkpoint, and
   * return `"drained"`.
   */
  readonly draining: boolean;
  /**
   * The onnxruntime execution provider this worker process chose at start
   * (`WORKER_EXECUTION_PROVIDERS`, workers/engine/providers.ts); absent means `cpu`. Float32 only
   * on `cuda` and `webgpu`.
   */
  readonly executionProvider?: ExecutionProvider;
  /** Appends an event to the job's log (type `[a-z][a-z0-9_.:-]*`, JSON data ≤ 64 KiB). */
  emit(type: string, data?: Record<string, unknown>): Promise<void>;
  /**
   * Records a step's metrics (finite numbers) and sets them as the job's latest metrics. Call it
   * once per step; a second call for the same step in the same run throws RangeError.
   */
  recordMetrics(step: number, values: Record<string, number>): Promise<void>;
  /**
   * Replaces the job's progress; a new `stage` also appends a `stage` event. Without `etaS`, an
   * ETA in seconds is estimated from this run's pace when `step` and `totalSteps` are given.
   */
  setProgress(progress: JobProgress): Promise<void>;
  /** Uploads the files, then commits the checkpoint row (the commit point). */
  saveCheckpoint(step: number, files: { name: string; bytes: Uint8Array }[]): Promise<Checkpoint>;
  /** The latest committed checkpoint (of any earlier run of this job), or null. */
  latestCheckpoint(): Promise<ResumePoint | null>;
  /** This job's committed checkpoint of `step`, or null (e.g. the warm-up checkpoint, step 0). */
  checkpointAt(step: number): Promise<ResumePoint | null>;
  /** Read-only access to this tenant's other artifacts (see {@link ArtifactReader}). */
  readonly artifacts: ArtifactReader;
  /**
   * The decrypted value of this tenant's secret `name` (`PUT /v1/secrets/{name}`), or null when
   * the tenant has none. Never log or emit it. Optional: contexts without a database (benchmarks)
   * omit it.
   * @throws SecretKeyError when it does not decrypt under the worker's secrets key.
   */
  secret?(name: string): Promise<string | null>;
  /**
   * Uploads a policy folder for remote rollout engines (workers/seed/README.md, "Remote rollout
   * engines") under `tenants/<t>/jobs/<j>/rollout-policy/<folder>/attempt-<n>/` and returns its
   * `s3://bucket/…/` URI. `folder` is `v<k>` or `base`. Optional: contexts without a store omit it.
   * @throws RangeError for another folder name.
   */
  publishRolloutPolicy?(
    folder: string,
    files: { name: string; bytes: Uint8Array }[],
  ): Promise<string>;
  /** Uploads the skill library JSON of a step and commits its row. */
  saveSkills(step: number, json: unknown, skillCount?: number): Promise<SkillLibrary>;
  /**
   * Uploads a trajectory dump (JSON + PNG images) and commits its row under the fence (see
   * jobs/trajectories.ts). Optional: contexts that keep no artifacts (benchmarks) omit it, and
   * the trainer then dumps nothing.
   */
  saveTrajectories?(dump: TrajectoryDumpInput): Promise<TrajectoryDump>;
  /**
   * Commits everything a step produced — metrics, checkpoint files, skill library, trajectory
   * dumps and the events announcing them — together, in one transaction under the fence, or
   * nothing of it (jobs/step_commit.ts). Prefer it to the single-artifact writes above for a
   * training step: a worker killed between two of those leaves a step half-committed.
   * @throws FenceLostError (nothing of the step is visible); bad input as the single writes.
   */
  commitStep(step: number, commit: StepCommit): Promise<void>;
  /** Which of a step's artifacts are committed (a resumed run repairs what its last step lacks). */
  stepRecord(step: number): Promise<StepRecord>;
  /** Structured logger bound to `jobId`, `attempt`, `workerId`. */
  readonly log: Logger;
}

/** What a step produced, for {@link JobContext.commitStep} (each part optional). */
export interface StepCommit {
  /** Finite numbers by name; also the job's latest metrics. */
  metrics?: Record<string, number>;
  /** Checkpoint files. */
  checkpoint?: { name: string; bytes: Uint8Array }[];
  /** The skill library JSON; `skillCount` defaults to the length of its `skills` array. */
  skills?: { json: unknown; skillCount?: number };
  /** Trajectory dumps of the step (dropped by contexts that keep none, see saveTrajectories). */
  trajectories?: TrajectoryDumpInput[];
  /** Events announcing the step's artifacts, appended in order. */
  events?: { type: string; data?: Record<string, unknown> }[];
}

/** How a handler ended when it did not throw (see module doc). */
export type HandlerOutcome = "succeeded" | "drained";

/** A job handler (see module doc for the contract). */
export type JobHandler = (ctx: JobContext) => Promise<HandlerOutcome | void>;

/** Thrown when a method is registered twice in one registry. */
export class DuplicateHandlerError extends Error {
  constructor(method: string) {
    super(
      `Cannot register a handler for method "${method}" as it must be registered once: one exists`,
    );
    this.name = "DuplicateHandlerError";
  }
}

/**
 * A handler that runs in a compute process of its own: `module` (a file URL or path) exports
 * `createHandler(options): JobHandler`, called once per job inside the child. `options` must be
 * structured-serialisable (plain data).
 */
export interface ProcessHandler {
  module: string | URL;
  options?: unknown;
}

/** A registered handler: run in a compute process, or in the worker's own event loop. */
export type HandlerEntry =
  | { kind: "process"; module: string; options: unknown }
  | { kind: "in-process"; handler: JobHandler };

/** Handlers by method. The worker takes one (default: {@link defaultRegistry}). */
export class HandlerRegistry {
  #handlers = new Map<string, HandlerEntry>();

  /**
   * Registers the handler of a method: a function runs in the worker's process, a
   * {@link ProcessHandler} in a compute process of its own (see module doc).
   * @throws DuplicateHandlerError when one exists.
   */
  register(method: string, handler: JobHandler | ProcessHandler): void {
    if (this.#handlers.has(method)) throw new DuplicateHandlerError(method);
    this.#handlers.set(
      method,
      typeof handler === "function"
        ? { kind: "in-process", handler }
        : { kind: "process", module: String(handler.module), options: handler.options },
    );
  }

  /** The handler of a method, or undefined. */
  get(method: string): HandlerEntry | undefined {
    return this.#handlers.get(method);
  }

  /** Registered methods, sorted. */
  methods(): string[] {
    return [...this.#handlers.keys()].sort();
  }
}

/** The process-wide registry used by `deno task worker`. No method is registered in it yet. */
export const defaultRegistry: HandlerRegistry = new HandlerRegistry();

/** Registers a handler in {@link defaultRegistry}. @throws DuplicateHandlerError. */
export function registerHandler(method: string, handler: JobHandler | ProcessHandler): void {
  defaultRegistry.register(method, handler);
}

/** Thrown (as `ctx.signal.reason`) when the job was cancelled. */
export class JobCancelledError extends Error {
  readonly jobId: string;
  constructor(jobId: string) {
    super(`Cannot continue job ${jobId} as it must not be cancelled: a cancel was requested`);
    this.name = "JobCancelledError";
    this.jobId = jobId;
  }
}

/**
 * The worker loop and the handler contract the training pipeline implements (README.md, "Data
 * flow of one job", steps 2–5, and "The queue: lease, heartbeat, fence"): `worker.ts` claims one
 * job at a time, heartbeats every lease/3 while its handler runs, runs the reaper, drains on
 * SIGTERM; `handler.ts` is the `JobHandler` / `JobContext` contract (every write fenced) and the
 * registry of handlers by method; `retry.ts` retries transient Postgres/S3 failures; `config.ts`
 * the `WORKER_*` variables and `LOG_LEVEL` (it logs through jobs/logger.ts, as the API does). It
 * knows nothing of SEED: `workers/seed/run/handler.ts` registers the training handlers.
 */
export {
  ArtifactAccessError,
  type ArtifactReader,
  defaultRegistry,
  DuplicateHandlerError,
  type HandlerEntry,
  type HandlerOutcome,
  HandlerRegistry,
  JobCancelledError,
  type JobContext,
  type JobHandler,
  type ProcessHandler,
  registerHandler,
  type ResumePoint,
  type StepCommit,
} from "./handler.ts";
export {
  isTransient,
  type ReachOptions,
  type RetryOptions,
  untilReachable,
  withRetry,
} from "./retry.ts";
export {
  DEFAULT_LEASE_MS,
  DEFAULT_POLL_MS,
  makeWorkerId,
  readableError,
  type RunResult,
  Worker,
  type WorkerOptions,
} from "./worker.ts";
export { type WorkerConfig, workerConfigErrorMessage, workerConfigFromEnv } from "./config.ts";

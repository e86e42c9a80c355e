/**
 * The worker loop and the handler contract the training pipeline implements.
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
export { createLogger, errorFields, type Logger, type LogLevel, type LogSink } from "./logger.ts";
export { isTransient, type RetryOptions, withRetry } from "./retry.ts";
export {
  DEFAULT_LEASE_MS,
  DEFAULT_POLL_MS,
  makeWorkerId,
  readableError,
  type RunResult,
  Worker,
  type WorkerOptions,
} from "./worker.ts";
export { type WorkerConfig, workerConfigFromEnv } from "./config.ts";

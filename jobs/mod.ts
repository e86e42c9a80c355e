/**
 * The job domain shared by `api/` and `workers/` (DESIGN.md §2): the JobSpec, the database schema
 * and connection, the queue, events and metrics, and the artifact store.
 */
export * from "./spec.ts";
export * from "./schema.ts";
export * from "./errors.ts";
export {
  type Database,
  dataDirFromEnv,
  EmbeddedDatabaseBusyError,
  MIGRATIONS_DIR,
  openDatabase,
  type OpenOptions,
  type Orm,
  type Queryable,
} from "./db.ts";
export {
  acknowledgeCancel,
  cancelJob,
  claimJob,
  type ClaimOptions,
  failJob,
  fenceOf,
  getJob,
  heartbeat,
  JOBS_CHANNEL,
  reapExpiredLeases,
  releaseJob,
  specSha256,
  submitJob,
  type SubmitOptions,
  succeedJob,
} from "./queue.ts";
export {
  appendEvent,
  EVENT_TYPE_PATTERN,
  InvalidEventError,
  listEvents,
  MAX_EVENT_DATA_CHARS,
} from "./events.ts";
export { InvalidMetricsError, listMetrics, recordMetrics, setProgress } from "./metrics.ts";
export {
  DEFAULT_REAP_INTERVAL_MS,
  type Reaper,
  type ReaperOptions,
  startReaper,
} from "./reaper.ts";
export { createWakeup, type WakeReason, type Wakeup } from "./wakeup.ts";

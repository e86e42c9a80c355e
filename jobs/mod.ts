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
  CANCEL_CHANNEL,
  cancelJob,
  claimJob,
  type ClaimOptions,
  databaseNow,
  failJob,
  fenceOf,
  getJob,
  heartbeat,
  JOB_EVENTS_CHANNEL,
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
  MAX_EVENT_KEY_CHARS,
} from "./events.ts";
export { InvalidMetricsError, listMetrics, recordMetrics, setProgress } from "./metrics.ts";
export {
  DEFAULT_REAP_INTERVAL_MS,
  type Reaper,
  type ReaperOptions,
  startReaper,
} from "./reaper.ts";
export { createWakeup, type WakeReason, type Wakeup } from "./wakeup.ts";
export { ensureLocalS3, LOCAL_S3_CREDENTIALS, type LocalS3, startLocalS3 } from "./local_s3.ts";
export {
  ArtifactStore,
  DEFAULT_MULTIPART_BYTES,
  localStoreDir,
  MAX_PRESIGN_EXPIRES_S,
  openStore,
  sha256Hex,
  type StoredObject,
  type StoreOptions,
} from "./store.ts";
export * from "./keys.ts";
export {
  ENV_CATALOG,
  type EnvCatalog,
  type EnvCatalogEntry,
  type EnvCheckEntry,
  type EnvIssue,
  type EnvRef,
  envSpecIssues,
  isHttpEnvRef,
  modelEnvIssues,
} from "./env_catalog.ts";
export {
  type CheckpointFileInput,
  getCheckpoint,
  getSkillLibrary,
  latestCheckpoint,
  listCheckpoints,
  listSkillLibraries,
  readCheckpointFile,
  readSkillLibrary,
  saveCheckpoint,
  saveSkillLibrary,
  type Writer,
} from "./artifacts.ts";
export {
  getTrajectoryDumps,
  listTrajectoryDumps,
  listTrajectoryDumpSummaries,
  readTrajectoryDump,
  readTrajectoryImage,
  saveTrajectoryDump,
  TrajectoryDumpError,
  type TrajectoryDumpInput,
  type TrajectoryDumpSummary,
  type TrajectoryImageInput,
} from "./trajectories.ts";
export {
  commitStep,
  type StepCommitInput,
  type StepEvent,
  type StepRecord,
  stepRecord,
} from "./step_commit.ts";
export { isTransient } from "./transient.ts";

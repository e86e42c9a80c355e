/**
 * The job domain shared by `api/` and `workers/` (README.md, Architecture): everything both sides
 * of the queue agree on, and nothing of HTTP or of training.
 *
 * - `spec.ts`: the JobSpec (zod), the single source of its fields, bounds and defaults;
 *   `presets.ts` named specs; `env_catalog.ts` + `env_catalog.json` the environments the API
 *   accepts (generated from `workers/envs`).
 * - `schema.ts` (drizzle; `migrations/` is generated from it), `db.ts` (`openDatabase`: Postgres
 *   or the embedded PGlite of `embedded/`), `postgres.ts` (the `Database` surface).
 * - `queue.ts` (submit, claim, heartbeat, succeed/fail/release/cancel: one named SQL statement
 *   each, every worker write guarded on the fence), `reaper.ts`, `wakeup.ts` (LISTEN/NOTIFY);
 *   `events.ts`, `metrics.ts`: the per-job event log, progress and per-step metrics.
 * - `store.ts` (the S3 artifact store, SHA-256 on every object), `keys.ts` (object key layout),
 *   `artifacts.ts` and `trajectories.ts` (checkpoint, skill-library and trajectory-dump rows:
 *   upload first, the row commits).
 * - `embedded/`: the embedded database and object store (see `jobs/embedded/mod.ts`).
 * - `logger.ts`: the one structured logger of every process (API, worker, inference server):
 *   JSON lines on stderr with `time`, `level`, `msg`, then the bound fields (`service`, …).
 *
 * The queue's guarantees are in jobs/README.md, "The queue: lease, heartbeat, fence".
 */
export * from "./spec.ts";
export * from "./schema.ts";
export * from "./labels.ts";
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
  type CancelOutcome,
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
  requestCancel,
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
export {
  DEFAULT_SWEEP_GRACE_MS,
  DEFAULT_SWEEP_INTERVAL_MS,
  startSweeper,
  type Sweeper,
  sweeperMetricsText,
  type SweepOptions,
  sweepOrphans,
  type SweepResult,
  type SweepTotals,
} from "./sweeper.ts";
export { createWakeup, type WakeReason, type Wakeup } from "./wakeup.ts";
export { ensureLocalS3, LOCAL_S3_CREDENTIALS, type LocalS3, startLocalS3 } from "./embedded/mod.ts";
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
  type DeleteRefusal,
  finishStaleDeletions,
  markJobDeleting,
  purgeDeletedJob,
} from "./delete.ts";
export {
  commitModel,
  deleteModel,
  getModel,
  listModels,
  modelByIdempotencyKey,
  type ModelInput,
  modelPrefix,
} from "./models.ts";
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
  rolloutEngineIssues,
  skillSourceIssues,
} from "./env_catalog.ts";
export {
  type CheckpointFileInput,
  getCheckpoint,
  getSkillLibrary,
  latestCheckpoint,
  listCheckpoints,
  listSkillLibraries,
  listTenantCheckpoints,
  readCheckpointFile,
  readSkillLibrary,
  saveCheckpoint,
  saveSkillLibrary,
  type TenantCheckpoint,
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
export * from "./api_keys.ts";
export {
  commitStep,
  type StepCommitInput,
  type StepEvent,
  type StepRecord,
  stepRecord,
} from "./step_commit.ts";
export { isTransient } from "./transient.ts";
export { SSE_HEADERS } from "./sse_headers.ts";
export {
  onStopSignals,
  SAME_PRESS_MS,
  type StopSignalHandlers,
  type StopSignalOptions,
} from "./stop_signals.ts";
export { EXIT_WITH_PARENT_VAR, exitWithParentFromEnv } from "./exit_with_parent.ts";
export { readSettings, settingsErrorMessage, wholeNumberSetting } from "./settings.ts";
export {
  createLogger,
  errorFields,
  LOG_LEVELS,
  type Logger,
  type LogLevel,
  logLevelFromEnv,
  LogLevelSetting,
  type LogSink,
} from "./logger.ts";
export {
  deleteSecret,
  getSecretInfo,
  listSecrets,
  MAX_SECRET_VALUE_BYTES,
  putSecret,
  readSecretValue,
  SECRET_NAME_PATTERN,
  SecretCipher,
  secretCipherFromEnv,
  type SecretInfo,
  SecretKeyError,
} from "./secrets.ts";
export {
  ANNOTATOR_HOSTS_VARIABLE,
  checkAnnotatorUrl,
  hostListFromEnv,
  isInternalHost,
  OutboundUrlError,
} from "./outbound_url.ts";

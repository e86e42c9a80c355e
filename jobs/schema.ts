/**
 * The database schema (drizzle, Postgres dialect). drizzle-kit generates `migrations/` from this
 * file (`deno task db:generate`); `jobs/db.ts` applies them at start-up.
 *
 * Invariants live in CHECK constraints (River style), never in enum ordering: whatever writes a
 * row — the API, a worker, the reaper, a person with psql — the database refuses a state that
 * breaks them.
 */
import { sql } from "drizzle-orm";
import {
  bigint,
  bigserial,
  check,
  index,
  integer,
  json,
  jsonb,
  pgEnum,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uuid,
} from "drizzle-orm/pg-core";

/**
 * Job states, and who moves a job out of each:
 * - `queued`: waiting; a worker's claim moves it to `running`, a cancel to `cancelled`.
 * - `running`: a worker holds the lease; the worker moves it to `succeeded`/`failed` (or back to
 *   `queued` when it drains), a cancel to `cancelling`, the reaper (lease expired) to `queued`
 *   with attempt + 1 or to `failed` when attempts are used up.
 * - `cancelling`: cancel requested; the worker acknowledges on its heartbeat → `cancelled`; a run
 *   that ends first ends `cancelled` too (a failure's message kept in `error`), never `succeeded`
 *   or `failed`; the reaper cancels it when the lease expires.
 * - `succeeded`, `failed`, `cancelled`: terminal; nothing moves a job out of them.
 */
export const JOB_STATUSES = [
  "queued",
  "running",
  "cancelling",
  "succeeded",
  "failed",
  "cancelled",
] as const;
/** A job state (see {@link JOB_STATUSES} for who moves a job out of each). */
export type JobStatus = (typeof JOB_STATUSES)[number];
/** States no transition leaves. */
export const TERMINAL_STATUSES: readonly JobStatus[] = ["succeeded", "failed", "cancelled"];

/** The Postgres enum `job_status`. */
export const jobStatus = pgEnum("job_status", JOB_STATUSES);

const createdAt = () => timestamp("created_at", { withTimezone: true }).notNull().defaultNow();

/** Tenants: every job, key and object belongs to exactly one. */
export const tenants = pgTable("tenants", {
  id: uuid("id").primaryKey().defaultRandom(),
  name: text("name").notNull().unique(),
  createdAt: createdAt(),
}, (t) => [check("tenants_name_length", sql`length(${t.name}) between 1 and 200`)]);

/**
 * API keys, stored only as the hex SHA-256 of the secret; `prefix` (the first characters of the
 * key) identifies it to people in listings and logs.
 */
export const apiKeys = pgTable("api_keys", {
  id: uuid("id").primaryKey().defaultRandom(),
  tenantId: uuid("tenant_id").notNull().references(() => tenants.id, { onDelete: "cascade" }),
  name: text("name"),
  prefix: text("prefix").notNull(),
  hash: text("hash").notNull().unique(),
  createdAt: createdAt(),
  revokedAt: timestamp("revoked_at", { withTimezone: true }),
}, (t) => [
  check("api_keys_hash_is_sha256_hex", sql`${t.hash} ~ '^[0-9a-f]{64}$'`),
  check("api_keys_prefix_length", sql`length(${t.prefix}) between 4 and 32`),
  index("api_keys_tenant_idx").on(t.tenantId),
]);

/** Progress of a running job, as shown by `GET /v1/jobs/{id}`. */
export interface JobProgress {
  /** Pipeline stage, e.g. `warmup`, `rollout`, `update`, `eval`, `checkpoint`. */
  stage: string;
  /** Completed updates. */
  step?: number;
  totalSteps?: number;
  /** Estimated seconds left. */
  etaS?: number;
  /** Any further stage-specific fields (JSON). */
  [key: string]: unknown;
}

/** Jobs: the queue itself (jobs/README.md, "The queue: lease, heartbeat, fence"). */
export const jobs = pgTable("jobs", {
  id: uuid("id").primaryKey().defaultRandom(),
  tenantId: uuid("tenant_id").notNull().references(() => tenants.id, { onDelete: "cascade" }),
  status: jobStatus("status").notNull().default("queued"),
  method: text("method").notNull(),
  /** The parsed JobSpec (defaults filled in). */
  spec: jsonb("spec").notNull(),
  /**
   * The JobSpec fields as the client posted them to `POST /v1/jobs` (after JSON parsing and
   * validation, before defaults are filled in; jobs/spec.ts `submittedFields`), so a copy of the
   * job can fill its dependent defaults afresh. Null for jobs queued by the service itself (bench,
   * tests) and for jobs submitted before it existed. `json`, not `jsonb`: json keeps the text as
   * written, so the keys come back in the posted order (jsonb sorts them shorter first), and
   * nothing queries inside it.
   */
  submittedSpec: json("submitted_spec").$type<Record<string, unknown>>(),
  /** Larger is claimed sooner; ties by `queued_at`. */
  priority: integer("priority").notNull().default(0),
  device: text("device").notNull().default("cpu"),
  /** 0-based run number; the reaper adds 1 when a lease expires. Part of the fence. */
  attempt: integer("attempt").notNull().default(0),
  maxAttempts: integer("max_attempts").notNull().default(3),
  /** Holder of the lease (unique per worker process). Part of the fence. */
  workerId: text("worker_id"),
  leaseExpiresAt: timestamp("lease_expires_at", { withTimezone: true }),
  heartbeatAt: timestamp("heartbeat_at", { withTimezone: true }),
  progress: jsonb("progress").$type<JobProgress>(),
  latestMetrics: jsonb("latest_metrics").$type<Record<string, number>>(),
  /** Readable failure reason (no stack traces). */
  error: text("error"),
  /** The job's label given at submit (`name`, or OpenAI's `suffix`), 1–128 characters. */
  name: text("name"),
  /** String → string labels given at submit (OpenAI's limits: 16 keys ≤ 64, values ≤ 512). */
  metadata: jsonb("metadata").$type<Record<string, string>>().notNull().default({}),
  /**
   * `metadata`'s keys in the order they were submitted: jsonb keeps its own order (shorter keys
   * first), and a job is shown with its metadata in the order given (labels.ts
   * `metadataInOrder`). Empty for jobs submitted before it existed (shown in jsonb's order).
   */
  metadataKeys: text("metadata_keys").array().notNull().default(sql`'{}'::text[]`),
  /**
   * Set when `DELETE /v1/jobs/{id}` began removing the job (its objects first, its rows last): a
   * job with it set is gone for every read, and a repeated DELETE or the sweeper finishes it.
   */
  deletingAt: timestamp("deleting_at", { withTimezone: true }),
  createdAt: createdAt(),
  /** When the job was submitted; kept on requeue, so a returning job keeps its place in line. */
  queuedAt: timestamp("queued_at", { withTimezone: true }).notNull().defaultNow(),
  startedAt: timestamp("started_at", { withTimezone: true }),
  finishedAt: timestamp("finished_at", { withTimezone: true }),
}, (t) => [
  check(
    "jobs_terminal_iff_finished",
    sql`(${t.status} in ('succeeded', 'failed', 'cancelled')) = (${t.finishedAt} is not null)`,
  ),
  check(
    "jobs_held_has_lease",
    sql`${t.status} not in ('running', 'cancelling') or (${t.workerId} is not null and ${t.leaseExpiresAt} is not null and ${t.startedAt} is not null)`,
  ),
  check(
    "jobs_unheld_has_no_lease",
    sql`${t.status} in ('running', 'cancelling') or (${t.workerId} is null and ${t.leaseExpiresAt} is null)`,
  ),
  check("jobs_failed_has_error", sql`${t.status} <> 'failed' or ${t.error} is not null`),
  check("jobs_attempt_nonnegative", sql`${t.attempt} >= 0`),
  check("jobs_attempt_within_max", sql`${t.attempt} < ${t.maxAttempts}`),
  check("jobs_max_attempts_range", sql`${t.maxAttempts} between 1 and 100`),
  check("jobs_method_known", sql`${t.method} in ('seed', 'grpo', 'gigpo', 'sft')`),
  check("jobs_device_known", sql`${t.device} in ('cpu', 'gpu')`),
  check("jobs_error_length", sql`${t.error} is null or length(${t.error}) <= 4000`),
  check("jobs_name_length", sql`${t.name} is null or length(${t.name}) between 1 and 128`),
  check("jobs_metadata_object", sql`jsonb_typeof(${t.metadata}) = 'object'`),
  check(
    "jobs_submitted_spec_object",
    sql`${t.submittedSpec} is null or json_typeof(${t.submittedSpec}) = 'object'`,
  ),
  check(
    "jobs_deleting_is_final",
    sql`${t.deletingAt} is null or ${t.status} in ('succeeded', 'failed', 'cancelled')`,
  ),
  // The claim's order, restricted to the rows it can take.
  index("jobs_claim_idx").on(t.device, t.priority.desc(), t.queuedAt, t.id)
    .where(sql`${t.status} = 'queued'`),
  // The reaper's scan.
  index("jobs_lease_idx").on(t.leaseExpiresAt).where(
    sql`${t.status} in ('running', 'cancelling')`,
  ),
  // Listing a tenant's jobs, newest first, with cursor pagination.
  index("jobs_tenant_created_idx").on(t.tenantId, t.createdAt.desc(), t.id.desc()),
  // `GET /v1/jobs?name=` (exact) and `?name_prefix=` (the C collation's order serves `like 'p%'`).
  index("jobs_tenant_name_idx").on(t.tenantId, sql`${t.name} collate "C"`),
  // `GET /v1/jobs?metadata[key]=value` (containment, `metadata @> {"key": "value"}`).
  index("jobs_metadata_idx").using("gin", t.metadata.op("jsonb_path_ops")),
]);

/** Job events: an ordered log per job; `id` is monotonic and serves as SSE `Last-Event-ID`. */
export const jobEvents = pgTable("job_events", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  jobId: uuid("job_id").notNull().references(() => jobs.id, { onDelete: "cascade" }),
  attempt: integer("attempt").notNull(),
  type: text("type").notNull(),
  data: jsonb("data").notNull().default({}),
  /**
   * Idempotency key chosen by the writer (unique per job; null when none): an append retried
   * after a lost connection finds the event its first try stored instead of storing it twice.
   */
  key: text("key"),
  createdAt: createdAt(),
}, (t) => [
  check("job_events_type_format", sql`${t.type} ~ '^[a-z][a-z0-9_.:-]{0,63}$'`),
  check("job_events_key_length", sql`${t.key} is null or length(${t.key}) between 1 and 128`),
  index("job_events_job_idx").on(t.jobId, t.id),
  unique("job_events_job_key").on(t.jobId, t.key),
]);

/** Per-step metrics; UNIQUE(job_id, step) so a step's metrics exist exactly once. */
export const jobMetrics = pgTable("job_metrics", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  jobId: uuid("job_id").notNull().references(() => jobs.id, { onDelete: "cascade" }),
  step: integer("step").notNull(),
  /** The attempt that wrote the current values (a resumed run overwrites a lost run's). */
  attempt: integer("attempt").notNull(),
  values: jsonb("values").$type<Record<string, number>>().notNull(),
  createdAt: createdAt(),
}, (t) => [
  unique("job_metrics_job_step_key").on(t.jobId, t.step),
  check("job_metrics_step_nonnegative", sql`${t.step} >= 0`),
]);

/** One object of a checkpoint, as recorded in its row. */
export interface CheckpointFile {
  /** File name within the checkpoint, e.g. `model.safetensors`. */
  name: string;
  /** Full object key. */
  key: string;
  bytes: number;
  /** Lowercase hex SHA-256 of the object's bytes. */
  sha256: string;
}

/** Checkpoints; the row is the commit point (objects are uploaded first). */
export const checkpoints = pgTable("checkpoints", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  jobId: uuid("job_id").notNull().references(() => jobs.id, { onDelete: "cascade" }),
  step: integer("step").notNull(),
  attempt: integer("attempt").notNull(),
  /** Key prefix ending in `/`, e.g. `tenants/T/jobs/J/checkpoints/step-10/`. */
  prefix: text("prefix").notNull(),
  files: jsonb("files").$type<CheckpointFile[]>().notNull(),
  bytes: bigint("bytes", { mode: "number" }).notNull(),
  createdAt: createdAt(),
}, (t) => [
  unique("checkpoints_job_step_key").on(t.jobId, t.step),
  check("checkpoints_step_nonnegative", sql`${t.step} >= 0`),
  check("checkpoints_bytes_nonnegative", sql`${t.bytes} >= 0`),
]);

/** Skill libraries written with checkpoints (one JSON object each). */
export const skillLibraries = pgTable("skill_libraries", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  jobId: uuid("job_id").notNull().references(() => jobs.id, { onDelete: "cascade" }),
  step: integer("step").notNull(),
  attempt: integer("attempt").notNull(),
  key: text("key").notNull(),
  bytes: bigint("bytes", { mode: "number" }).notNull(),
  sha256: text("sha256").notNull(),
  skillCount: integer("skill_count").notNull(),
  createdAt: createdAt(),
}, (t) => [
  unique("skill_libraries_job_step_key").on(t.jobId, t.step),
  check("skill_libraries_sha256_hex", sql`${t.sha256} ~ '^[0-9a-f]{64}$'`),
  check("skill_libraries_count_nonnegative", sql`${t.skillCount} >= 0`),
]);

/** One PNG of a trajectory dump (an observation image), as recorded in its row. */
export interface TrajectoryImage {
  /** Name within the step, e.g. `rollout-0-2.png` (see `FILE_NAME_PATTERN` in keys.ts). */
  name: string;
  /** Full object key. */
  key: string;
  bytes: number;
  /** Lowercase hex SHA-256 of the PNG's bytes. */
  sha256: string;
  /** Pixels. */
  width: number;
  height: number;
}

/**
 * What a trajectory dump holds: `rollout` the training rollouts of an update, `eval` the
 * evaluation of a step (per-split results and the eval trajectories).
 */
export const TRAJECTORY_DUMP_KINDS = ["rollout", "eval"] as const;
/** A kind of trajectory dump (see {@link TRAJECTORY_DUMP_KINDS}). */
export type TrajectoryDumpKind = (typeof TRAJECTORY_DUMP_KINDS)[number];

/**
 * Trajectory dumps (one JSON object each, plus its images); the row is the commit point, as for
 * checkpoints: the objects are uploaded first, then the row is inserted under the fence.
 */
export const trajectoryDumps = pgTable("trajectory_dumps", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  jobId: uuid("job_id").notNull().references(() => jobs.id, { onDelete: "cascade" }),
  step: integer("step").notNull(),
  kind: text("kind").$type<TrajectoryDumpKind>().notNull(),
  attempt: integer("attempt").notNull(),
  /** Key of the JSON object. */
  key: text("key").notNull(),
  bytes: bigint("bytes", { mode: "number" }).notNull(),
  sha256: text("sha256").notNull(),
  /** Trajectories in the object (after the size bound). */
  trajectoryCount: integer("trajectory_count").notNull(),
  images: jsonb("images").$type<TrajectoryImage[]>().notNull().default([]),
  createdAt: createdAt(),
}, (t) => [
  unique("trajectory_dumps_job_step_kind_key").on(t.jobId, t.step, t.kind),
  check("trajectory_dumps_step_nonnegative", sql`${t.step} >= 0`),
  check("trajectory_dumps_kind_known", sql`${t.kind} in ('rollout', 'eval')`),
  check("trajectory_dumps_sha256_hex", sql`${t.sha256} ~ '^[0-9a-f]{64}$'`),
  check("trajectory_dumps_count_nonnegative", sql`${t.trajectoryCount} >= 0`),
]);

/**
 * Idempotency keys of `POST /v1/jobs`: the same key with the same request body returns the same
 * job; with a different body it is a conflict.
 */
export const idempotencyKeys = pgTable("idempotency_keys", {
  tenantId: uuid("tenant_id").notNull().references(() => tenants.id, { onDelete: "cascade" }),
  key: text("key").notNull(),
  /** Hex SHA-256 of the canonical request body. */
  requestSha256: text("request_sha256").notNull(),
  jobId: uuid("job_id").notNull().references(() => jobs.id, { onDelete: "cascade" }),
  createdAt: createdAt(),
}, (t) => [
  primaryKey({ name: "idempotency_keys_pkey", columns: [t.tenantId, t.key] }),
  check("idempotency_keys_key_length", sql`length(${t.key}) between 1 and 255`),
  check("idempotency_keys_sha256_hex", sql`${t.requestSha256} ~ '^[0-9a-f]{64}$'`),
]);

/**
 * Uploaded models (`POST /v1/models`): a Hugging Face folder validated at upload, its files in
 * the store under `tenants/{tenant}/models/{id}/`. The row is the commit point: objects are
 * uploaded first, the row is inserted once every file checked out (objects without a row are
 * garbage and never visible). A JobSpec names one as `model.base: "model:<id>"`.
 */
export const models = pgTable("models", {
  id: uuid("id").primaryKey().defaultRandom(),
  tenantId: uuid("tenant_id").notNull().references(() => tenants.id, { onDelete: "cascade" }),
  /** Optional label given at upload (`?name=`). */
  name: text("name"),
  /** `config.json` `architectures[0]`, e.g. `Qwen3ForCausalLM`. */
  architecture: text("architecture").notNull(),
  /** The uploaded `config.json` as parsed JSON. */
  config: jsonb("config").notNull(),
  /** Scalar parameters of the decoder (and vision tower) the config describes. */
  parameterCount: bigint("parameter_count", { mode: "number" }).notNull(),
  files: jsonb("files").$type<CheckpointFile[]>().notNull(),
  /** Total bytes of `files`. */
  bytes: bigint("bytes", { mode: "number" }).notNull(),
  /** `Idempotency-Key` of the upload, when given: the same key returns this model again. */
  idempotencyKey: text("idempotency_key"),
  /** Hex SHA-256 of the uploaded archive (the same key with other bytes is a conflict). */
  requestSha256: text("request_sha256").notNull(),
  createdAt: createdAt(),
}, (t) => [
  unique("models_tenant_idempotency_key").on(t.tenantId, t.idempotencyKey),
  index("models_tenant_created_idx").on(t.tenantId, t.createdAt),
  check("models_bytes_nonnegative", sql`${t.bytes} >= 0`),
  check("models_parameter_count_positive", sql`${t.parameterCount} > 0`),
  check("models_request_sha256_hex", sql`${t.requestSha256} ~ '^[0-9a-f]{64}$'`),
  check("models_name_length", sql`${t.name} is null or length(${t.name}) between 1 and 200`),
]);

/**
 * Tenant secrets (`PUT /v1/secrets/{name}`), e.g. the API key of an LLM annotator a JobSpec names
 * as `warmup.analyzer.annotator.credential_secret`. Only ciphertext is stored: AES-256-GCM under
 * the service's secrets key (jobs/secrets.ts), with the tenant and name as associated data, so a
 * row copied to another tenant or name does not decrypt. No endpoint returns a value.
 */
export const tenantSecrets = pgTable("tenant_secrets", {
  tenantId: uuid("tenant_id").notNull().references(() => tenants.id, { onDelete: "cascade" }),
  name: text("name").notNull(),
  /** Base64 of the 12-byte AES-GCM nonce. */
  nonce: text("nonce").notNull(),
  /** Base64 of the AES-GCM ciphertext with its 16-byte tag. */
  ciphertext: text("ciphertext").notNull(),
  createdAt: createdAt(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
}, (t) => [
  primaryKey({ name: "tenant_secrets_pkey", columns: [t.tenantId, t.name] }),
  check("tenant_secrets_name_format", sql`${t.name} ~ '^[a-z][a-z0-9_-]{0,63}$'`),
]);

/** Row types inferred from the tables. */
export type Tenant = typeof tenants.$inferSelect;
/** An API key row (no secret; only its hash). */
export type ApiKey = typeof apiKeys.$inferSelect;
/** A job row. */
export type Job = typeof jobs.$inferSelect;
/** A job event row. */
export type JobEvent = typeof jobEvents.$inferSelect;
/** A per-step metrics row. */
export type JobMetricsRow = typeof jobMetrics.$inferSelect;
/** A checkpoint row. */
export type Checkpoint = typeof checkpoints.$inferSelect;
/** A skill library row. */
export type SkillLibrary = typeof skillLibraries.$inferSelect;
/** A trajectory dump row. */
export type TrajectoryDump = typeof trajectoryDumps.$inferSelect;
/** An idempotency key row. */
export type IdempotencyKey = typeof idempotencyKeys.$inferSelect;
/** An uploaded model's row. */
export type Model = typeof models.$inferSelect;
/** A tenant secret row (ciphertext only). */
export type TenantSecret = typeof tenantSecrets.$inferSelect;

/**
 * Internal: maps raw rows of the queue's SQL (snake_case, driver-specific scalar types) to the
 * drizzle row types of `schema.ts`. postgres.js (whose date parsers drizzle replaces) returns
 * timestamps as strings and int8 as strings; PGlite returns Dates and numbers: both are accepted.
 */
import type {
  Checkpoint,
  CheckpointFile,
  Job,
  JobEvent,
  JobMetricsRow,
  JobProgress,
  JobStatus,
  SkillLibrary,
} from "./schema.ts";
import { MAX_ADAPTER_CHAIN } from "./spec.ts";

type Row = Record<string, unknown>;

/** A timestamp column as a Date (null stays null). */
export function toDate(v: unknown): Date | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v;
  // Postgres text form "2026-11-30 11:16:16.501433+00" → ISO.
  const s = String(v).replace(" ", "T").replace(/([+-]\d\d)$/, "$1:00");
  return new Date(s);
}

/** A jsonb column (already parsed by both drivers; strings only when stored as JSON strings). */
function json<T>(v: unknown): T {
  return v as T;
}

/** Maps a `jobs` row. */
export function toJob(r: Row): Job {
  return {
    id: String(r.id),
    tenantId: String(r.tenant_id),
    status: r.status as JobStatus,
    method: String(r.method),
    spec: json<unknown>(r.spec),
    submittedSpec: json<Record<string, unknown> | null>(r.submitted_spec ?? null),
    priority: Number(r.priority),
    device: String(r.device),
    attempt: Number(r.attempt),
    maxAttempts: Number(r.max_attempts),
    workerId: (r.worker_id as string | null) ?? null,
    leaseExpiresAt: toDate(r.lease_expires_at),
    heartbeatAt: toDate(r.heartbeat_at),
    progress: json<JobProgress | null>(r.progress ?? null),
    latestMetrics: json<Record<string, number> | null>(r.latest_metrics ?? null),
    error: (r.error as string | null) ?? null,
    name: r.name == null ? null : String(r.name),
    metadata: json<Record<string, string> | null>(r.metadata ?? null) ?? {},
    metadataKeys: Array.isArray(r.metadata_keys) ? r.metadata_keys.map(String) : [],
    deletingAt: toDate(r.deleting_at),
    createdAt: toDate(r.created_at)!,
    queuedAt: toDate(r.queued_at)!,
    startedAt: toDate(r.started_at),
    finishedAt: toDate(r.finished_at),
  };
}

/** Maps a `job_events` row. */
export function toEvent(r: Row): JobEvent {
  return {
    id: Number(r.id),
    jobId: String(r.job_id),
    attempt: Number(r.attempt),
    type: String(r.type),
    data: json<unknown>(r.data),
    key: r.key == null ? null : String(r.key),
    createdAt: toDate(r.created_at)!,
  };
}

/** Maps a `job_metrics` row. */
export function toMetrics(r: Row): JobMetricsRow {
  return {
    id: Number(r.id),
    jobId: String(r.job_id),
    step: Number(r.step),
    attempt: Number(r.attempt),
    values: json<Record<string, number>>(r.values),
    createdAt: toDate(r.created_at)!,
  };
}

/** Maps a `checkpoints` row. */
export function toCheckpoint(r: Row): Checkpoint {
  return {
    id: Number(r.id),
    jobId: String(r.job_id),
    step: Number(r.step),
    attempt: Number(r.attempt),
    prefix: String(r.prefix),
    files: json<CheckpointFile[]>(r.files),
    bytes: Number(r.bytes),
    createdAt: toDate(r.created_at)!,
  };
}

/** Maps a `skill_libraries` row. */
export function toSkillLibrary(r: Row): SkillLibrary {
  return {
    id: Number(r.id),
    jobId: String(r.job_id),
    step: Number(r.step),
    attempt: Number(r.attempt),
    key: String(r.key),
    bytes: Number(r.bytes),
    sha256: String(r.sha256),
    skillCount: Number(r.skill_count),
    createdAt: toDate(r.created_at)!,
  };
}

/**
 * SQL predicate: job row `j` writes adapter-only checkpoints (a `model.lora` job without
 * `save_merged`), so loading one of them reads `j`'s own `model.base` too (the adapter applies to
 * it: workers/seed/run/model_source.ts). Every other job's checkpoints hold full weights (a full
 * fine-tune's `model.safetensors`, a LoRA job's `merged/` folder) and load alone.
 */
export function adapterOnly(j: string): string {
  return `(jsonb_typeof(${j}.spec->'model'->'lora') = 'object'
    and coalesce((${j}.spec->'model'->'lora'->>'save_merged')::boolean, false) = false)`;
}

/**
 * The recursive CTE `chain(user_id, base, depth)` seeded by `seed` (a select of those three
 * columns at depth 0): the links a job uses, as the worker loads its model. Each seed row, then,
 * while `base` is `job:<uuid>[@step]` naming a tenant's job whose checkpoints are adapter-only
 * ({@link adapterOnly}), that job's `model.base`, at most {@link MAX_ADAPTER_CHAIN} links after the
 * seed (depth 0 to 8: the worker loads at most 8 adapters in a row, then a model with full
 * weights). A job with full-weight checkpoints ends the chain: loading it reads nothing it was
 * trained from. `user_id` is the job whose chain it is: that job uses every base on it. Marked
 * jobs (`deleting_at`) are followed; a link naming a job the tenant does not have ends the chain
 * at that `job:` base.
 */
function baseChain(seed: string, tenantParam: string): string {
  return `chain(user_id, base, depth) as (
      ${seed}
      union all
      select c.user_id, j.spec->'model'->>'base', c.depth + 1
      from chain c join jobs j on j.tenant_id = ${tenantParam}::uuid
        and c.base like 'job:%' and j.id::text = substring(c.base from 5 for 36)
      where c.depth < ${MAX_ADAPTER_CHAIN} and ${adapterOnly("j")})`;
}

/**
 * {@link baseChain} of each of the tenant's queued/running/cancelling jobs: the bases they use.
 * `tenantParam` is the query's placeholder of the tenant id (e.g. `$1`). Used by model and job
 * deletes to find active users through `job:` chains.
 */
export function activeBaseChain(tenantParam: string): string {
  return baseChain(
    `select id, spec->'model'->>'base', 0 from jobs
      where tenant_id = ${tenantParam}::uuid and status in ('queued', 'running', 'cancelling')`,
    tenantParam,
  );
}

/**
 * {@link baseChain} of a job not inserted yet (`user_id` null) whose `model.base` is the query's
 * `baseParam`: the bases a submit will use, the same links {@link activeBaseChain} follows once
 * the job is queued. Used by the submit to lock them (jobs/queue.ts `submitJob`).
 */
export function newJobBaseChain(baseParam: string, tenantParam: string): string {
  return baseChain(`select null::uuid, ${baseParam}::text, 0`, tenantParam);
}

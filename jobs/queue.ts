/**
 * The queue (jobs/README.md, "The queue: lease, heartbeat, fence"), River style: one named,
 * commented SQL statement per operation, bind parameters only, and every transition guarded on the
 * current state — and, for a worker's writes, on its fence `(job_id, attempt, worker_id)` — so that
 * late or duplicate writes change nothing. Each transition writes a `status` event in the same
 * statement.
 *
 * Attempts: `attempt` is the 0-based run number. A claim keeps it; the reaper adds 1 when a lease
 * expires (or fails the job when `attempt + 1 = max_attempts`); a drained worker releases the job
 * without burning one. The fence stays unique because worker ids are unique per process.
 */
import { createHash } from "node:crypto";
import type { Database, Queryable } from "./db.ts";
import {
  BaseChainTooLongError,
  BaseGoneError,
  type Fence,
  FenceLostError,
  IdempotencyConflictError,
} from "./errors.ts";
import {
  type Device,
  JOB_REF_PATTERN,
  type JobSpec,
  MAX_ADAPTER_CHAIN,
  MODEL_REF_PATTERN,
} from "./spec.ts";
import type { Job } from "./schema.ts";
import type { JobLabels } from "./labels.ts";
import { adapterOnly, newJobBaseChain, toJob } from "./_rows.ts";
import { storableText } from "./_storable.ts";

/** NOTIFY channel on which submit announces new work; the payload is the job's device. */
export const JOBS_CHANNEL = "seed_jobs";

/** The SQL predicate of a fence, over `$1` job id, `$2` attempt, `$3` worker id. */
const FENCE = `id = $1::uuid and attempt = $2::int and worker_id = $3::text
  and status in ('running', 'cancelling')`;

/**
 * NOTIFY channel on which a cancel request reaches the worker holding the job at once (it need
 * not wait for its next heartbeat); the payload is the job id.
 */
export const CANCEL_CHANNEL = "seed_cancel";

/** NOTIFY channel announcing new job events; the payload is the job id. */
export const JOB_EVENTS_CHANNEL = "job_events";

/**
 * Appends a `status` event for every row of CTE `moved` (used by every transition) and announces
 * it on {@link JOB_EVENTS_CHANNEL}; the statement must select `from moved, evn`.
 */
const STATUS_EVENT = `ev as (
    insert into job_events (job_id, attempt, type, data)
    select id, attempt, 'status',
           jsonb_strip_nulls(jsonb_build_object('status', status, 'worker_id', worker_id,
                                                'error', error))
    from moved
    returning job_id),
  evn as (select count(pg_notify('${JOB_EVENTS_CHANNEL}', job_id::text)) as n from ev)`;

const SQL = {
  /** submit: a new queued job, its first event, and a wake-up for idle workers of its device. */
  submit: `with moved as (
      insert into jobs (tenant_id, method, spec, priority, device, max_attempts, name, metadata,
        metadata_keys, submitted_spec)
      values ($1::uuid, $2::text, $3::jsonb, $4::int, $5::text, $6::int, $7::text, $8::jsonb,
        array(select jsonb_array_elements_text($9::jsonb)), $10::json)
      returning *),
    ${STATUS_EVENT},
    wake as (select pg_notify('${JOBS_CHANNEL}', $5::text))
    select moved.* from moved, evn, wake`,
  /**
   * baseChain: the links a job about to be queued with `model.base` `$1` uses (jobs/_rows.ts
   * `baseChain`): that base, then, while a link names the tenant's job with adapter-only
   * checkpoints, that job's base (at most 8 links after the first), nearest first, each with
   * `adapter`: whether it names such a job (its checkpoints need its base in turn). The same links
   * the deletes' user searches follow from a queued job. Read without locks: a job's spec never
   * changes, so only a link's existence and `deleting_at` can change after this read, and
   * `lockBaseJobs` / `lockBaseModel` read those under the lock.
   */
  baseChain: `with recursive ${newJobBaseChain("$1", "$2")}
    select c.base, exists (select 1 from jobs j where j.tenant_id = $2::uuid
        and c.base like 'job:%' and j.id::text = substring(c.base from 5 for 36)
        and ${adapterOnly("j")}) as adapter
    from chain c order by c.depth`,
  /**
   * lockBaseJobs: the tenant's jobs of a new job's base chain (`$1`, nearest first), locked FOR
   * SHARE in that order until the submit commits. A delete locks its job FOR UPDATE (jobs/delete.ts
   * `markJobDeleting`), so either the delete waits for this submit and then finds the new job
   * among the job's users (409), or this submit waits for the delete's mark and reads
   * `deleting_at` (or no row, once purged).
   */
  lockBaseJobs: `select id, deleting_at from jobs
    where id = any($1::uuid[]) and tenant_id = $2::uuid
    order by array_position($1::uuid[], id)
    for share`,
  /**
   * lockBaseModel: the tenant's uploaded model that a new job's `model.base` names, or that its
   * `job:` chain ends at, locked FOR SHARE until the submit commits. A delete locks it FOR UPDATE
   * (jobs/models.ts `deleteModel`), so either the delete waits for this submit and then finds the
   * new job among the model's users (409), or this submit waits for the delete and finds no row.
   */
  lockBaseModel: `select id from models where id = $1::uuid and tenant_id = $2::uuid for share`,
  /** idempotencyLookup: the job an Idempotency-Key already created, with its request hash. */
  idempotencyLookup: `select k.request_sha256, j.*
    from idempotency_keys k join jobs j on j.id = k.job_id
    where k.tenant_id = $1::uuid and k.key = $2::text`,
  /** idempotencyRecord: claims the key for a job; no row back means another request won. */
  idempotencyRecord: `insert into idempotency_keys (tenant_id, key, request_sha256, job_id)
    values ($1::uuid, $2::text, $3::text, $4::uuid)
    on conflict (tenant_id, key) do nothing
    returning job_id`,
  /**
   * claim: the most urgent queued job of this device (priority desc, then oldest), taken with
   * FOR UPDATE SKIP LOCKED so concurrent claimers pass each other instead of waiting.
   * `desc nulls last` (priority is NOT NULL, so the order is the same) matches `jobs_claim_idx`:
   * with the default `desc` (nulls first) Postgres cannot walk the index in order and sorts
   * every queued job of the device on each claim (6 ms per claim with 3,000 queued).
   * The status event's NOTIFY stays: it is what shows a live SSE follower `running` at once
   * (it costs about a quarter of the claim rate with 8 concurrent claimers: NOTIFY serialises
   * committing transactions on a global lock). The progress of an earlier run is cleared: the
   * new run writes its own, and until then it must not pass for this run's (stage, ETA).
   */
  claim: `with moved as (
      update jobs set status = 'running', worker_id = $1::text,
        lease_expires_at = now() + $3::int * interval '1 millisecond',
        heartbeat_at = now(), started_at = coalesce(started_at, now()), progress = null
      where id = (
        select id from jobs where status = 'queued' and device = $2::text
        order by priority desc nulls last, queued_at, id
        for update skip locked limit 1)
      returning *),
    ${STATUS_EVENT}
    select moved.* from moved, evn`,
  /** heartbeat: extends the lease under the fence; the status tells the worker of a cancel. */
  heartbeat: `update jobs set lease_expires_at = now() + $4::int * interval '1 millisecond',
      heartbeat_at = now()
    where ${FENCE}
    returning status`,
  /**
   * succeed: running → succeeded under the fence; cancelling → cancelled (a cancel requested
   * before the run ended wins, even one its worker had not seen yet: the user was told 202).
   */
  succeed: `with moved as (
      update jobs set
        status = (case when status = 'cancelling' then 'cancelled' else 'succeeded' end)::job_status,
        worker_id = null, lease_expires_at = null, finished_at = now()
      where ${FENCE}
      returning *),
    ${STATUS_EVENT}
    select moved.* from moved, evn`,
  /**
   * fail: running → failed with a readable error, under the fence; cancelling → cancelled with
   * that error kept (a cancel requested before the run failed wins, as in `succeed`: the user was
   * told 202, and a job they cancelled must end `cancelled`, the failure still readable).
   */
  fail: `with moved as (
      update jobs set
        status = (case when status = 'cancelling' then 'cancelled' else 'failed' end)::job_status,
        worker_id = null, lease_expires_at = null,
        finished_at = now(), error = left($4::text, 4000)
      where ${FENCE}
      returning *),
    ${STATUS_EVENT}
    select moved.* from moved, evn`,
  /** acknowledgeCancel: cancelling → cancelled, by the worker that saw it on its heartbeat. */
  acknowledgeCancel: `with moved as (
      update jobs set status = 'cancelled', worker_id = null, lease_expires_at = null,
        finished_at = now()
      where ${FENCE} and status = 'cancelling'
      returning *),
    ${STATUS_EVENT}
    select moved.* from moved, evn`,
  /**
   * release: a draining worker gives the job back without burning an attempt (running → queued,
   * keeping its place in line); a cancel requested meanwhile wins (cancelling → cancelled).
   */
  release: `with moved as (
      update jobs set
        status = (case when status = 'cancelling' then 'cancelled' else 'queued' end)::job_status,
        finished_at = case when status = 'cancelling' then now() end,
        worker_id = null, lease_expires_at = null
      where ${FENCE}
      returning *),
    ${STATUS_EVENT},
    wake as (select pg_notify('${JOBS_CHANNEL}', device) from moved where status = 'queued')
    select moved.* from moved, evn, (select count(*) from wake) w`,
  /**
   * cancel: queued → cancelled at once; running → cancelling, announced on CANCEL_CHANNEL to the
   * worker holding it. Other states are left alone. A job queued again (a run of it started) keeps
   * no run's progress once cancelled there: its progress becomes `{"stage": "queued"}`, where it
   * was, not the last run's stage and bar.
   */
  cancel: `with moved as (
      update jobs set
        status = (case when status = 'queued' then 'cancelled' else 'cancelling' end)::job_status,
        finished_at = case when status = 'queued' then now() end,
        progress = case when status = 'queued' and started_at is not null
                        then '{"stage": "queued"}'::jsonb else progress end
      where id = $1::uuid and tenant_id = $2::uuid and status in ('queued', 'running')
      returning *),
    ${STATUS_EVENT},
    tell as (select count(pg_notify('${CANCEL_CHANNEL}', id::text)) as n
             from moved where status = 'cancelling')
    select moved.* from moved, evn, tell`,
  /** get: one job of a tenant (a job being deleted is gone: jobs/delete.ts). */
  get: `select * from jobs where id = $1::uuid and tenant_id = $2::uuid and deleting_at is null`,
  /**
   * reap: leases that expired before `$1` (default now()), judged on the database's clock.
   * running → queued with attempt + 1, or → failed when that was the last attempt; cancelling →
   * cancelled. At most `$2` per call.
   *
   * Outage grace: nobody can heartbeat while the database is down, so a lease is not reaped until
   * two lease lengths (`lease_expires_at - heartbeat_at`), and at least 10 s, have passed since
   * the database (re)started (`pg_postmaster_start_time()`) and since `$3`, the moment this
   * reaper could reach it again after failing to (null: it never failed). A live worker retries
   * its heartbeat every second meanwhile, so it extends its lease before any reaper may judge it
   * — the floor covers the reconnect storm of a loaded machine (the chaos bench saw heartbeats
   * wait 4 s for a connection after a restart with a 1 s lease).
   */
  reap: `with expired as (
      select id from jobs
      where status in ('running', 'cancelling')
        and lease_expires_at < coalesce($1::timestamptz, now())
        and greatest(pg_postmaster_start_time(), coalesce($3::timestamptz, '-infinity'))
            + greatest(2 * (lease_expires_at - coalesce(heartbeat_at, lease_expires_at)),
                       interval '10 seconds')
            < coalesce($1::timestamptz, now())
      order by lease_expires_at
      for update skip locked limit $2::int),
    moved as (
      update jobs j set
        status = (case when j.status = 'cancelling' then 'cancelled'
                       when j.attempt + 1 >= j.max_attempts then 'failed'
                       else 'queued' end)::job_status,
        attempt = case when j.status = 'running' and j.attempt + 1 < j.max_attempts
                       then j.attempt + 1 else j.attempt end,
        finished_at = case when j.status = 'cancelling' or j.attempt + 1 >= j.max_attempts
                           then now() end,
        error = case when j.status = 'running' and j.attempt + 1 >= j.max_attempts
                     then 'Cannot finish the job as its worker stopped heartbeating on each of its '
                          || j.max_attempts || ' attempts (lease expired)'
                     else j.error end,
        worker_id = null, lease_expires_at = null
      from expired where j.id = expired.id
      returning j.*),
    ${STATUS_EVENT},
    wake as (select pg_notify('${JOBS_CHANNEL}', device) from moved where status = 'queued')
    select moved.* from moved, evn, (select count(*) from wake) w`,
} as const;

/** What {@link submitJob} needs. */
export interface SubmitOptions {
  tenantId: string;
  /** A parsed spec (defaults filled in). */
  spec: JobSpec;
  /** The job's name and metadata (labels.ts); default none. */
  labels?: JobLabels;
  /**
   * The JobSpec fields as the client posted them, defaults left out (spec.ts `submittedFields`):
   * the API's submit passes them; a job the service queues itself (bench, tests) has none (null).
   */
  submittedSpec?: Record<string, unknown>;
  /** Optional `Idempotency-Key` header value (1–255 characters). */
  idempotencyKey?: string;
  /**
   * Hex SHA-256 identifying the request; defaults to {@link specSha256} of the spec (with labels:
   * of `{spec, name, metadata}`, so the same key with other labels is a conflict).
   */
  requestSha256?: string;
  /**
   * When true (the API's submit), every link of `model.base`'s chain that loading it reads must
   * be the tenant's and not being deleted: a `job:<id>[@step]` base; when that job's checkpoints
   * are adapter-only (a `model.lora` job without `save_merged`), the base the adapter applies to
   * too, and so on, down to a `model:<id>` if the chain reaches one. A job with full-weight
   * checkpoints ends the chain (what it was trained from is not read). Each link is checked under
   * its row's lock in the insert's transaction ({@link lockBaseChain}), so a delete racing this
   * submit never leaves the new job using a deleted job or model; a chain of more than
   * {@link MAX_ADAPTER_CHAIN} adapter-only jobs, which the worker cannot load, is refused, and so
   * is an adapter-only job on a chain of exactly that many (its own checkpoints would need one
   * adapter more than the worker and the inference server load). Default
   * false: the job is queued whatever it names (the worker refuses a base that is not the
   * tenant's).
   */
  requireBase?: boolean;
}

/** Hex SHA-256 of the spec's canonical JSON (object keys sorted), used as the request hash. */
export function specSha256(spec: unknown): string {
  const canonical = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(canonical) : v !== null && typeof v === "object"
      ? Object.fromEntries(
        Object.keys(v as object).sort().map((
          k,
        ) => [k, canonical((v as Record<string, unknown>)[k])]),
      )
      : v;
  return createHash("sha256").update(JSON.stringify(canonical(spec))).digest("hex");
}

/** Sentinel rolling back a submit that lost an idempotency race. */
class LostIdempotencyRace extends Error {}

/**
 * Locks FOR SHARE, in the submit's transaction `q`, every link of the chain of `base` (a job's
 * `model.base`) that loading it reads: the tenant's jobs it continues from through adapter-only
 * checkpoints, nearest first, then the uploaded model the chain ends at if any (SQL.baseChain,
 * SQL.lockBaseJobs, SQL.lockBaseModel). Bases of other kinds (`builtin:`, `hf:`, `s3://`) lock
 * nothing.
 *
 * Lock order and deadlocks: jobs nearest first, then the model. Both deletes a submit races take
 * one row lock each, first, and wait for nothing after it: `markJobDeleting` locks its job FOR
 * UPDATE, then only reads (its users) and updates that same row; `deleteModel` locks its model
 * FOR UPDATE, then only reads and deletes that row (no table references `models`). A delete thus
 * never holds a lock this submit waits for while it waits for one this submit holds, so no cycle
 * can form whatever the order; FOR SHARE locks of concurrent submits do not conflict with one
 * another. The order is fixed anyway (the chain's own, as the deletes' user searches walk it) so
 * a later lock taker sees one order.
 * @throws BaseChainTooLongError when the chain holds more than {@link MAX_ADAPTER_CHAIN}
 *   adapter-only jobs in a row (its last link still names one), or exactly that many and
 *   `adapterOnly` (the new job's checkpoints are adapter-only too: loading one would merge one
 *   adapter more than `MAX_ADAPTER_CHAIN`, as workers/seed/run/model_source.ts `resolveModel`
 *   counts the checkpoint's own adapter first, for the worker and the inference server alike).
 * @throws BaseGoneError naming the first link, in chain order, that is not the tenant's or is
 *   marked for deletion.
 */
async function lockBaseChain(
  q: Queryable,
  tenantId: string,
  { base, adapterOnly }: { base: string; adapterOnly: boolean },
): Promise<void> {
  const links = MODEL_REF_PATTERN.test(base)
    ? [{ base, adapter: false }]
    : await q.query<{ base: string; adapter: boolean }>(SQL.baseChain, [base, tenantId]);
  // The chain stops after MAX_ADAPTER_CHAIN links past the first: a last link that still needs
  // its base is one adapter more than the worker loads.
  if (links.length > MAX_ADAPTER_CHAIN && links.at(-1)!.adapter) {
    throw new BaseChainTooLongError(base, MAX_ADAPTER_CHAIN);
  }
  // Within the cap, the chain's adapter links are its leading ones (a full-weight job ends it).
  if (adapterOnly && links.filter((l) => l.adapter).length >= MAX_ADAPTER_CHAIN) {
    throw new BaseChainTooLongError(base, MAX_ADAPTER_CHAIN, true);
  }
  // The chain's jobs in order, each with the job whose base names it (undefined: model.base).
  const jobs: { id: string; via?: string }[] = [];
  let model: { id: string; via?: string } | undefined;
  for (const { base: link } of links) {
    const via = jobs.at(-1)?.id;
    const job = JOB_REF_PATTERN.exec(link);
    const uploaded = MODEL_REF_PATTERN.exec(link);
    if (job) jobs.push({ id: job[1], via });
    else if (uploaded) model = { id: uploaded[1], via };
  }
  if (jobs.length > 0) {
    const rows = await q.query<{ id: string; deleting_at: unknown }>(SQL.lockBaseJobs, [
      jobs.map((j) => j.id),
      tenantId,
    ]);
    const live = new Set(rows.filter((r) => r.deleting_at === null).map((r) => String(r.id)));
    const gone = jobs.find((j) => !live.has(j.id));
    if (gone) throw new BaseGoneError("job", gone.id, gone.via);
  }
  if (model) {
    const [row] = await q.query(SQL.lockBaseModel, [model.id, tenantId]);
    if (!row) throw new BaseGoneError("model", model.id, model.via);
  }
}

/**
 * Queues a job and wakes idle workers (NOTIFY). With an idempotency key, the same key and request
 * hash return the job the key created first (`created: false`).
 * @throws IdempotencyConflictError when the key was used with a different request.
 * @throws BaseGoneError with `requireBase` when a job or model of the base's chain is gone or
 *   being deleted; BaseChainTooLongError with `requireBase` when the chain holds more adapter-only
 *   jobs in a row than the worker loads, or as many and the job is adapter-only too.
 */
export async function submitJob(
  db: Database,
  options: SubmitOptions,
): Promise<{ job: Job; created: boolean }> {
  const { tenantId, spec, idempotencyKey } = options;
  const labels = options.labels ?? { name: null, metadata: {} };
  const base = spec.model.base;
  const locksBase = options.requireBase === true &&
    (JOB_REF_PATTERN.test(base) || MODEL_REF_PATTERN.test(base));
  const insert = async (q: Queryable) => {
    if (locksBase) {
      // As jobs/_rows.ts `adapterOnly`: a LoRA job without save_merged writes only its adapter.
      const adapterOnly = spec.model.lora !== undefined && !spec.model.lora.save_merged;
      await lockBaseChain(q, tenantId, { base, adapterOnly });
    }
    return toJob(
      (await q.query(SQL.submit, [
        tenantId,
        spec.method,
        JSON.stringify(spec),
        spec.priority,
        spec.requirements.device,
        spec.max_attempts,
        labels.name,
        JSON.stringify(labels.metadata),
        // The submitted order, which jsonb does not keep (labels.ts `metadataInOrder`).
        JSON.stringify(Object.keys(labels.metadata)),
        options.submittedSpec === undefined ? null : JSON.stringify(options.submittedSpec),
      ]))[0],
    );
  };
  if (idempotencyKey === undefined) {
    // The base chain's locks last until the insert commits: one transaction.
    const job = locksBase ? await db.transaction(insert) : await insert(db);
    return { job, created: true };
  }
  const labelled = labels.name !== null || Object.keys(labels.metadata).length > 0;
  const hash = options.requestSha256 ?? specSha256(labelled ? { spec, ...labels } : spec);
  const existing = async () => {
    const [row] = await db.query(SQL.idempotencyLookup, [tenantId, idempotencyKey]);
    if (!row) return undefined;
    const job = toJob(row);
    if (row.request_sha256 !== hash) throw new IdempotencyConflictError(idempotencyKey, job.id);
    return { job, created: false };
  };
  const before = await existing();
  if (before) return before;
  try {
    return await db.transaction(async (tx) => {
      const job = await insert(tx);
      const won = await tx.query(SQL.idempotencyRecord, [tenantId, idempotencyKey, hash, job.id]);
      if (won.length === 0) throw new LostIdempotencyRace();
      return { job, created: true };
    });
  } catch (e) {
    if (!(e instanceof LostIdempotencyRace)) throw e;
    const after = await existing();
    if (!after) throw new Error(`Cannot resolve Idempotency-Key "${idempotencyKey}"`);
    return after;
  }
}

/** What a worker claims with. */
export interface ClaimOptions {
  /** Unique id of the claiming worker process. */
  workerId: string;
  device: Device;
  /** Lease length in milliseconds (heartbeat every leaseMs / 3). */
  leaseMs: number;
}

/** Claims the most urgent queued job of the device (see SQL.claim); null when none is queued. */
export async function claimJob(db: Queryable, options: ClaimOptions): Promise<Job | null> {
  const rows = await db.query(SQL.claim, [options.workerId, options.device, options.leaseMs]);
  return rows.length ? toJob(rows[0]) : null;
}

/** The fence of a claimed job. */
export function fenceOf(job: Job): Fence {
  if (!job.workerId) throw new Error(`Cannot take the fence of job ${job.id} as it has no worker`);
  return { jobId: job.id, attempt: job.attempt, workerId: job.workerId };
}

function fenceParams(f: Fence): unknown[] {
  return [f.jobId, f.attempt, f.workerId];
}

/**
 * Extends the lease by `leaseMs` from now.
 * @returns `cancelRequested: true` when the job is `cancelling`.
 * @throws FenceLostError when the fence no longer matches.
 */
export async function heartbeat(
  db: Queryable,
  fence: Fence,
  leaseMs: number,
): Promise<{ cancelRequested: boolean }> {
  const rows = await db.query<{ status: string }>(SQL.heartbeat, [...fenceParams(fence), leaseMs]);
  if (rows.length === 0) throw new FenceLostError(fence, "heartbeat");
  return { cancelRequested: rows[0].status === "cancelling" };
}

async function transition(
  db: Queryable,
  fence: Fence,
  name: "succeed" | "fail" | "acknowledgeCancel" | "release",
  extra: unknown[] = [],
): Promise<Job> {
  const rows = await db.query(SQL[name], [...fenceParams(fence), ...extra]);
  if (rows.length === 0) throw new FenceLostError(fence, name);
  return toJob(rows[0]);
}

/**
 * Marks the job succeeded, or cancelled when a cancel was requested meanwhile (`cancelling`): the
 * returned job's status says which. @throws FenceLostError when the fence no longer matches.
 */
export function succeedJob(db: Queryable, fence: Fence): Promise<Job> {
  return transition(db, fence, "succeed");
}

/**
 * Marks the job failed with a readable message (truncated to 4000 characters; pass a message,
 * never a stack), or cancelled with that message as its error when a cancel was requested
 * meanwhile (`cancelling`): the returned job's status says which.
 * @throws FenceLostError when the fence no longer matches.
 */
export function failJob(db: Queryable, fence: Fence, error: string): Promise<Job> {
  return transition(db, fence, "fail", [storableText(error)]);
}

/**
 * cancelling → cancelled. @throws FenceLostError when the fence (or `cancelling`) no longer holds.
 */
export function acknowledgeCancel(db: Queryable, fence: Fence): Promise<Job> {
  return transition(db, fence, "acknowledgeCancel");
}

/**
 * Gives a job back to the queue (drain) without burning an attempt; a pending cancel becomes
 * `cancelled`. @throws FenceLostError when the fence no longer matches.
 */
export function releaseJob(db: Queryable, fence: Fence): Promise<Job> {
  return transition(db, fence, "release");
}

/** What a cancel request did: the job after it, and whether this request moved it. */
export interface CancelOutcome {
  job: Job;
  /** True when this request moved the job (queued → cancelled, running → cancelling). */
  moved: boolean;
}

/**
 * Requests cancellation of a tenant's job: queued → cancelled at once, running → cancelling (the
 * worker acknowledges within a heartbeat). A job in any other state (`cancelling`, or final) is
 * returned unchanged with `moved: false`.
 * @returns the outcome, or null when the tenant has no such job.
 */
export async function requestCancel(
  db: Queryable,
  options: { tenantId: string; jobId: string },
): Promise<CancelOutcome | null> {
  const moved = await db.query(SQL.cancel, [options.jobId, options.tenantId]);
  if (moved.length) return { job: toJob(moved[0]), moved: true };
  const job = await getJob(db, options);
  return job && { job, moved: false };
}

/**
 * {@link requestCancel}, returning only the job after the request (null when the tenant has no
 * such job).
 */
export async function cancelJob(
  db: Queryable,
  options: { tenantId: string; jobId: string },
): Promise<Job | null> {
  return (await requestCancel(db, options))?.job ?? null;
}

/** One job of a tenant, or null (another tenant's job is null too). */
export async function getJob(
  db: Queryable,
  options: { tenantId: string; jobId: string },
): Promise<Job | null> {
  const rows = await db.query(SQL.get, [options.jobId, options.tenantId]);
  return rows.length ? toJob(rows[0]) : null;
}

/**
 * Returns expired leases to the queue (see SQL.reap) and gives back the jobs it moved.
 * @param options.now fake clock for tests: reap leases that expired before this instant.
 * @param options.limit at most this many jobs per call (default 100).
 * @param options.reachableSince when the caller could reach the database again after an outage
 *   (on the database's clock): leases get two more lease lengths, at least 10 s, from then (see
 *   SQL.reap). A `cancelling` job whose worker is gone is finalised (→ `cancelled`) by the same
 *   statement once its lease has expired; it needs a reaper running somewhere (every worker runs
 *   one), so with no worker alive it waits for the next worker to start.
 */
export async function reapExpiredLeases(
  db: Queryable,
  options: { now?: Date; limit?: number; reachableSince?: Date } = {},
): Promise<Job[]> {
  const rows = await db.query(SQL.reap, [
    options.now?.toISOString() ?? null,
    options.limit ?? 100,
    options.reachableSince?.toISOString() ?? null,
  ]);
  return rows.map(toJob);
}

/** The database's clock now (leases are judged on it, never on a worker's clock). */
export async function databaseNow(db: Queryable): Promise<Date> {
  const [row] = await db.query<{ now: Date | string }>("select now() as now");
  return new Date(row.now);
}

/**
 * Read-side queries of the API: list/get jobs (scoped to a tenant: another tenant's job is
 * indistinguishable from no job), event pages, metrics series and the `/metrics` gauges.
 * Checkpoint and skill rows are read with jobs/artifacts.ts; writes (submit, cancel) go through
 * the jobs/ queue functions. Event/metrics reads take a job id already checked with `getJob`.
 */
import { and, asc, eq, gt, gte, inArray, isNull, lt, lte, or, sql } from "drizzle-orm";
import {
  type Database,
  getJob as getTenantJob,
  type Job,
  type JobEvent,
  jobEvents,
  jobMetrics,
  type JobMetricsRow,
  jobs,
  type JobStatus,
  TERMINAL_STATUSES,
} from "../jobs/mod.ts";
import { decodeCursor, encodeCursor, JobCursor } from "./cursor.ts";
import { NotFoundError } from "./errors.ts";
import { uuidOfDigits } from "./schemas.ts";

/**
 * Fetches a tenant's job (jobs/ `getJob`, one raw statement: about half the cost of the drizzle
 * builder on this hot path). Throws {@link NotFoundError} (404) when absent or another tenant's.
 */
export async function getJob(db: Database, tenantId: string, jobId: string): Promise<Job> {
  const job = await getTenantJob(db, { tenantId, jobId });
  if (!job) throw new NotFoundError(`Cannot find job ${jobId}: no such job for this tenant`);
  return job;
}

/** True when the job exists for the tenant and is in a terminal state. */
export async function isJobTerminal(
  db: Database,
  tenantId: string,
  jobId: string,
): Promise<boolean> {
  const [row] = await db.orm.select({ status: jobs.status }).from(jobs).where(
    and(eq(jobs.id, jobId), eq(jobs.tenantId, tenantId)),
  );
  return row === undefined || TERMINAL_STATUSES.includes(row.status);
}

/** Filters and page of {@link listJobs}. */
export interface ListJobsOptions {
  statuses?: JobStatus[];
  /** Jobs named exactly this. */
  name?: string;
  /** Jobs whose name starts with this (case-sensitive). */
  namePrefix?: string;
  /** Jobs whose id starts with these hex digits (8–32, lowercase; hyphens are skipped). */
  idPrefix?: string;
  /** Jobs whose metadata holds every one of these pairs. */
  metadata?: Record<string, string>;
  limit: number;
  cursor?: string;
}

/**
 * One page of a tenant's jobs, newest first (created_at desc, id desc), optionally filtered by
 * status, name (exact or prefix), the start of the id and metadata pairs (all must match). Jobs
 * being deleted are left out. `cursor` is the previous page's `nextCursor`; it is null on the last
 * page.
 */
export async function listJobs(
  db: Database,
  tenantId: string,
  options: ListJobsOptions,
): Promise<{ jobs: Job[]; nextCursor: string | null }> {
  const filters = [eq(jobs.tenantId, tenantId), isNull(jobs.deletingAt)];
  if (options.statuses) filters.push(inArray(jobs.status, options.statuses));
  if (options.name !== undefined) filters.push(eq(jobs.name, options.name));
  if (options.namePrefix !== undefined) {
    // `like` with the prefix's own % _ \ escaped; the C collation matches jobs_tenant_name_idx.
    const pattern = options.namePrefix.replace(/[\\%_]/g, (ch) => `\\${ch}`) + "%";
    filters.push(sql`${jobs.name} collate "C" like ${pattern}`);
  }
  if (options.idPrefix !== undefined) {
    // A uuid range (the primary key's order is the hex digits' order) with bound values: the
    // lowest and highest ids that start with these digits.
    const hex = options.idPrefix.replaceAll("-", "");
    filters.push(gte(jobs.id, uuidOfDigits(hex.padEnd(32, "0"))));
    filters.push(lte(jobs.id, uuidOfDigits(hex.padEnd(32, "f"))));
  }
  if (options.metadata && Object.keys(options.metadata).length > 0) {
    filters.push(sql`${jobs.metadata} @> ${JSON.stringify(options.metadata)}::jsonb`);
  }
  if (options.cursor) {
    const c = decodeCursor(options.cursor, JobCursor);
    // Compare at microsecond precision in SQL (JS Dates keep only milliseconds).
    const t = sql`${c.t}::timestamptz`;
    filters.push(or(lt(jobs.createdAt, t), and(eq(jobs.createdAt, t), lt(jobs.id, c.id)))!);
  }
  const rows = await db.orm.select({
    job: jobs,
    t: sql<string>`to_char(${jobs.createdAt} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`,
  }).from(jobs).where(and(...filters))
    // `nulls last` (both columns are NOT NULL) matches jobs_tenant_created_idx, so a page is an
    // index walk of `limit` rows instead of a sort of every job of the tenant.
    .orderBy(sql`${jobs.createdAt} desc nulls last`, sql`${jobs.id} desc nulls last`)
    .limit(options.limit + 1);
  const page = rows.slice(0, options.limit);
  const last = page[page.length - 1];
  const nextCursor = rows.length > options.limit && last
    ? encodeCursor({ t: last.t, id: last.job.id })
    : null;
  return { jobs: page.map((r) => r.job), nextCursor };
}

/** A job's latest evaluation: the step and its success rate per split. */
export interface EvalResult {
  step: number;
  /** Split (`train`, `test_seen`, `test_unseen`) → success rate in [0, 1]. */
  success_rate: Record<string, number>;
}

/** The metric names of a split's success rate (workers/seed/evaluate.ts `evalMetrics`). */
const EVAL_SUCCESS = /^eval\/(train|test_seen|test_unseen)\/success_rate$/;

/**
 * The latest evaluation of each job in `jobIds` (checked to be the tenant's first): the highest
 * step whose metrics hold an `eval/<split>/success_rate`. Jobs never evaluated are absent.
 */
export async function latestEvalResults(
  db: Database,
  jobIds: string[],
): Promise<Map<string, EvalResult>> {
  if (jobIds.length === 0) return new Map();
  const rows = await db.query<{ job_id: string; step: number; values: Record<string, number> }>(
    `-- latest_eval_results: per job, the metrics row of its highest evaluated step.
     select distinct on (job_id) job_id, step, values from job_metrics
     where job_id = any($1::uuid[])
       and values ?| array['eval/train/success_rate', 'eval/test_seen/success_rate',
                           'eval/test_unseen/success_rate']
     order by job_id, step desc`,
    [jobIds],
  );
  const out = new Map<string, EvalResult>();
  for (const r of rows) {
    const rates: Record<string, number> = {};
    for (const [k, v] of Object.entries(r.values)) {
      const m = EVAL_SUCCESS.exec(k);
      if (m) rates[m[1]] = v;
    }
    out.set(String(r.job_id), { step: Number(r.step), success_rate: rates });
  }
  return out;
}

/**
 * Events of a job with id > `afterId`, ascending, at most `limit` (the job must be checked first).
 */
export async function eventsAfter(
  db: Database,
  jobId: string,
  afterId: number,
  limit: number,
): Promise<JobEvent[]> {
  return await db.orm.select().from(jobEvents).where(
    and(eq(jobEvents.jobId, jobId), gt(jobEvents.id, afterId)),
  ).orderBy(asc(jobEvents.id)).limit(limit);
}

/** The per-step metrics rows of a job, ascending by step, optionally within [fromStep, toStep]. */
export async function metricsSeries(
  db: Database,
  jobId: string,
  range: { fromStep?: number; toStep?: number } = {},
): Promise<JobMetricsRow[]> {
  const filters = [eq(jobMetrics.jobId, jobId)];
  if (range.fromStep !== undefined) filters.push(gte(jobMetrics.step, range.fromStep));
  if (range.toStep !== undefined) filters.push(lte(jobMetrics.step, range.toStep));
  return await db.orm.select().from(jobMetrics).where(and(...filters)).orderBy(
    asc(jobMetrics.step),
  );
}

/** Counts of jobs by status over all tenants (for `/metrics`). */
export async function jobCountsByStatus(db: Database): Promise<Map<JobStatus, number>> {
  const rows = await db.orm.select({ status: jobs.status, n: sql<number>`count(*)::int` })
    .from(jobs).groupBy(jobs.status);
  return new Map(rows.map((r) => [r.status, Number(r.n)]));
}

/** Queue statistics for `/metrics`: oldest queued age and held leases, from the jobs table. */
export async function queueStats(db: Database): Promise<{
  oldestQueuedS: number;
  activeWorkers: number;
  meanQueueWaitS: number;
}> {
  const [row] = await db.query<{ oldest: number | null; workers: number; wait: number | null }>(
    `-- queue_stats: age of the oldest queued job, distinct live lease holders, and the mean
     -- wait (started_at - queued_at) of jobs started in the last hour.
     select
       (select extract(epoch from now() - min(queued_at))::float8 from jobs where status = 'queued') as oldest,
       (select count(distinct worker_id)::int from jobs
          where status in ('running', 'cancelling') and lease_expires_at > now()) as workers,
       (select avg(extract(epoch from started_at - queued_at))::float8 from jobs
          where started_at > now() - interval '1 hour' and started_at >= queued_at) as wait`,
  );
  return {
    oldestQueuedS: Number(row?.oldest ?? 0),
    activeWorkers: Number(row?.workers ?? 0),
    meanQueueWaitS: Number(row?.wait ?? 0),
  };
}

/**
 * Per-step metrics and live progress, written by the worker under its fence.
 *
 * A step's metrics exist exactly once (UNIQUE(job_id, step)): a run resumed from a checkpoint
 * recomputes the steps after it and its values replace the lost run's, so the series always
 * describes the lineage of the final model.
 */
import type { Queryable } from "./db.ts";
import { type Fence, FenceLostError } from "./errors.ts";
import type { JobMetricsRow, JobProgress } from "./schema.ts";
import { toMetrics } from "./_rows.ts";
import { storableJson } from "./_storable.ts";

const SQL = {
  /**
   * recordMetrics: updates the job's latest metrics under the fence (the UPDATE re-checks the
   * fence after waiting for a concurrent transition) and upserts the step's row from it.
   */
  recordMetrics: `with fenced as (
      update jobs set latest_metrics = $5::jsonb || jsonb_build_object('step', $4::int)
      where id = $1::uuid and attempt = $2::int and worker_id = $3::text
        and status in ('running', 'cancelling')
      returning id, attempt)
    insert into job_metrics (job_id, step, attempt, values)
    select id, $4::int, attempt, $5::jsonb from fenced
    on conflict (job_id, step) do update
      set values = excluded.values, attempt = excluded.attempt, created_at = now()
    returning *`,
  /** setProgress: replaces the job's progress object under the fence. */
  setProgress: `update jobs set progress = $4::jsonb
    where id = $1::uuid and attempt = $2::int and worker_id = $3::text
      and status in ('running', 'cancelling')
    returning id`,
  /** listMetrics: a job's metric rows by step. */
  listMetrics: `select * from job_metrics where job_id = $1::uuid and step >= $2::int
    order by step limit $3::int`,
} as const;

/** Thrown when metric values are not a flat object of finite numbers. */
export class InvalidMetricsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidMetricsError";
  }
}

/**
 * Checks a step's metrics (see {@link recordMetrics}) without writing them.
 * @throws InvalidMetricsError when the step is not a non-negative integer, a value is not a
 *   finite number, a name is longer than 128 characters or there are over 256 values.
 */
export function checkMetrics(step: number, values: Record<string, number>): void {
  if (!Number.isInteger(step) || step < 0) {
    throw new InvalidMetricsError(
      `Cannot record metrics as the step must be a non-negative integer: current value is ${step}`,
    );
  }
  const keys = Object.keys(values);
  if (keys.length > 256) {
    throw new InvalidMetricsError(
      `Cannot record metrics as there must be at most 256 values: current count is ${keys.length}`,
    );
  }
  for (const k of keys) {
    if (typeof values[k] !== "number" || !Number.isFinite(values[k]) || k.length > 128) {
      throw new InvalidMetricsError(
        `Cannot record metric "${
          k.slice(0, 128)
        }" as it must be a finite number: current value is ${values[k]}`,
      );
    }
  }
}

/**
 * Records the metrics of one step (a flat object of finite numbers, e.g. `{success_rate: 0.5}`)
 * and sets them as the job's latest metrics.
 * @throws InvalidMetricsError when a value is not a finite number or there are over 256 keys.
 * @throws FenceLostError when the fence no longer matches (nothing is written).
 */
export async function recordMetrics(
  db: Queryable,
  fence: Fence,
  step: number,
  values: Record<string, number>,
): Promise<JobMetricsRow> {
  checkMetrics(step, values);
  const rows = await db.query(SQL.recordMetrics, [
    fence.jobId,
    fence.attempt,
    fence.workerId,
    step,
    storableJson(values),
  ]);
  if (rows.length === 0) throw new FenceLostError(fence, `record metrics of step ${step}`);
  return toMetrics(rows[0]);
}

/** Replaces the job's progress. @throws FenceLostError when the fence no longer matches. */
export async function setProgress(
  db: Queryable,
  fence: Fence,
  progress: JobProgress,
): Promise<void> {
  const rows = await db.query(SQL.setProgress, [
    fence.jobId,
    fence.attempt,
    fence.workerId,
    storableJson(progress),
  ]);
  if (rows.length === 0) throw new FenceLostError(fence, "set progress");
}

/** A job's metric rows from `fromStep` (default 0), by step, at most `limit` (default 10000). */
export async function listMetrics(
  db: Queryable,
  jobId: string,
  options: { fromStep?: number; limit?: number } = {},
): Promise<JobMetricsRow[]> {
  const rows = await db.query(SQL.listMetrics, [
    jobId,
    options.fromStep ?? 0,
    options.limit ?? 10_000,
  ]);
  return rows.map(toMetrics);
}

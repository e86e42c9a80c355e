/**
 * Deleting a final job with everything it made (`DELETE /v1/jobs/{id}`; jobs/README.md,
 * "Deleting a job"). Three steps, each safe to repeat, so a delete cut off anywhere is finished by
 * running it again (a repeated DELETE, or the sweeper, jobs/sweeper.ts):
 *
 * 1. **Mark** (`deleting_at`): one transaction that locks the row, checks it is the tenant's, final
 *    (`succeeded`, `failed`, `cancelled`) and named by no queued/running/cancelling job's
 *    `model.base` (directly or through a `job:` chain), and sets `deleting_at`. From then on every
 *    read treats the job as gone (404, left out of listings), so nobody sees it half-deleted. A
 *    submit naming the job as its base, directly or through a `job:` chain, locks the row FOR
 *    SHARE (queue.ts `submitJob` with `requireBase`): the mark waits for it and then sees its job,
 *    or it sees the mark. The row is the only lock the mark takes (queue.ts `submitJob` says why
 *    that keeps the two free of deadlocks).
 * 2. **Objects**: every key under `tenants/{tenant}/jobs/{job}/` (jobs/keys.ts: checkpoints,
 *    skill libraries, evaluations, trajectories and their images, rollout-policy folders) is
 *    listed and deleted — the prefix, not the rows' keys, so objects no row owns (a lost run's
 *    upload) go too.
 * 3. **Rows**: the job row is deleted; events, metrics, checkpoint, skill-library and trajectory
 *    rows and its idempotency key go with it (`on delete cascade`).
 *
 * Objects before rows: were the rows deleted first, objects left by a failure would belong to no
 * job and wait a day for the sweeper's grace; this way the marked row keeps saying what is left to
 * do.
 */
import type { Database, Queryable } from "./db.ts";
import { jobPrefix } from "./keys.ts";
import { JOB_EVENTS_CHANNEL } from "./queue.ts";
import type { ArtifactStore } from "./store.ts";
import type { Job } from "./schema.ts";
import { activeBaseChain, toJob } from "./_rows.ts";

/**
 * `chain(user_id, base, depth)`: each of the tenant's queued/running/cancelling jobs with its
 * `model.base`, then, while that is `job:<uuid>[@step]` naming a job with adapter-only
 * checkpoints, the base of that job (jobs/_rows.ts `baseChain`, as jobs/models.ts follows them).
 */
const CHAIN = activeBaseChain("$2");

const SQL = {
  /** lockJob: the tenant's job, locked for the mark (also one being deleted). */
  lockJob: `select * from jobs where id = $1::uuid and tenant_id = $2::uuid for update`,
  /** jobUsers: active jobs of the tenant whose base is this job (directly or by a job: chain). */
  jobUsers: `with recursive ${CHAIN}
    select distinct c.user_id as id from chain c
    where c.base = 'job:' || $1::text or c.base like 'job:' || $1::text || '@%'
    limit 10`,
  /** mark: sets deleting_at on a final job (kept when already set: a retry). */
  mark: `update jobs set deleting_at = coalesce(deleting_at, now())
    where id = $1::uuid and tenant_id = $2::uuid
      and status in ('succeeded', 'failed', 'cancelled')
    returning *`,
  /** deleteRows: the marked job's row (cascading to its events, metrics and artifact rows). */
  deleteRows: `with gone as (
      delete from jobs where id = $1::uuid and deleting_at is not null returning id)
    select count(pg_notify('${JOB_EVENTS_CHANNEL}', id::text)) as n from gone`,
  /** staleDeletions: jobs marked before $1 whose delete did not finish. */
  staleDeletions: `select * from jobs where deleting_at < $1::timestamptz
    order by deleting_at limit $2::int`,
} as const;

/** Object deletes in flight at once while a job's objects are deleted. */
export const DELETE_CONCURRENCY = 16;

/** Why a job cannot be deleted now. */
export type DeleteRefusal =
  | { reason: "not_final"; status: Job["status"] }
  | { reason: "in_use"; usedBy: string[] };

/**
 * Step 1 (see module doc): marks the tenant's job as being deleted.
 * @returns the marked job; `{ reason }` when it is not final or an active job trains from it
 *   (nothing changes); null when the tenant has no such job.
 */
export async function markJobDeleting(
  db: Database,
  options: { tenantId: string; jobId: string },
): Promise<Job | DeleteRefusal | null> {
  const params = [options.jobId, options.tenantId];
  return await db.transaction(async (tx) => {
    const [row] = await tx.query(SQL.lockJob, params);
    if (!row) return null;
    const job = toJob(row);
    if (!["succeeded", "failed", "cancelled"].includes(job.status)) {
      return { reason: "not_final", status: job.status } as const;
    }
    if (job.deletingAt === null) {
      const users = await tx.query<{ id: string }>(SQL.jobUsers, params);
      if (users.length > 0) return { reason: "in_use", usedBy: users.map((u) => String(u.id)) };
    }
    return toJob((await tx.query(SQL.mark, params))[0]);
  });
}

/**
 * Steps 2 and 3 (see module doc) for a job marked by {@link markJobDeleting}: deletes every
 * object under its prefix, then its rows. Safe to repeat; a failure leaves the job marked.
 * @returns how many objects were deleted.
 * @throws what the store or the database throws (the rest is left for a retry).
 */
export async function purgeDeletedJob(
  db: Queryable,
  store: Pick<ArtifactStore, "list" | "delete">,
  job: { id: string; tenantId: string },
): Promise<number> {
  const keys = await store.list(jobPrefix(job.tenantId, job.id));
  // DELETE_CONCURRENCY requests in flight: a job's thousands of trajectory images would take
  // minutes one round trip at a time. After the first failure no new request starts (a repeated
  // delete does the rest).
  let next = 0;
  let failed = false;
  const worker = async () => {
    try {
      while (next < keys.length && !failed) await store.delete(keys[next++]);
    } catch (e) {
      failed = true;
      throw e;
    }
  };
  // Every request settles before this returns (or throws its first error).
  const settled = await Promise.allSettled(
    Array.from({ length: Math.min(DELETE_CONCURRENCY, keys.length) }, worker),
  );
  const error = settled.find((r) => r.status === "rejected");
  if (error) throw error.reason;
  await db.query(SQL.deleteRows, [job.id]);
  return keys.length;
}

/**
 * Finishes deletes marked before `before` that did not complete (a request cut off between its
 * steps): at most `limit` jobs per call. Returns how many it finished.
 * @throws what the store or the database throws.
 */
export async function finishStaleDeletions(
  db: Queryable,
  store: Pick<ArtifactStore, "list" | "delete">,
  options: { before: Date; limit?: number },
): Promise<number> {
  const rows = await db.query(SQL.staleDeletions, [
    options.before.toISOString(),
    options.limit ?? 100,
  ]);
  for (const row of rows) await purgeDeletedJob(db, store, toJob(row));
  return rows.length;
}

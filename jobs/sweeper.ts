/**
 * The sweeper: removes objects of the store that no row owns, and multipart uploads that were
 * never completed. Rows are the commit points (artifacts.ts): an object is uploaded first and its
 * row committed after, so an object without a row is garbage nobody can see or delete: a model
 * upload that failed or whose API process died, a checkpoint of a lost run or of a step a later
 * attempt committed again, every object of a deleted job or model, the parts of a multipart upload
 * cut off mid-way. The API runs one on a timer (api/main.ts); it is idempotent and safe to run in
 * many processes at once.
 *
 * What it looks at: keys under `tenants/{tenant}/jobs/{job}/` and `tenants/{tenant}/models/{id}/`
 * (jobs/keys.ts) only — other keys of the bucket (objects an operator put there for `s3://` job
 * inputs) are never touched. Owners: `checkpoints.files`, `skill_libraries.key`,
 * `trajectory_dumps.key` and `.images`, `models.files`; and a job that has not finished (queued,
 * running, cancelling) owns its `rollout-policy/` folders, the policy versions its remote rollout
 * endpoints load (workers/seed/run/publish_policy.ts; the worker removes an attempt's folders when
 * the attempt ends, and the sweeper those of an attempt whose worker died).
 *
 * Grace: an object (or multipart upload) younger than `graceMs` (default 24 h) is left alone,
 * since its row may not be committed yet (a model upload's first file is stored before its last
 * one arrives). Objects are listed first and their owners read after, so a row committed between
 * the two protects its objects.
 *
 * Deletes cut off: a job whose `DELETE /v1/jobs/{id}` stopped between its steps (jobs/delete.ts)
 * stays marked; each sweep finishes those marked more than {@link DELETE_RETRY_AFTER_MS} ago
 * (objects, then rows) before it looks for orphans.
 *
 * Multipart uploads: a failed upload is aborted at once by its uploader (jobs/_multipart.ts; the
 * embedded server's front implements AbortMultipartUpload, jobs/embedded/local_s3.ts); the sweeper
 * is the backstop for an uploader that died: uploads are listed with ListMultipartUploads and
 * aborted when initiated before the grace.
 * A store that does not implement the listing (the embedded s3rver answers NotImplemented) is
 * reported once per sweep in
 * {@link SweepResult.multipartListing}; when the store names its embedded server's folder
 * (`StoreOptions.localDirectory`) the upload folders s3rver keeps there are removed instead.
 */
import { join } from "node:path";
import { AbortMultipartUploadCommand, ListMultipartUploadsCommand } from "@aws-sdk/client-s3";
import type { Queryable } from "./db.ts";
import type { ArtifactStore } from "./store.ts";
import { finishStaleDeletions } from "./delete.ts";

/**
 * A job marked for deletion this long ago (ms) whose delete did not finish is finished by the
 * sweeper (10 min: a DELETE in flight takes seconds; two finishing one job at once do no harm).
 */
export const DELETE_RETRY_AFTER_MS = 10 * 60_000;

/** Default grace period of the sweeper: 24 h, in milliseconds. */
export const DEFAULT_SWEEP_GRACE_MS = 24 * 3600_000;
/** Default interval between sweeps: 1 h, in milliseconds. */
export const DEFAULT_SWEEP_INTERVAL_MS = 3600_000;

const SQL = {
  /** ownedJobKeys: every object key a row of the jobs in $1 owns. */
  ownedJobKeys: `select f->>'key' as key from checkpoints c
      cross join jsonb_array_elements(c.files) f where c.job_id = any($1::uuid[])
    union all select key from skill_libraries where job_id = any($1::uuid[])
    union all select key from trajectory_dumps where job_id = any($1::uuid[])
    union all select i->>'key' from trajectory_dumps t
      cross join jsonb_array_elements(t.images) i where t.job_id = any($1::uuid[])`,
  /**
   * activeJobs: the jobs in $1 that have not finished (their rollout-policy/ objects are in use).
   */
  activeJobs: `select id::text as id from jobs
      where id = any($1::uuid[]) and status not in ('succeeded', 'failed', 'cancelled')`,
  /** ownedModelKeys: every object key a row of the models in $1 owns. */
  ownedModelKeys: `select f->>'key' as key from models m
      cross join jsonb_array_elements(m.files) f where m.id = any($1::uuid[])`,
} as const;

/** `tenants/{tenant}/(jobs|models)/{id}/…`: the keys the sweeper may remove. */
const SWEPT_KEY = /^tenants\/[^/]+\/(jobs|models)\/([^/]+)\//;
/** `tenants/{tenant}/jobs/{job}/rollout-policy/…`: a job's published rollout policies. */
const ROLLOUT_POLICY_KEY = /^tenants\/[^/]+\/jobs\/([^/]+)\/rollout-policy\//;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** What one sweep removed. */
export interface SweepResult {
  /** Objects deleted (no row owns them, older than the grace). */
  objects: number;
  /** Their bytes. */
  bytes: number;
  /** Multipart uploads aborted (or, on the embedded server, upload folders removed). */
  multipartUploads: number;
  /** Whether the store could list multipart uploads (false: see the module doc). */
  multipartListing: boolean;
  /** Job deletes finished (cut off before; see the module doc). */
  deletesFinished: number;
}

/** Counters over the sweeps of one process, for `/metrics` (`seed_orphan_*`). */
export interface SweepTotals extends SweepResult {
  /** Sweeps that ran to the end. */
  sweeps: number;
  /** Sweeps that failed (the database or the store was unreachable). */
  failures: number;
}

/** Options of {@link sweepOrphans} and {@link startSweeper}. */
export interface SweepOptions {
  /** Objects younger than this are kept, ms (default {@link DEFAULT_SWEEP_GRACE_MS}). */
  graceMs?: number;
  /** The clock (default `Date.now`), for tests. */
  now?: () => number;
}

/**
 * Runs one sweep (see module doc).
 * @throws what the database or the store throws (nothing more is deleted after the error).
 */
export async function sweepOrphans(
  db: Queryable,
  store: ArtifactStore,
  options: SweepOptions = {},
): Promise<SweepResult> {
  const now = (options.now ?? Date.now)();
  const cutoff = now - (options.graceMs ?? DEFAULT_SWEEP_GRACE_MS);
  const result: SweepResult = {
    objects: 0,
    bytes: 0,
    multipartUploads: 0,
    multipartListing: true,
    deletesFinished: await finishStaleDeletions(db, store, {
      before: new Date(now - DELETE_RETRY_AFTER_MS),
    }),
  };
  // Listed first, owners read after: a row committed in between protects its objects.
  const old = (await store.listObjects("tenants/")).filter((o) =>
    SWEPT_KEY.test(o.key) && o.lastModified.getTime() < cutoff
  );
  const ids = { jobs: new Set<string>(), models: new Set<string>() };
  for (const o of old) {
    const [, kind, id] = o.key.match(SWEPT_KEY)!;
    if (UUID.test(id)) ids[kind as "jobs" | "models"].add(id);
  }
  const owned = new Set<string>();
  for (const [sql, set] of [[SQL.ownedJobKeys, ids.jobs], [SQL.ownedModelKeys, ids.models]]) {
    const list = [...(set as Set<string>)];
    for (let at = 0; at < list.length; at += 1000) {
      const rows = await db.query<{ key: string }>(sql as string, [list.slice(at, at + 1000)]);
      for (const r of rows) owned.add(r.key);
    }
  }
  const active = new Set<string>();
  const jobList = [...ids.jobs];
  for (let at = 0; at < jobList.length; at += 1000) {
    const rows = await db.query<{ id: string }>(SQL.activeJobs, [jobList.slice(at, at + 1000)]);
    for (const r of rows) active.add(r.id);
  }
  for (const o of old) {
    if (owned.has(o.key)) continue;
    const policy = ROLLOUT_POLICY_KEY.exec(o.key);
    if (policy && active.has(policy[1])) continue;
    await store.delete(o.key);
    result.objects++;
    result.bytes += o.bytes;
  }
  await sweepMultipart(store, cutoff, result);
  return result;
}

/** Aborts multipart uploads under `tenants/` initiated before `cutoff` (see module doc). */
async function sweepMultipart(store: ArtifactStore, cutoff: number, result: SweepResult) {
  let keyMarker: string | undefined;
  let uploadIdMarker: string | undefined;
  try {
    for (;;) {
      const page = await store.send<{
        Uploads?: { Key?: string; UploadId?: string; Initiated?: Date }[];
        IsTruncated?: boolean;
        NextKeyMarker?: string;
        NextUploadIdMarker?: string;
      }>(
        new ListMultipartUploadsCommand({
          Bucket: store.bucket,
          Prefix: "tenants/",
          KeyMarker: keyMarker,
          UploadIdMarker: uploadIdMarker,
        }),
      );
      for (const u of page.Uploads ?? []) {
        if (!u.Key || !u.UploadId || !u.Initiated || u.Initiated.getTime() >= cutoff) continue;
        await store.send(
          new AbortMultipartUploadCommand({
            Bucket: store.bucket,
            Key: u.Key,
            UploadId: u.UploadId,
          }),
        );
        result.multipartUploads++;
      }
      if (!page.IsTruncated) return;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker;
    }
  } catch (e) {
    const name = (e as { name?: string })?.name;
    if (name !== "NotImplemented" && name !== "MethodNotAllowed") throw e;
    result.multipartListing = false;
    if (store.localDirectory) {
      result.multipartUploads += await sweepLocalUploads(
        store.localDirectory,
        store.bucket,
        cutoff,
      );
    }
  }
}

/**
 * The embedded s3rver keeps a multipart upload's parts in `{directory}/{bucket}/._S3rver_uploads/
 * {uploadId}/` and implements neither listing nor aborting them: removes the folders last
 * written before `cutoff`. Returns how many.
 */
async function sweepLocalUploads(directory: string, bucket: string, cutoff: number) {
  const uploads = join(directory, bucket, "._S3rver_uploads");
  let removed = 0;
  try {
    for await (const entry of Deno.readDir(uploads)) {
      const path = join(uploads, entry.name);
      const mtime = (await Deno.stat(path)).mtime?.getTime() ?? Infinity;
      if (!entry.isDirectory || mtime >= cutoff) continue;
      await Deno.remove(path, { recursive: true });
      removed++;
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return removed;
}

/** A sweeper running on a timer. */
export interface Sweeper {
  /** Counters since start (see {@link SweepTotals}). */
  readonly totals: SweepTotals;
  /** Runs one sweep now (also what the timer runs) and adds it to the totals. */
  runOnce(): Promise<SweepResult>;
  /** Stops the timer and waits for a sweep in progress. */
  stop(): Promise<void>;
}

/**
 * Starts a sweeper: the first sweep after one `intervalMs`, then every `intervalMs`. A failed
 * sweep is counted, passed to `onError`, and retried at the next tick.
 */
export function startSweeper(
  db: Queryable,
  store: ArtifactStore,
  options: SweepOptions & {
    intervalMs?: number;
    onSwept?: (r: SweepResult) => void;
    onError?: (e: unknown) => void;
  } = {},
): Sweeper {
  const intervalMs = options.intervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
  const totals: SweepTotals = {
    objects: 0,
    bytes: 0,
    multipartUploads: 0,
    multipartListing: true,
    deletesFinished: 0,
    sweeps: 0,
    failures: 0,
  };
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<unknown> = Promise.resolve();
  const runOnce = async () => {
    const r = await sweepOrphans(db, store, options);
    totals.objects += r.objects;
    totals.bytes += r.bytes;
    totals.multipartUploads += r.multipartUploads;
    totals.multipartListing = r.multipartListing;
    totals.deletesFinished += r.deletesFinished;
    totals.sweeps++;
    options.onSwept?.(r);
    return r;
  };
  const tick = () => {
    running = runOnce().catch((e) => {
      totals.failures++;
      options.onError?.(e);
    }).finally(() => {
      if (!stopped) timer = setTimeout(tick, intervalMs);
    });
  };
  timer = setTimeout(tick, intervalMs);
  return {
    totals,
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

/** Prometheus text of a sweeper's totals (`seed_orphan_*`). */
export function sweeperMetricsText(t: SweepTotals): string {
  return [
    "# HELP seed_orphan_objects_deleted_total Objects no row owned, deleted by the sweeper.",
    "# TYPE seed_orphan_objects_deleted_total counter",
    `seed_orphan_objects_deleted_total ${t.objects}`,
    "# HELP seed_orphan_bytes_deleted_total Bytes of the orphan objects deleted by the sweeper.",
    "# TYPE seed_orphan_bytes_deleted_total counter",
    `seed_orphan_bytes_deleted_total ${t.bytes}`,
    "# HELP seed_orphan_multipart_aborted_total Incomplete multipart uploads aborted by the sweeper.",
    "# TYPE seed_orphan_multipart_aborted_total counter",
    `seed_orphan_multipart_aborted_total ${t.multipartUploads}`,
    "# HELP seed_orphan_sweeps_total Sweeps by outcome.",
    "# TYPE seed_orphan_sweeps_total counter",
    `seed_orphan_sweeps_total{outcome="ok"} ${t.sweeps}`,
    `seed_orphan_sweeps_total{outcome="failed"} ${t.failures}`,
    "# HELP seed_orphan_multipart_listing Whether the store lists multipart uploads (1) or not (0).",
    "# TYPE seed_orphan_multipart_listing gauge",
    `seed_orphan_multipart_listing ${t.multipartListing ? 1 : 0}`,
  ].join("\n") + "\n";
}

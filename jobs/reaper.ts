/**
 * The reaper: a small, separate service that returns expired leases to the queue (River's
 * "rescuer"). It is idempotent and safe to run in many processes at once (its statement takes
 * rows with SKIP LOCKED); every worker process runs one.
 *
 * Thresholds: a worker heartbeats every `leaseMs / 3` (default lease 30 s), so a lease expires
 * only after about two missed heartbeats; the reaper scans every `intervalMs` (default 5 s), so
 * a lost worker's job is back in the queue within `leaseMs + intervalMs` of its last heartbeat.
 *
 * Outages: leases are judged on the database's clock, and after a scan fails (the database was
 * unreachable from here) the next successful one notes the database's time and, from then on,
 * leaves every lease two more lease lengths (at least 10 s) to be renewed (SQL.reap in queue.ts;
 * a database restart gets the same grace from `pg_postmaster_start_time()`). A worker that lived
 * through the outage heartbeats again within a second or so of the database's return, so it is
 * never requeued against itself; a worker that died during the outage is requeued once the
 * grace has passed.
 */
import type { Queryable } from "./db.ts";
import { databaseNow, reapExpiredLeases } from "./queue.ts";
import type { Job } from "./schema.ts";

/** Default scan interval of the reaper, in milliseconds. */
export const DEFAULT_REAP_INTERVAL_MS = 5_000;

/** Options of {@link startReaper}. */
export interface ReaperOptions {
  /** Scan interval in milliseconds (default {@link DEFAULT_REAP_INTERVAL_MS}). */
  intervalMs?: number;
  /** Most jobs moved per scan (default 100; a full batch scans again at once). */
  limit?: number;
  /** Called with the jobs each scan moved (requeued, failed or cancelled). */
  onReaped?: (jobs: Job[]) => void;
  /** Called when a scan fails (the reaper keeps going; the database may be restarting). */
  onError?: (error: unknown) => void;
}

/** A running reaper. */
export interface Reaper {
  /** Runs one scan now (also what the timer runs). */
  runOnce(): Promise<Job[]>;
  /** Stops the timer and waits for a scan in progress. */
  stop(): Promise<void>;
}

/** Starts a reaper on a timer (first scan at once). */
export function startReaper(db: Queryable, options: ReaperOptions = {}): Reaper {
  const intervalMs = options.intervalMs ?? DEFAULT_REAP_INTERVAL_MS;
  const limit = options.limit ?? 100;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let failed = false;
  let reachableSince: Date | undefined;
  const runOnce = async () => {
    if (failed) {
      reachableSince = await databaseNow(db);
      failed = false;
    }
    const all: Job[] = [];
    for (;;) {
      const moved = await reapExpiredLeases(db, { limit, reachableSince });
      all.push(...moved);
      if (moved.length < limit || stopped) break;
    }
    if (all.length) options.onReaped?.(all);
    return all;
  };
  const tick = () => {
    running = runOnce().catch((e) => {
      failed = true;
      options.onError?.(e);
    }).finally(() => {
      if (!stopped) timer = setTimeout(tick, intervalMs);
    });
  };
  tick();
  return {
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

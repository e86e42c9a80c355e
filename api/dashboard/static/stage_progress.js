/**
 * A job's progress in words where the dashboard and the CLI must agree, one copy for both (a plain
 * module, so the page loads it as served, without a build step; api/client/progress.ts re-exports
 * it for the `seed` bar, `seed list` and the demo):
 *
 * - a warm-up stage's own count. The worker writes the count into the job's `progress`
 *   (workers/seed/run/warmup_stage.ts `StageProgress`: `phase`, `done`, `total`, `loss`,
 *   `episodes`) and leaves it there when the job stops, so a job that failed or was cancelled in
 *   its warm-up still says where it stopped;
 * - a job back in the queue after a run of it started ({@link queuedAgain}), whose `progress` is
 *   still the last run's: which run it waits for ({@link queuedAgainText}), in place of that stage;
 *   and such a job cancelled there ({@link cancelledInQueueText});
 * - a running job's ETA counted down between its progress writes ({@link etaLeft}) from when that
 *   write was first read ({@link etaAnchor}), so the page's ETA, the demo's bar and `seed follow`'s
 *   bar tick alike.
 */

/**
 * A stage's own count: what a bar fills by and how it reads.
 * @typedef {object} StageCount
 * @property {number} done Work done within the stage: optimizer steps, or turns played.
 * @property {number} total Work planned within the stage.
 * @property {string} label The count as text: `SFT step 8/16`, `trajectories turn 5/20`.
 * @property {string} rest The rest of {@link stageDetail}: `loss 2.310`, `187 episodes playing`
 *   ("" when none).
 */

/**
 * The count a warm-up stage's progress carries (`done` of `total`), which a bar shows in place of
 * the job's updates (still 0 of N for the warm-up, about half of a demo's time), whatever the job's
 * status; null when the progress has none (`total` missing or 0).
 * @param {Record<string, unknown> | null | undefined} progress the job's `progress`
 * @returns {StageCount | null}
 */
export function stageCount(progress) {
  const { phase, done, total, loss, episodes } = progress ?? {};
  if (typeof done !== "number" || typeof total !== "number" || !(total > 0)) return null;
  if (phase === "trajectories") {
    const rest = typeof episodes === "number" ? `${episodes} episodes playing` : "";
    return { done, total, label: `trajectories turn ${done}/${total}`, rest };
  }
  const rest = typeof loss === "number" ? `loss ${loss.toFixed(3)}` : "";
  return { done, total, label: `SFT step ${done}/${total}`, rest };
}

/**
 * How far a job in a warm-up stage (`warmup_policy`, `warmup_analyzer`: a stage whose name begins
 * with `warmup`) is, in a few characters for a table column: `warm-up 120/560`, the stage's own
 * count ({@link stageCount}: SFT steps or trajectory turns), or `warm-up` before the stage reports
 * one; null outside the warm-up, where the job's updates (`3/10`) say it.
 * @param {Record<string, unknown> | null | undefined} progress the job's `progress`
 * @returns {string | null}
 */
export function warmupStep(progress) {
  const within = stageCount(progress);
  if (within) return `warm-up ${within.done}/${within.total}`;
  const stage = progress?.stage;
  return typeof stage === "string" && stage.startsWith("warmup") ? "warm-up" : null;
}

/**
 * Where a job is inside a long stage: the warm-up's count as `trajectories: turn 5/20, 187
 * episodes playing` or `SFT step 8/16, loss 2.310`; a `done`/`total` without a phase as
 * `SFT step 8/16`; a phase with nothing planned (`total` 0: no samples to train on, no turns to
 * play) as `SFT: no steps` or `trajectories: no turns`, not `0/0`; "" otherwise.
 * @param {Record<string, unknown> | null | undefined} progress the job's `progress`
 * @returns {string}
 */
export function stageDetail(progress) {
  const { phase, done, total, loss, episodes } = progress ?? {};
  if (typeof done !== "number" || typeof total !== "number") return "";
  if (!(total > 0)) return phase === "trajectories" ? "trajectories: no turns" : "SFT: no steps";
  if (phase === "trajectories") {
    const playing = typeof episodes === "number" ? `, ${episodes} episodes playing` : "";
    return `trajectories: turn ${done}/${total}${playing}`;
  }
  const lossText = typeof loss === "number" ? `, loss ${loss.toFixed(3)}` : "";
  return `SFT step ${done}/${total}${lossText}`;
}

/**
 * Whether `job` is back in the queue after a run of it started: its worker was lost (the reaper
 * requeued it with the next attempt) or gave it back while stopping. Its `progress` is still the
 * last run's, which the next run replaces: show {@link queuedAgainText}, not that progress.
 * @param {{status: string, started_at?: string | null}} job a job as the API answers it
 * @returns {boolean}
 */
export function queuedAgain(job) {
  return job.status === "queued" && job.started_at !== null && job.started_at !== undefined;
}

/**
 * Which run a job queued again ({@link queuedAgain}) waits for: `queued to resume: run 1 of at
 * most 3` while `attempt` is still 0 (`attempt` counts from 0, so it is run `attempt + 1`): only a
 * worker giving the job back while stopping requeues it without using up the run; `queued again:
 * run 2 of at most 3` from `attempt` 1 on, as the job row cannot tell a run lost (the reaper
 * requeued it with the next attempt: a retry) from a later run given back (jobs/queue.ts `reap`,
 * `release`: both leave it queued with the same fields, and their `status` events differ only in
 * the attempt of the run before); null for any other job.
 * @param {{status: string, started_at?: string | null, attempt: number, max_attempts: number}} job
 *   a job as the API answers it
 * @returns {string | null}
 */
export function queuedAgainText(job) {
  if (!queuedAgain(job)) return null;
  const run = `run ${job.attempt + 1} of at most ${job.max_attempts}`;
  return job.attempt > 0 ? `queued again: ${run}` : `queued to resume: ${run}`;
}

/**
 * Whether `job` was cancelled while queued again ({@link queuedAgain}): the cancel sets its
 * `progress` to `{stage: "queued"}` in place of the last run's (jobs/queue.ts `cancel`).
 * @param {{status: string, started_at?: string | null, progress?: any}} job a job as the API
 *   answers it
 * @returns {boolean}
 */
export function cancelledInQueue(job) {
  return job.status === "cancelled" && job.started_at !== null && job.started_at !== undefined &&
    job.progress?.stage === "queued";
}

/**
 * A job cancelled while queued again ({@link cancelledInQueue}) in the words it was queued with
 * ({@link queuedAgainText}): `cancelled while queued again: run 2 of at most 3`; null for any
 * other job.
 * @param {{status: string, started_at?: string | null, attempt: number, max_attempts: number,
 *   progress?: any}} job a job as the API answers it
 * @returns {string | null}
 */
export function cancelledInQueueText(job) {
  if (!cancelledInQueue(job)) return null;
  return `cancelled while ${queuedAgainText({ ...job, status: "queued" })}`;
}

/**
 * Seconds left of a running job at `nowMs`: its `eta_s` less the seconds since that progress was
 * read (`readAtMs`), never below 0, so a shown ETA counts down between the worker's progress
 * writes (one per stage; workers/seed/run/update_eta.ts computes `eta_s` as it writes) rather than
 * standing still. The job's JSON carries no time of its progress, so a reader counts from when it
 * first saw that progress; a reading time after `nowMs` counts as no time passed.
 * @param {number} etaS the job's `progress.eta_s`, in seconds
 * @param {number} readAtMs when that progress was first read, ms since the epoch
 * @param {number} nowMs now, ms since the epoch
 * @returns {number} seconds, not rounded
 */
export function etaLeft(etaS, readAtMs, nowMs) {
  return Math.max(0, etaS - Math.max(0, nowMs - readAtMs) / 1000);
}

/**
 * Where a running job's ETA count starts ({@link etaLeft}'s `readAtMs`).
 * @typedef {object} EtaAnchor
 * @property {string} key The progress it counts from, as JSON.
 * @property {number} atMs When that progress was first read, ms since the epoch.
 */

/**
 * The start of a job's ETA count once its `progress` is read at `nowMs`: `last` while the progress
 * reads as it did then (a re-read between the worker's writes), else a new count from `nowMs`. The
 * job's JSON carries no time of its progress write, so a write is told by its progress object:
 * each of the worker's writes moves on some field (the next stage, step or warm-up count), so one
 * that repeats the last `eta_s` still starts the count again (a count keyed on `eta_s` alone would
 * run on from the write before); only a write identical in every field, which no reader can tell
 * from a re-read, keeps the count.
 * @param {EtaAnchor | undefined} last the anchor of the previous read (undefined: none yet)
 * @param {unknown} progress the job's `progress` as read now
 * @param {number} nowMs now, ms since the epoch
 * @returns {EtaAnchor}
 */
export function etaAnchor(last, progress, nowMs) {
  const key = JSON.stringify(progress ?? null);
  return last?.key === key ? last : { key, atMs: nowMs };
}

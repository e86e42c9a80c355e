/**
 * The control loop of one run: while a handler computes (in its compute process), the worker's
 * own event loop heartbeats every `leaseMs / 3` — every second after a failed heartbeat, so the
 * lease is extended as soon as the database is back, and giving up on a statement that has not
 * answered within max(lease / 3, 2 s) — and at once when a cancel is announced on
 * `CANCEL_CHANNEL` (the heartbeat's answer stays the authority; a lost notification is caught
 * by the next regular beat). It beats once as soon as it is subscribed, so a cancel sent between
 * the claim and the subscription is seen at once too. It reports a cancel or a lost fence once,
 * then stops beating. Heartbeats that resume after a gap longer than the lease (an outage, a
 * stalled event loop) are logged as a warning with the gap.
 */
import {
  CANCEL_CHANNEL,
  type Database,
  errorFields,
  type Fence,
  FenceLostError,
  heartbeat,
  type Logger,
} from "../../jobs/mod.ts";

/** What {@link startControlLoop} needs. */
export interface ControlOptions {
  db: Database;
  fence: Fence;
  /** Lease length in ms (heartbeat every leaseMs / 3). */
  leaseMs: number;
  log: Logger;
  /** Called once when a heartbeat finds the job `cancelling`. */
  onCancel(): void;
  /** Called once when a heartbeat finds the fence lost. */
  onFenceLost(error: FenceLostError): void;
}

/** A running control loop. */
export interface ControlLoop {
  /** Stops beating and listening; waits for a heartbeat in flight (at most its give-up time). */
  stop(): Promise<void>;
}

/** Starts the control loop of a run (see module doc). */
export async function startControlLoop(options: ControlOptions): Promise<ControlLoop> {
  const { db, fence, leaseMs, log } = options;
  const intervalMs = leaseMs / 3;
  const retryMs = Math.min(intervalMs, 1_000);
  const answerMs = Math.max(intervalMs, 2_000);
  let beating = true;
  let inFlight = false;
  let beatAgain = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let beat: Promise<void> = Promise.resolve();
  let dueAt = Date.now() + intervalMs;
  let lastBeatAt = Date.now();
  const schedule = (ms: number) => {
    clearTimeout(timer);
    if (!beating) return;
    dueAt = Date.now() + ms;
    timer = setTimeout(tick, ms);
  };
  /** One heartbeat now; `keepSchedule`: an extra beat that leaves the regular timer as it is. */
  const tick = (keepSchedule = false) => {
    if (!beating) return;
    // A late timer means something held this event loop (an in-process handler).
    const lateMs = Date.now() - dueAt;
    if (lateMs > intervalMs) {
      log.warn("the handler blocked the event loop; heartbeats were late", { lateMs, leaseMs });
      dueAt = Date.now(); // reported once
    }
    if (inFlight) {
      beatAgain = true; // e.g. a cancel announced while a heartbeat was on its way
      return;
    }
    inFlight = true;
    let nextMs = intervalMs;
    beat = withTimeout(heartbeat(db, fence, leaseMs), answerMs).then(({ cancelRequested }) => {
      // A gap past the lease (an outage, a stalled event loop): the lease had expired meanwhile,
      // and only the reaper's outage grace kept the job from being requeued.
      const gapMs = Date.now() - lastBeatAt;
      lastBeatAt = Date.now();
      if (gapMs > leaseMs) {
        log.warn("heartbeats resumed after a gap longer than the lease", { gapMs, leaseMs });
      }
      if (cancelRequested && beating) {
        beating = false;
        log.info("cancel requested");
        options.onCancel();
      }
    }).catch((e) => {
      if (e instanceof FenceLostError) {
        if (!beating) return;
        beating = false;
        log.warn("lease lost; stopping the job", errorFields(e));
        options.onFenceLost(e);
      } else {
        nextMs = retryMs;
        log.warn("heartbeat failed; retrying", { ...errorFields(e), retryMs });
      }
    }).finally(() => {
      inFlight = false;
      if (beatAgain || !keepSchedule || nextMs !== intervalMs) schedule(beatAgain ? 0 : nextMs);
      beatAgain = false;
    });
  };
  schedule(intervalMs);
  const unlisten = await db.listen(CANCEL_CHANNEL, (payload) => {
    if (payload === fence.jobId) tick();
  }).catch((e) => {
    log.warn("cannot listen for cancels; heartbeats alone will bring them", errorFields(e));
    return async () => {};
  });
  // A cancel sent between the claim and the LISTEN above was announced to no one: beat once now,
  // after subscribing, so its row is read; any later cancel arrives as a notification.
  tick(true);
  return {
    async stop() {
      beating = false;
      clearTimeout(timer);
      await beat;
      await unlisten().catch(() => {});
    },
  };
}

/** `promise`, or a TimeoutError after `ms` (the promise itself is left to settle unobserved). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timeout: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timeout = setTimeout(() => {
        const e = new Error(`The heartbeat did not answer within ${ms} ms`);
        e.name = "TimeoutError";
        reject(e);
      }, ms);
    }),
  ]).finally(() => clearTimeout(timeout));
}

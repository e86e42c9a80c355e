/**
 * Wake-up of idle workers: LISTEN on the queue's channel, with polling as the fallback (a lost
 * notification, a reaped lease, a restarted database — the poll finds the work anyway).
 */
import type { Database } from "./db.ts";
import { JOBS_CHANNEL } from "./queue.ts";
import type { Device } from "./spec.ts";

/** Why {@link Wakeup.wait} returned. */
export type WakeReason = "notified" | "timeout" | "aborted";

/** A subscription to new-work notifications for one device. */
export interface Wakeup {
  /**
   * Resolves on the first notification for the device since the last wait (at once if one came
   * in between), after `timeoutMs` (the polling fallback), or when `signal` aborts.
   */
  wait(timeoutMs: number, signal?: AbortSignal): Promise<WakeReason>;
  /** Unsubscribes (idempotent). */
  close(): Promise<void>;
}

/** Subscribes to `JOBS_CHANNEL` notifications whose payload is `device`. */
export async function createWakeup(db: Database, device: Device): Promise<Wakeup> {
  let pending = false;
  let wake: (() => void) | undefined;
  const unlisten = await db.listen(JOBS_CHANNEL, (payload) => {
    if (payload !== device) return;
    pending = true;
    wake?.();
  });
  let closed = false;
  return {
    wait(timeoutMs, signal) {
      if (pending) {
        pending = false;
        return Promise.resolve("notified");
      }
      if (signal?.aborted) return Promise.resolve("aborted");
      return new Promise<WakeReason>((resolve) => {
        const done = (reason: WakeReason) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          wake = undefined;
          pending = false;
          resolve(reason);
        };
        const onAbort = () => done("aborted");
        const timer = setTimeout(() => done("timeout"), timeoutMs);
        signal?.addEventListener("abort", onAbort, { once: true });
        wake = () => done("notified");
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      wake = undefined;
      await unlisten();
    },
  };
}

/**
 * Retries of transient infrastructure failures ("Postgres or S3 going away for a while
 * means retries, not a failed job": README.md, "Running in production"). Only errors that look like
 * a lost connection or a server-side 5xx are retried (jobs/transient.ts); domain errors
 * (FenceLostError, validation) are thrown at once.
 */
import { isTransient } from "../../jobs/mod.ts";

export { isTransient };

/** Options of {@link withRetry}. */
export interface RetryOptions {
  /** Give up after this long, in milliseconds (default 60 000). */
  retryForMs?: number;
  /** First delay in milliseconds (default 200), doubled up to 5 000. */
  initialDelayMs?: number;
  /** Stops retrying (the last error is thrown) when aborted. */
  signal?: AbortSignal;
  /** Called before each retry. */
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
}

/** Runs `fn`, retrying transient failures with exponential backoff (see {@link isTransient}). */
export async function withRetry<T>(fn: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const deadline = Date.now() + (options.retryForMs ?? 60_000);
  let delay = options.initialDelayMs ?? 200;
  for (let attempt = 1;; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!isTransient(e) || Date.now() + delay > deadline || options.signal?.aborted) throw e;
      options.onRetry?.(e, attempt, delay);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(5_000, delay * 2);
    }
  }
}

/** Options of {@link untilReachable}. */
export interface ReachOptions {
  /** First wait in milliseconds (default 50), doubled up to {@link ReachOptions.maxDelayMs}. */
  initialDelayMs?: number;
  /** Longest wait between tries in milliseconds (default 1 000). */
  maxDelayMs?: number;
  /** Stops waiting (the last error is thrown) when aborted. */
  signal?: AbortSignal;
  /** Called before each wait with the failure, the try number (1-based) and the wait in ms. */
  onWait?: (error: unknown, attempt: number, delayMs: number) => void;
}

/**
 * Runs `fn` until it resolves, waiting out an outage however long it lasts: a transient failure
 * (a refused or reset connection, {@link isTransient}) is retried after 50 ms, 100 ms, … up to 1 s
 * between tries (a dependency that comes back is used within a second). Anything else — a bad
 * configuration, a failed migration — is thrown at once. Used where a worker starts (database and
 * store) and where it resubscribes, so that an outage is a wait and never an exit.
 * @throws the last error when `signal` aborts, or the first error that is not transient.
 */
export async function untilReachable<T>(
  fn: () => Promise<T>,
  options: ReachOptions = {},
): Promise<T> {
  const maxDelayMs = options.maxDelayMs ?? 1_000;
  let delay = options.initialDelayMs ?? 50;
  for (let attempt = 1;; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!isTransient(e) || options.signal?.aborted) throw e;
      options.onWait?.(e, attempt, delay);
      const aborted = await sleep(delay, options.signal);
      if (aborted) throw e;
      delay = Math.min(maxDelayMs, delay * 2);
    }
  }
}

/** Waits `ms`; resolves true at once when `signal` aborts first. */
function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (aborted: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(aborted);
    };
    const onAbort = () => done(true);
    const timer = setTimeout(() => done(false), ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Retries of transient infrastructure failures ("Postgres or S3 going away for a while
 * means retries, not a failed job": README.md, "Running in production"). Only errors that look like a lost connection or a server-side
 * 5xx are retried (jobs/transient.ts); domain errors (FenceLostError, validation) are thrown at
 * once.
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

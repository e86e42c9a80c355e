/**
 * Retries of transient infrastructure failures ("Postgres or S3 going away for a while means
 * retries, not a failed job": README.md, "Running in production"). Only errors that look like a
 * lost connection or a server-side 5xx are retried; domain errors (FenceLostError, validation) are
 * thrown at once.
 */

const TRANSIENT_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "57P01", // admin_shutdown
  "57P03", // cannot_connect_now
  "08000",
  "08001",
  "08003",
  "08006",
]);

/** True for errors worth retrying: lost connections, Postgres connection classes, S3 5xx. */
export function isTransient(e: unknown): boolean {
  const err = e as {
    code?: string;
    cause?: { code?: string };
    name?: string;
    $metadata?: { httpStatusCode?: number };
  };
  if (!err || typeof err !== "object") return false;
  if (err.code && TRANSIENT_CODES.has(err.code)) return true;
  if (err.cause?.code && TRANSIENT_CODES.has(err.cause.code)) return true;
  const status = err.$metadata?.httpStatusCode;
  if (status !== undefined && status >= 500) return true;
  return err.name === "TimeoutError" || err.name === "ConnectionRefused";
}

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

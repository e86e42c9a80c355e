/**
 * Which failures are an outage rather than a fault: a lost or refused connection to Postgres or
 * the object store, Postgres's connection-class and shutdown states, an S3 5xx. The worker
 * retries these (workers/worker/retry.ts) and the API answers them with 503 and `Retry-After`
 * (api/app.ts); anything else is a fault of its own kind.
 */

const TRANSIENT_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
  "08000",
  "08001",
  "08003",
  "08006",
]);

/**
 * True for errors worth retrying: lost connections (also as the `cause` of a wrapping error),
 * Postgres connection classes and shutdown states, S3 5xx and timeouts.
 */
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
  return err.name !== undefined && TRANSIENT_NAMES.has(err.name);
}

/** Error names of timeouts and of Deno's own network errors (`Deno.errors.*`). */
const TRANSIENT_NAMES = new Set([
  "TimeoutError",
  "ConnectionRefused",
  "ConnectionReset",
  "ConnectionAborted",
  "BrokenPipe",
  "NotConnected",
]);

/**
 * A live snapshot over Server-Sent Events: the job list (`GET /v1/jobs` with
 * `Accept: text/event-stream`) sends `event: jobs` with the same JSON as the plain answer at once,
 * then again each time it differs from the last one sent. It re-reads on every wake-up (NOTIFY
 * `job_events`: a submit, a status change or an event of any job) and at least every `pollMs`
 * (progress updates send no NOTIFY); an unchanged snapshot sends nothing, and an idle stream a
 * `: keepalive` comment every `keepaliveMs`. The stream never ends by itself: the client closes
 * it (or the server stops). A failed read ends it with `event: error`: a generic message and an
 * error id, the detail in the server log (`streamErrorEvent`); clients reconnect.
 */
import type { Logger } from "../jobs/mod.ts";
import { formatSse, liveSseStream } from "./sse.ts";

/** What {@link snapshotStream} reads. */
export interface SnapshotSource {
  /** The snapshot as the JSON text to send. */
  read(): Promise<string>;
  /** Optional wake-up: calls `wake` when the snapshot may have changed; returns an unsubscribe. */
  subscribe?(wake: () => void): Promise<() => void> | (() => void);
}

/** Timing of {@link snapshotStream}. */
export interface SnapshotOptions {
  /** Re-read interval without a wake-up, ms (default 1,000). */
  pollMs?: number;
  /** Idle time before a `: keepalive` comment, ms (default 15,000). */
  keepaliveMs?: number;
  /** SSE event name (default `snapshot`). */
  event?: string;
  /** Server log of a stream's internal error (see `streamErrorEvent`). */
  log?: Logger;
}

/** Returns the SSE body stream (see module doc). */
export function snapshotStream(
  source: SnapshotSource,
  options: SnapshotOptions = {},
): ReadableStream<Uint8Array> {
  const event = options.event ?? "snapshot";
  let last: string | undefined;
  return liveSseStream({
    subscribe: source.subscribe?.bind(source),
    async tick() {
      const snapshot = await source.read();
      if (snapshot === last) return { messages: [] };
      last = snapshot;
      return { messages: [formatSse({ event, data: snapshot })] };
    },
  }, {
    pollMs: options.pollMs ?? 1_000,
    keepaliveMs: options.keepaliveMs ?? 15_000,
    log: options.log,
  });
}

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
import { formatSse, streamErrorEvent, wakeableSleep } from "./sse.ts";

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
  log?: (record: Record<string, unknown>) => void;
}

const encoder = new TextEncoder();

/** Returns the SSE body stream (see module doc). */
export function snapshotStream(
  source: SnapshotSource,
  options: SnapshotOptions = {},
): ReadableStream<Uint8Array> {
  const pollMs = options.pollMs ?? 1_000;
  const keepaliveMs = options.keepaliveMs ?? 15_000;
  const event = options.event ?? "snapshot";
  let closed = false;
  let unsubscribe: (() => void) | undefined;
  const { wake, sleep, clear } = wakeableSleep();

  return new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (text: string) => {
        if (!closed) controller.enqueue(encoder.encode(text));
      };
      let last: string | undefined;
      let sentAt = Date.now();
      try {
        if (source.subscribe) unsubscribe = await source.subscribe(wake);
        send("retry: 1000\n\n");
        while (!closed) {
          clear(); // this read sees everything committed before it
          const snapshot = await source.read();
          if (snapshot !== last) {
            send(formatSse({ event, data: snapshot }));
            last = snapshot;
            sentAt = Date.now();
          } else if (Date.now() - sentAt >= keepaliveMs) {
            send(": keepalive\n\n");
            sentAt = Date.now();
          }
          await sleep(Math.min(pollMs, keepaliveMs));
        }
      } catch (error) {
        send(streamErrorEvent(error, options.log));
      } finally {
        unsubscribe?.();
        if (!closed) {
          closed = true;
          controller.close();
        }
      }
    },
    cancel() {
      closed = true;
      wake();
    },
  });
}

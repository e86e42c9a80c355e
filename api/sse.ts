/**
 * Server-Sent Events for a job's event log (`GET /v1/jobs/{id}/events`,
 * `Accept: text/event-stream`).
 *
 * Each event is written as `id: <event id>` / `event: <type>` / `data: <json>`; a client that
 * reconnects with `Last-Event-ID: N` receives exactly the events with id > N, in order, once.
 * The stream closes (after a final `event: end`) once the job is terminal and every event up to
 * then is sent: terminal status is read *before* the last page, so an event committed together
 * with the terminal status is never missed. Between pages it sleeps until a wake-up (NOTIFY,
 * when a subscribe hook is given) or the poll interval, and sends a `: keepalive` comment when
 * idle so proxies keep the connection.
 */
import { createLogger, type Logger } from "../jobs/mod.ts";

/** One event as sent on the wire (the `data:` JSON). */
export interface WireEvent {
  /** Monotonic per job; also the SSE `id:`. */
  id: number;
  type: string;
  attempt: number;
  data: unknown;
  /** ISO 8601. */
  created_at: string;
}

/** What the stream reads from. */
export interface EventSource {
  /** Events with id > `afterId`, ascending, at most `limit`. */
  page(afterId: number, limit: number): Promise<WireEvent[]>;
  /** True when the job is in a terminal state. */
  isTerminal(): Promise<boolean>;
  /**
   * Optional wake-up: calls `wake` when new events may exist; returns an unsubscribe function.
   * Without it the stream polls every `pollMs`.
   */
  subscribe?(wake: () => void): Promise<() => void> | (() => void);
}

/** Timing of {@link sseStream}. */
export interface SseOptions {
  /** Poll interval when no wake-up arrives, ms (default 500). */
  pollMs?: number;
  /** Idle time before a `: keepalive` comment, ms (default 15,000). */
  keepaliveMs?: number;
  /** Events per database read (default 500). */
  pageSize?: number;
  /** Server log of a stream's internal error (default: {@link streamErrorEvent}'s). */
  log?: Logger;
}

/**
 * The `event: error` that ends a stream on an internal error (a database outage, a bug): a
 * generic message and an `error_id`, never the error itself (it may hold SQL text and its
 * parameters). The detail goes to `log` (default: the API's, `service` "api", jobs/logger.ts) as
 * one error line `event stream failed` under the same id; the client reconnects.
 */
export function streamErrorEvent(
  error: unknown,
  log: Logger = createLogger({ service: "api" }),
): string {
  const errorId = crypto.randomUUID();
  log.error("event stream failed", {
    error_id: errorId,
    error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    stack: error instanceof Error ? error.stack : undefined,
  });
  return formatSse({
    event: "error",
    data: JSON.stringify({
      detail:
        "The stream stopped on an internal error; reconnect (with Last-Event-ID) to resume. Quote error_id to the operator.",
      error_id: errorId,
    }),
  });
}

const encoder = new TextEncoder();

/**
 * A sleep that a wake-up cuts short: `sleep(ms)` resolves after `ms` or at the next `wake()`; a
 * wake-up that comes while nobody sleeps is kept, so the next `sleep` returns at once (a NOTIFY
 * that arrives during a read is never lost). `clear()` forgets a kept wake-up (call it just
 * before a read that will see everything committed so far).
 */
export function wakeableSleep(): { wake(): void; sleep(ms: number): Promise<void>; clear(): void } {
  let wakeUp: (() => void) | undefined;
  let pending = false;
  return {
    wake() {
      if (wakeUp) wakeUp();
      else pending = true;
    },
    sleep: (ms) =>
      new Promise<void>((resolve) => {
        if (pending) {
          pending = false;
          return resolve();
        }
        const timer = setTimeout(done, ms);
        function done() {
          clearTimeout(timer);
          wakeUp = undefined;
          resolve();
        }
        wakeUp = done;
      }),
    clear() {
      pending = false;
    },
  };
}

/** Formats one SSE message; `data` lines are split on newlines as the spec requires. */
export function formatSse(event: { id?: number | string; event?: string; data: string }): string {
  let out = "";
  if (event.id !== undefined) out += `id: ${event.id}\n`;
  if (event.event) out += `event: ${event.event}\n`;
  for (const line of event.data.split("\n")) out += `data: ${line}\n`;
  return out + "\n";
}

/** What one read of a live stream gives {@link liveSseStream}. */
export interface SseTick {
  /** Formatted SSE messages to send, in order. */
  messages: string[];
  /** True when the stream is over (after these messages). */
  done?: boolean;
  /** True when more is ready: read again at once, without sleeping. */
  more?: boolean;
}

/** What drives {@link liveSseStream}. */
export interface LiveSseSource {
  /** One read: the messages to send now. */
  tick(): Promise<SseTick>;
  /** Optional wake-up: calls `wake` when a read may find more; returns an unsubscribe function. */
  subscribe?(wake: () => void): Promise<() => void> | (() => void);
}

/**
 * The one loop of the service's live SSE streams (a job's events, the job list): sends
 * `retry: 1000`, then reads (`tick`) and sends until `done` or the client goes away, sleeping
 * between reads until a wake-up or `pollMs`, with a `: keepalive` comment after `keepaliveMs`
 * without a message. A failed read ends the stream with an `event: error` carrying a generic
 * message and an error id ({@link streamErrorEvent}; the detail goes to `log`); clients reconnect.
 */
export function liveSseStream(
  source: LiveSseSource,
  options: {
    pollMs: number;
    keepaliveMs: number;
    /** Server log of a failed read's detail (see {@link streamErrorEvent}). */
    log?: Logger;
  },
): ReadableStream<Uint8Array> {
  const { pollMs, keepaliveMs } = options;
  let closed = false;
  let unsubscribe: (() => void) | undefined;
  const { wake, sleep, clear } = wakeableSleep();

  return new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (text: string) => {
        if (!closed) controller.enqueue(encoder.encode(text));
      };
      let idleSince = Date.now();
      try {
        if (source.subscribe) unsubscribe = await source.subscribe(wake);
        send("retry: 1000\n\n");
        while (!closed) {
          clear(); // this read sees everything committed before it
          const tick = await source.tick();
          tick.messages.forEach(send);
          if (tick.done) break;
          if (tick.more) continue;
          if (tick.messages.length > 0) idleSince = Date.now();
          else if (Date.now() - idleSince >= keepaliveMs) {
            send(": keepalive\n\n");
            idleSince = Date.now();
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

/**
 * Returns the SSE body stream starting after `afterId`. It ends when the job is terminal or the
 * client goes away (stream cancelled). Database errors end the stream with an `event: error`
 * carrying a generic message and an error id (the client reconnects with its Last-Event-ID).
 */
export function sseStream(
  source: EventSource,
  afterId: number,
  options: SseOptions = {},
): ReadableStream<Uint8Array> {
  const pageSize = options.pageSize ?? 500;
  let after = afterId;
  return liveSseStream({
    subscribe: source.subscribe?.bind(source),
    async tick() {
      const terminal = await source.isTerminal(); // read before the page: see module doc
      const events = await source.page(after, pageSize);
      const messages = events.map((e) =>
        formatSse({ id: e.id, event: e.type, data: JSON.stringify(e) })
      );
      if (events.length > 0) after = events[events.length - 1].id;
      if (events.length === pageSize) return { messages, more: true };
      if (terminal) {
        messages.push(formatSse({ event: "end", data: JSON.stringify({ last_event_id: after }) }));
        return { messages, done: true };
      }
      return { messages };
    },
  }, {
    pollMs: options.pollMs ?? 500,
    keepaliveMs: options.keepaliveMs ?? 15_000,
    log: options.log,
  });
}

/** Parses a `Last-Event-ID` header or `?after=` value: a non-negative integer, else undefined. */
export function parseEventId(value: string | null | undefined): number | undefined {
  if (value === null || value === undefined || !/^\d{1,15}$/.test(value.trim())) return undefined;
  return Number(value.trim());
}

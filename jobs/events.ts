/**
 * Job events: an ordered log per job (monotonic bigserial ids, usable as SSE `Last-Event-ID`).
 * Workers append under their fence; a stale worker's append matches nothing. Every append (and
 * every status transition) sends NOTIFY on `JOB_EVENTS_CHANNEL` (`job_events`) with the job id.
 *
 * Idempotency: an append that carries a `key` (unique per job, `UNIQUE(job_id, key)`) is stored
 * once however often it is retried (e.g. after a connection was lost before the answer came
 * back); a retry returns the stored event. Appends without a key are stored on every call.
 */
import type { Queryable } from "./db.ts";
import { type Fence, FenceLostError } from "./errors.ts";
import type { JobEvent } from "./schema.ts";
import { toEvent } from "./_rows.ts";
import { storableJson } from "./_storable.ts";
import { JOB_EVENTS_CHANNEL } from "./queue.ts";

/** Event types: lowercase, `[a-z][a-z0-9_.:-]{0,63}` (also a CHECK constraint). */
export const EVENT_TYPE_PATTERN = /^[a-z][a-z0-9_.:-]{0,63}$/;
/** Largest event payload, in characters of JSON. */
export const MAX_EVENT_DATA_CHARS = 65_536;

const SQL = {
  /**
   * appendEvent: inserts the event only while the fence holds. FOR SHARE waits for a concurrent
   * transition of the job row and re-checks the fence against its new version.
   */
  appendEvent: `with ins as (
      insert into job_events (job_id, attempt, type, data, key)
      select id, attempt, $4::text, $5::jsonb, $6::text from (
        select id, attempt from jobs
        where id = $1::uuid and attempt = $2::int and worker_id = $3::text
          and status in ('running', 'cancelling')
        for share) fenced
      on conflict (job_id, key) do nothing
      returning *),
    evn as (select count(pg_notify('${JOB_EVENTS_CHANNEL}', job_id::text)) as n from ins)
    select ins.* from ins, evn`,
  /** eventByKey: the event an earlier try of a keyed append stored (a new snapshot). */
  eventByKey: `select * from job_events where job_id = $1::uuid and key = $2::text`,
  /** listEvents: a job's events after an id, oldest first. */
  listEvents: `select * from job_events where job_id = $1::uuid and id > $2::bigint
    order by id limit $3::int`,
} as const;

/** Thrown when an event's type or payload is outside its bounds. */
export class InvalidEventError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidEventError";
  }
}

/** Largest idempotency key of an event, in characters (also a CHECK constraint). */
export const MAX_EVENT_KEY_CHARS = 128;

/**
 * Checks an event's type, payload and key (see {@link appendEvent}) and returns its payload as
 * storable JSON. @throws InvalidEventError as {@link appendEvent} does.
 */
export function checkEvent(
  type: string,
  data: Record<string, unknown>,
  key: string | undefined,
): string {
  if (key !== undefined && (key.length === 0 || key.length > MAX_EVENT_KEY_CHARS)) {
    throw new InvalidEventError(
      `Cannot append event "${type}" as its key must have 1-${MAX_EVENT_KEY_CHARS} characters: current length is ${key.length}`,
    );
  }
  if (!EVENT_TYPE_PATTERN.test(type)) {
    throw new InvalidEventError(
      `Cannot append event "${type}" as its type must match ${EVENT_TYPE_PATTERN}`,
    );
  }
  const json = storableJson(data);
  if (json.length > MAX_EVENT_DATA_CHARS) {
    throw new InvalidEventError(
      `Cannot append event "${type}" as its data must be at most ${MAX_EVENT_DATA_CHARS} characters of JSON: current length is ${json.length}`,
    );
  }
  return json;
}

/**
 * Appends an event under the fence and returns it.
 * @param options.key idempotency key, 1–128 characters, unique per job (e.g. a UUID chosen once
 *   before the first try): when an event with this key exists, nothing is written and that event
 *   is returned (also after the fence was lost: it was written while the fence held).
 * @throws InvalidEventError when `type` does not match {@link EVENT_TYPE_PATTERN}, `data` is
 *   larger than {@link MAX_EVENT_DATA_CHARS} or `key` is empty or too long.
 * @throws FenceLostError when the fence no longer matches (nothing is written).
 */
export async function appendEvent(
  db: Queryable,
  fence: Fence,
  type: string,
  data: Record<string, unknown> = {},
  options: { key?: string } = {},
): Promise<JobEvent> {
  const { key } = options;
  const json = checkEvent(type, data, key);
  const rows = await db.query(SQL.appendEvent, [
    fence.jobId,
    fence.attempt,
    fence.workerId,
    type,
    json,
    key ?? null,
  ]);
  if (rows.length > 0) return toEvent(rows[0]);
  if (key !== undefined) {
    const [stored] = await db.query(SQL.eventByKey, [fence.jobId, key]);
    if (stored) return toEvent(stored);
  }
  throw new FenceLostError(fence, `append event "${type}"`);
}

/** A job's events with id > `afterId` (default 0), oldest first, at most `limit` (default 100). */
export async function listEvents(
  db: Queryable,
  jobId: string,
  options: { afterId?: number; limit?: number } = {},
): Promise<JobEvent[]> {
  const rows = await db.query(SQL.listEvents, [jobId, options.afterId ?? 0, options.limit ?? 100]);
  return rows.map(toEvent);
}

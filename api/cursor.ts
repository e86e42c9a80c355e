/**
 * Opaque keyset-pagination cursors. A cursor is base64url(JSON) of the sort key of the last row
 * of a page; clients pass it back verbatim as `?cursor=`. Decoding validates the shape with zod,
 * so a tampered cursor is a 400 at field `cursor`, never a SQL error.
 */
import { Buffer } from "node:buffer";
import { z } from "zod";
import { BadRequestError } from "./errors.ts";

/** Encodes a sort key (any JSON value) as an opaque URL-safe cursor string. */
export function encodeCursor(key: unknown): string {
  return Buffer.from(JSON.stringify(key), "utf8").toString("base64url");
}

/**
 * Decodes a cursor made by {@link encodeCursor} and validates it against `schema`.
 * Throws a 400 BadRequestError with path `cursor` when it is not base64url JSON of that shape.
 */
export function decodeCursor<S extends z.ZodType>(cursor: string, schema: S): z.output<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch (error) {
    throw invalidCursor("it is not a cursor this server issued", error);
  }
  const result = schema.safeParse(raw);
  if (!result.success) throw invalidCursor("its contents do not match this listing", result.error);
  return result.data;
}

function invalidCursor(why: string, cause: unknown): BadRequestError {
  return new BadRequestError(`Cannot use the cursor as ${why}`, {
    cause,
    errors: [{ path: "cursor", code: "invalid_cursor", message: `Invalid cursor: ${why}` }],
  });
}

/**
 * The sort key of job listings: newest first, `createdAt` (ISO string with µs kept, as
 * `listJobs` writes it) then id. Both are checked to the format Postgres will cast them to
 * (`timestamptz`, `uuid`): a tampered cursor with any other string failed the cast in SQL (500).
 */
export const JobCursor = z.object({
  t: z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$/).refine(
    // A real instant: `2026-02-30` or `T24:00` parse in JS (rolled over) but not in Postgres.
    (t) => {
      const ms = Date.parse(t);
      return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 19) === t.slice(0, 19);
    },
    { message: "Invalid timestamp" },
  ),
  id: z.uuid(),
}).strict();
/** Decoded {@link JobCursor}. */
export type JobCursor = z.infer<typeof JobCursor>;

/** A bounded page size: `?limit=` 1..max, default `def`. */
export function limitSchema(def: number, max: number) {
  return z.coerce.number().int().min(1).max(max).default(def);
}

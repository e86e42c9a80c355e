/**
 * The database surface both drivers share ({@link Database}: a typed drizzle instance, raw
 * parameterised SQL, transactions, LISTEN/NOTIFY) and its postgres.js driver with drizzle's
 * migrator. `jobs/db.ts` picks a driver; the embedded PGlite driver (`jobs/embedded/pglite.ts`)
 * uses this one too, for processes that connect to a folder's owner over loopback. Nothing here
 * imports either of them, so the dependency runs one way: db.ts → {embedded/, postgres.ts}.
 */
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import * as schema from "./schema.ts";

/** The drizzle instance type shared by both drivers (query builder over {@link schema}). */
export type Orm = PgDatabase<PgQueryResultHKT, typeof schema>;

/** Something that runs one parameterised statement: the database or an open transaction. */
export interface Queryable {
  /**
   * Runs `text` with `$1…$n` bind parameters and returns the rows (column names as in SQL).
   * Pass JSON as a string with a `::jsonb` cast and timestamps as ISO strings or Dates.
   */
  query<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
}

/** An open database (see module doc). */
export interface Database extends Queryable {
  /** `postgres` (postgres.js over DATABASE_URL) or `pglite` (embedded). */
  readonly driver: "postgres" | "pglite";
  /** Typed drizzle query builder over the schema. */
  readonly orm: Orm;
  /** Runs `fn` in one transaction; commits when it resolves, rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Subscribes to a NOTIFY channel; resolves to an unsubscribe function. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  /** Sends `NOTIFY channel, payload` (delivered to listeners in every process). */
  notify(channel: string, payload: string): Promise<void>;
  /** Closes every connection (idempotent). */
  close(): Promise<void>;
}

/** Folder of the drizzle-kit migrations, next to `jobs/`. */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../migrations", import.meta.url));

/** Advisory-lock key serialising concurrent migrators on one Postgres database. */
const MIGRATION_LOCK_KEY = 0x5eed_0001;

/**
 * Opens postgres.js on `url` after migrating (used by `openDatabase` and the embedded driver).
 * @param extra.prepare false for servers where clients share one session (embedded PGlite).
 * @param extra.onclose called when a pooled connection closes (its id).
 */
export async function openPostgres(
  url: string,
  max: number,
  extra: { prepare?: boolean; onclose?: (connectionId: number) => void } = {},
): Promise<Database> {
  // Migrate on one dedicated connection holding an advisory lock, so that several processes
  // starting at once apply each migration exactly once.
  const lockSql = postgres(url, { max: 1, onnotice: () => {}, prepare: extra.prepare });
  try {
    await lockSql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`;
    await migratePostgres(drizzlePostgres({ client: lockSql }), {
      migrationsFolder: MIGRATIONS_DIR,
    });
    await lockSql`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`;
  } finally {
    await lockSql.end();
  }
  const sql = postgres(url, { max, onnotice: () => {}, ...extra });
  const orm = drizzlePostgres({ client: sql, schema }) as unknown as Orm;
  // Named prepared statements, cached per connection: postgres.js's `unsafe` otherwise sends each
  // parameterised statement as Parse+Describe, waits, then Bind+Execute (two round trips, and a
  // parse and plan every time). Off where clients share one session (embedded PGlite).
  const prepare = extra.prepare !== false;
  const run =
    (q: postgres.Sql | postgres.TransactionSql) => <T>(text: string, params: unknown[] = []) => {
      const args = params as postgres.ParameterOrJSON<never>[];
      return q.unsafe(text, args, { prepare }) as unknown as Promise<T[]>;
    };
  let closed = false;
  return {
    driver: "postgres",
    orm,
    query: run(sql),
    transaction: <T>(fn: (tx: Queryable) => Promise<T>) =>
      sql.begin((tx) => fn({ query: run(tx) })) as Promise<T>,
    async listen(channel, onPayload) {
      const sub = await sql.listen(channel, onPayload);
      return async () => await sub.unlisten();
    },
    async notify(channel, payload) {
      await sql`select pg_notify(${channel}, ${payload})`;
    },
    async close() {
      if (closed) return;
      closed = true;
      await sql.end({ timeout: 5 });
    },
  };
}

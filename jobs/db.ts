/**
 * The database connection: real Postgres through postgres.js when `DATABASE_URL` is set, otherwise
 * embedded PGlite in `${SEED_DATA_DIR ?? ".seed"}/pg`. Either way drizzle's migrator applies
 * `migrations/` on open, and callers get one {@link Database} with the same surface: a typed
 * drizzle instance (`orm`), raw parameterised SQL (`query`, used by the queue's named statements),
 * transactions, and LISTEN/NOTIFY.
 *
 * PGlite is one connection inside one process. The first process to open a data folder serves it
 * to later ones over the wire protocol on loopback (see `openPglite`), so every process started
 * in one `SEED_DATA_DIR` shares one database; the first must outlive the others. For production
 * and for many workers, use real Postgres (`DATABASE_URL`).
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import * as schema from "./schema.ts";
import { openPglite } from "./_embedded.ts";

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

/** Options of {@link openDatabase}; each defaults to the environment variable it names. */
export interface OpenOptions {
  /**
   * Postgres URL (default `DATABASE_URL`); when absent, embedded PGlite is used. An empty string
   * forces the embedded database even when `DATABASE_URL` is set.
   */
  url?: string;
  /** Data folder of embedded PGlite (`SEED_DATA_DIR`, default `.seed`); the database is in `pg/`. */
  dataDir?: string;
  /** Pool size for postgres.js (default 10). */
  maxConnections?: number;
}

/**
 * Thrown when the embedded database of a data folder cannot be shared: its owner (another live
 * process, or this one opening it twice) does not serve it.
 */
export class EmbeddedDatabaseBusyError extends Error {
  /** Pid of the process that holds the database. */
  readonly pid: number;
  /** The PGlite data folder. */
  readonly dir: string;
  constructor(dir: string, pid: number, cause?: unknown) {
    super(
      `Cannot open the embedded database in ${dir} as its owner must serve it: process ${pid} holds it but does not answer (set DATABASE_URL to share a Postgres server among processes)`,
      { cause },
    );
    this.name = "EmbeddedDatabaseBusyError";
    this.pid = pid;
    this.dir = dir;
  }
}

/** Folder of the drizzle-kit migrations, next to `jobs/`. */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../migrations", import.meta.url));

/** Advisory-lock key serialising concurrent migrators on one Postgres database. */
const MIGRATION_LOCK_KEY = 0x5eed_0001;

/** Returns `SEED_DATA_DIR` or `.seed` (relative to the working directory). */
export function dataDirFromEnv(): string {
  return Deno.env.get("SEED_DATA_DIR") || ".seed";
}

/**
 * Opens the database named by `options` (or `DATABASE_URL` / `SEED_DATA_DIR`) and applies pending
 * migrations.
 * @throws EmbeddedDatabaseBusyError when the PGlite folder is held by another live process.
 */
export async function openDatabase(options: OpenOptions = {}): Promise<Database> {
  const url = options.url ?? (Deno.env.get("DATABASE_URL") || undefined);
  if (url) return await openPostgres(url, options.maxConnections ?? 10);
  return await openPglite(
    join(options.dataDir ?? dataDirFromEnv(), "pg"),
    options.maxConnections ?? 10,
  );
}

/**
 * Opens postgres.js on `url` after migrating (internal: `openDatabase` and the embedded driver).
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

/**
 * The database connection: real Postgres through postgres.js when `DATABASE_URL` is set, otherwise
 * embedded PGlite in `${SEED_DATA_DIR ?? ".seed"}/pg`. Either way drizzle's migrator applies
 * `migrations/` on open, and callers get one {@link Database} with the same surface: a typed
 * drizzle instance (`orm`), raw parameterised SQL (`query`, used by the queue's named statements),
 * transactions, and LISTEN/NOTIFY.
 *
 * PGlite is one connection inside one process. The first process to open a data folder serves it
 * to later ones over the wire protocol on loopback (see `jobs/embedded/pglite.ts`), so every
 * process started in one `SEED_DATA_DIR` shares one database; the first must outlive the others.
 * For production and for many workers, use real Postgres (`DATABASE_URL`).
 */
import { join } from "node:path";
import { openPglite } from "./embedded/mod.ts";
import { type Database, openPostgres } from "./postgres.ts";

export { type Database, MIGRATIONS_DIR, type Orm, type Queryable } from "./postgres.ts";
export { EmbeddedDatabaseBusyError } from "./embedded/mod.ts";

/** Options of {@link openDatabase}; each defaults to the environment variable it names. */
export interface OpenOptions {
  /**
   * Postgres URL (default `DATABASE_URL`); when absent, embedded PGlite is used. An empty string
   * forces the embedded database even when `DATABASE_URL` is set.
   */
  url?: string;
  /**
   * Data folder of embedded PGlite (`SEED_DATA_DIR`, default `.seed`); the database is in `pg/`.
   */
  dataDir?: string;
  /** Pool size for postgres.js (default 10). */
  maxConnections?: number;
}

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

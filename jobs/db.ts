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
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { PGlite } from "@electric-sql/pglite";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import * as schema from "./schema.ts";
import { type PgliteServer, servePglite } from "./_pglite_server.ts";

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

async function openPostgres(
  url: string,
  max: number,
  extra: { prepare?: boolean } = {},
): Promise<Database> {
  // Migrate on one dedicated connection holding an advisory lock, so that several processes
  // starting at once apply each migration exactly once.
  const lockSql = postgres(url, { max: 1, onnotice: () => {}, ...extra });
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
  const run =
    (q: postgres.Sql | postgres.TransactionSql) => <T>(text: string, params: unknown[] = []) =>
      q.unsafe(text, params as postgres.ParameterOrJSON<never>[]) as unknown as Promise<T[]>;
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

function isAlive(pid: number): boolean {
  if (pid === Deno.pid) return true;
  // Linux: a live process has /proc/PID; elsewhere assume alive (the safe answer).
  return existsSync("/proc/self") ? existsSync(`/proc/${pid}`) : true;
}

/** Contents of `${dir}.lock`: the owning pid, and its server's port once it serves. */
interface LockInfo {
  pid: number;
  port?: number;
}

function readLock(lockPath: string): LockInfo | undefined {
  try {
    const info = JSON.parse(Deno.readTextFileSync(lockPath));
    return Number.isInteger(info?.pid) ? info : undefined;
  } catch {
    return undefined; // absent, or being written
  }
}

/**
 * Takes `${dir}.lock` (O_EXCL), replacing a lock left by a dead process.
 * @returns the lock path when taken, or the live owner's lock info.
 */
function takeLock(dir: string): { lockPath: string; owner?: LockInfo } {
  const lockPath = `${dir}.lock`;
  for (let i = 0; i < 20; i++) {
    try {
      const f = Deno.openSync(lockPath, { write: true, createNew: true });
      f.writeSync(new TextEncoder().encode(JSON.stringify({ pid: Deno.pid })));
      f.close();
      return { lockPath };
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
      const info = readLock(lockPath);
      if (info && isAlive(info.pid)) return { lockPath, owner: info };
      if (info) Deno.removeSync(lockPath); // stale: its process is gone
    }
  }
  throw new Error(`Cannot lock the embedded database as ${lockPath} keeps reappearing`);
}

/**
 * Opens the embedded database of a data folder. The first process opens PGlite, migrates, and
 * serves it on loopback (`_pglite_server.ts`), writing `{pid, port}` to `${dir}.lock`; every
 * later process connects to that server with postgres.js. The owner must outlive the others.
 */
async function openPglite(dir: string, max: number): Promise<Database> {
  mkdirSync(dirname(dir), { recursive: true });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { lockPath, owner } = takeLock(dir);
    if (!owner) return await ownPglite(dir, lockPath);
    if (owner.pid === Deno.pid) throw new EmbeddedDatabaseBusyError(dir, owner.pid);
    if (owner.port !== undefined) {
      try {
        const url = `postgres://postgres@127.0.0.1:${owner.port}/postgres`;
        const db = await openPostgres(url, Math.min(max, 4), { prepare: false });
        return { ...db, driver: "pglite" };
      } catch (e) {
        if (!isAlive(owner.pid)) continue; // the owner died meanwhile: take over
        throw new EmbeddedDatabaseBusyError(dir, owner.pid, e);
      }
    }
    // The owner is still starting (migrating) and has not written its port yet.
    if (Date.now() > deadline) throw new EmbeddedDatabaseBusyError(dir, owner.pid);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function ownPglite(dir: string, lockPath: string): Promise<Database> {
  let pg: PGlite;
  let server: PgliteServer;
  try {
    pg = await PGlite.create(dir);
    const orm = drizzlePglite({ client: pg, schema });
    await migratePglite(orm, { migrationsFolder: MIGRATIONS_DIR });
    server = servePglite(pg);
    Deno.writeTextFileSync(lockPath, JSON.stringify({ pid: Deno.pid, port: server.port }));
  } catch (e) {
    Deno.removeSync(lockPath);
    throw e;
  }
  const orm = drizzlePglite({ client: pg, schema }) as unknown as Orm;
  let closed = false;
  return {
    driver: "pglite",
    orm,
    query: async <T>(text: string, params: unknown[] = []) =>
      (await pg.query<T>(text, params)).rows,
    transaction: <T>(fn: (tx: Queryable) => Promise<T>) =>
      pg.transaction((tx) =>
        fn({
          query: async <R>(text: string, params: unknown[] = []) =>
            (await tx.query<R>(text, params)).rows,
        })
      ),
    listen: (channel, onPayload) => server.listen(channel, onPayload),
    async notify(channel, payload) {
      await pg.query("select pg_notify($1, $2)", [channel, payload]);
    },
    async close() {
      if (closed) return;
      closed = true;
      await server.stop();
      await pg.close();
      try {
        Deno.removeSync(lockPath);
      } catch { /* already removed */ }
    },
  };
}

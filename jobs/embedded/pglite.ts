/**
 * The embedded database of a data folder, shared by every process started there.
 *
 * - `${dir}.lock` (created exclusively) names the owner: `{pid, port}`. The first process takes
 *   it, opens PGlite in `dir`, applies migrations, serves the database on loopback
 *   (`_pglite_server.ts`) and writes the port. A lock whose process is gone (no such pid, or a
 *   pid now used by a process with another start time) is stale and replaced.
 * - A later process connects to the owner's port with postgres.js (`prepare: false`, as the
 *   clients share one session), after waiting for an owner that is still migrating. It logs in
 *   with the folder's password, a random secret in `${dir}.secret` (mode 0600; see
 *   `_secret_file.ts`): the server refuses anyone else on the machine.
 * - Failover: when the owner exits, a connected process notices (a connection error on its next
 *   statement, or its connections closing) and opens the folder again: it becomes the owner or
 *   connects to whichever process did. Its `orm`, `query`, `transaction` and `listen`
 *   subscriptions carry over; a statement that failed on the lost connection is retried once.
 */
import { existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import {
  type Database,
  MIGRATIONS_DIR,
  openPostgres,
  type Orm,
  type Queryable,
} from "../postgres.ts";
import * as schema from "../schema.ts";
import { type PgliteServer, servePglite } from "./_pglite_server.ts";
import { readOrCreateSecret } from "./_secret_file.ts";

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

/**
 * Start time of process `pid` in clock ticks since boot (field 22 of `/proc/PID/stat`), or
 * undefined when there is no such process (or no /proc). With the pid it names one process
 * incarnation: a pid alone is reused, e.g. a restarted container's process often gets the pid its
 * SIGKILLed predecessor wrote in the lock.
 */
function processStart(pid: number): string | undefined {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

const SELF_START = processStart(Deno.pid);

/**
 * Whether the process that wrote a lock still runs. Linux: its pid must exist with the recorded
 * start time (a lock without one, from an older version, is judged by the pid alone, and this
 * process's own pid counts as alive); elsewhere assume alive (the safe answer).
 */
function isAlive(info: { pid: number; start?: string }): boolean {
  if (!existsSync("/proc/self")) return true;
  if (info.pid === Deno.pid) return info.start === undefined || info.start === SELF_START;
  const start = processStart(info.pid);
  return start !== undefined && (info.start === undefined || info.start === start);
}

/**
 * Contents of `${dir}.lock`: the owning pid and its start time (see {@link processStart}), and
 * its server's port once it serves.
 */
interface LockInfo {
  pid: number;
  start?: string;
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
      f.writeSync(new TextEncoder().encode(JSON.stringify({ pid: Deno.pid, start: SELF_START })));
      f.close();
      return { lockPath };
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
      const info = readLock(lockPath);
      if (info && isAlive(info)) return { lockPath, owner: info };
      if (info) Deno.removeSync(lockPath); // stale: its process is gone
    }
  }
  throw new Error(`Cannot lock the embedded database as ${lockPath} keeps reappearing`);
}

/** Opens the embedded database of `dir` as its owner or as a client of the owner (module doc). */
export async function openPglite(dir: string, max: number): Promise<Database> {
  mkdirSync(dirname(dir), { recursive: true });
  const hooks = { ownerLost: () => {} };
  const inner = await connect(dir, max, () => hooks.ownerLost());
  if (inner.owned) return inner.db;
  const failover = new Failover(dir, max, inner.db);
  hooks.ownerLost = () => failover.ownerLost();
  return failover.database();
}

async function connect(
  dir: string,
  max: number,
  onConnectionClosed: () => void,
): Promise<{ db: Database; owned: boolean }> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { lockPath, owner } = takeLock(dir);
    if (!owner) return { db: await ownPglite(dir, lockPath), owned: true };
    if (owner.pid === Deno.pid) throw new EmbeddedDatabaseBusyError(dir, owner.pid);
    if (owner.port !== undefined) {
      try {
        const password = readOrCreateSecret(`${dir}.secret`);
        const url = `postgres://postgres:${password}@127.0.0.1:${owner.port}/postgres`;
        const db = await openPostgres(url, Math.min(max, 4), {
          prepare: false,
          onclose: onConnectionClosed,
        });
        return { db: { ...db, driver: "pglite" }, owned: false };
      } catch (e) {
        if (!isAlive(owner)) continue; // the owner died meanwhile: take over
        throw new EmbeddedDatabaseBusyError(dir, owner.pid, e);
      }
    }
    // The owner is still starting (migrating) and has not written its port yet.
    if (Date.now() > deadline) throw new EmbeddedDatabaseBusyError(dir, owner.pid);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function isConnectionLost(e: unknown): boolean {
  const code = (e as { code?: string })?.code ?? "";
  return ["ECONNREFUSED", "ECONNRESET", "EPIPE"].includes(code) || code.startsWith("CONNECTION_");
}

/** A client of another process's embedded database that takes over when that process exits. */
class Failover {
  #current: Database;
  #swapping: Promise<void> | undefined;
  #closed = false;
  #subs = new Set<
    { channel: string; fn: (payload: string) => void; unlisten?: () => Promise<void> }
  >();

  constructor(readonly dir: string, readonly max: number, first: Database) {
    this.#current = first;
  }

  /** Called when a pooled connection closes: re-open when the owner is gone. */
  ownerLost(): void {
    if (this.#closed || this.#swapping) return;
    const info = readLock(`${this.dir}.lock`);
    if (info && isAlive(info) && info.pid !== Deno.pid) return; // a normal reconnect
    this.#swap().catch(() => {/* the next statement retries */});
  }

  #swap(): Promise<void> {
    this.#swapping ??= (async () => {
      const old = this.#current;
      await old.close().catch(() => {});
      const next = await connect(this.dir, this.max, () => this.ownerLost());
      this.#current = next.db;
      for (const s of this.#subs) s.unlisten = await next.db.listen(s.channel, s.fn);
    })().finally(() => this.#swapping = undefined);
    return this.#swapping;
  }

  async #retry<T>(fn: (db: Database) => Promise<T>): Promise<T> {
    await this.#swapping;
    try {
      return await fn(this.#current);
    } catch (e) {
      if (this.#closed || !isConnectionLost(e)) throw e;
      await this.#swap();
      return await fn(this.#current);
    }
  }

  database(): Database {
    const current = () => this.#current;
    // The ORM forwards to whichever connection is current, so references to it stay valid.
    const orm = new Proxy({} as Orm, {
      get(_target, prop) {
        const target = current().orm as unknown as Record<string | symbol, unknown>;
        const value = target[prop];
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    return {
      driver: "pglite",
      orm,
      query: <T>(text: string, params?: unknown[]) =>
        this.#retry((db) => db.query<T>(text, params)),
      transaction: <T>(fn: (tx: Queryable) => Promise<T>) =>
        this.#retry((db) => db.transaction(fn)),
      listen: async (channel, fn) => {
        const sub: { channel: string; fn: typeof fn; unlisten?: () => Promise<void> } = {
          channel,
          fn,
        };
        this.#subs.add(sub);
        sub.unlisten = await this.#current.listen(channel, fn);
        return async () => {
          this.#subs.delete(sub);
          await sub.unlisten?.();
        };
      },
      notify: (channel, payload) => this.#retry((db) => db.notify(channel, payload)),
      close: async () => {
        this.#closed = true;
        await this.#swapping?.catch(() => {});
        await this.#current.close();
      },
    };
  }
}

async function ownPglite(dir: string, lockPath: string): Promise<Database> {
  let pg: PGlite;
  let server: PgliteServer;
  try {
    pg = await PGlite.create(dir);
    const orm = drizzlePglite({ client: pg, schema });
    await migratePglite(orm, { migrationsFolder: MIGRATIONS_DIR });
    server = servePglite(pg, { password: readOrCreateSecret(`${dir}.secret`) });
    Deno.writeTextFileSync(
      lockPath,
      JSON.stringify({ pid: Deno.pid, start: SELF_START, port: server.port }),
    );
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

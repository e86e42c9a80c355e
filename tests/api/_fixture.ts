/**
 * Fixture of the API tests: a fresh migrated database and a throwaway S3 bucket (tests/_harness),
 * two tenants with a key each, and the app from `createApp`. `req` sends a request through
 * `app.request()`.
 */
import type { Hono } from "hono";
import { createKey, ensureTenant, type TenantRef } from "../../jobs/api_keys.ts";
import { createApp } from "../../api/app.ts";
import type { AppOptions } from "../../api/deps.ts";
import type { ArtifactStore } from "../../jobs/store.ts";
import type { Database, Job } from "../../jobs/mod.ts";
import { claimJob } from "../../jobs/mod.ts";
import { openTestDatabase } from "../_harness/fixtures.ts";
import { startTestStore } from "../_harness/s3.ts";

/** What each API test file works with. */
export interface ApiFixture {
  db: Database;
  url: string;
  app: Hono;
  keyA: string;
  keyB: string;
  tenantA: TenantRef;
  tenantB: TenantRef;
  /** The artifact store on a throwaway s3rver bucket. */
  store: ArtifactStore;
  /** Environment naming that server and bucket (for subprocesses). */
  s3Env: Record<string, string>;
  /** The S3 server's folder (s3rver keeps multipart uploads in `{bucket}/._S3rver_uploads/`). */
  s3Directory: string;
  /** Closes the database and drops it; stops the S3 server. */
  close(): Promise<void>;
}

/** Opens a fresh database, creates tenants A and B with one key each, and builds the app. */
export async function startApiFixture(options: Partial<AppOptions> = {}): Promise<ApiFixture> {
  const t = await openTestDatabase();
  const s3 = await startTestStore();
  const store = s3.store;
  const tenantA = await ensureTenant(t.db, `a-${crypto.randomUUID()}`);
  const tenantB = await ensureTenant(t.db, `b-${crypto.randomUUID()}`);
  const a = await createKey(t.db, tenantA.name);
  const b = await createKey(t.db, tenantB.name);
  const app = createApp({ db: t.db, store, authCacheMs: 0, ...options });
  return {
    db: t.db,
    url: t.url,
    app,
    keyA: a.key,
    keyB: b.key,
    tenantA,
    tenantB,
    store,
    s3Env: s3.env,
    s3Directory: s3.directory,
    async close() {
      await t.close();
      await s3.close();
    },
  };
}

/** Options of {@link req}. */
export interface ReqOptions {
  key?: string;
  json?: unknown;
  body?: string;
  headers?: Record<string, string>;
}

/** Sends a request through the app (no server). */
export async function req(
  app: Hono,
  method: string,
  path: string,
  options: ReqOptions = {},
): Promise<Response> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  let body = options.body;
  // A raw body is sent as JSON unless the test names another type (as a client would).
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) {
    headers["content-type"] = "application/json";
  }
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers["content-type"] = "application/json";
  }
  return await app.request(path, { method, headers, body });
}

/**
 * Claims the next queued cpu job as a worker and checks it is `jobId` (submit it with priority
 * 1000 so it goes ahead of the file's other queued jobs).
 */
export async function claimAs(db: Database, jobId: string, workerId = "w-test"): Promise<Job> {
  const job = await claimJob(db, { workerId, device: "cpu", leaseMs: 60_000 });
  if (!job || job.id !== jobId) {
    throw new Error(`Cannot claim job ${jobId} as it must be next in the queue: got ${job?.id}`);
  }
  return job;
}

/** Submits `spec` (priority 1000) as the key's tenant and claims it as a worker. */
export async function runningJob(
  fx: ApiFixture,
  key: string,
  spec: Record<string, unknown> = { env: { id: "sokoban" } },
): Promise<Job> {
  const res = await req(fx.app, "POST", "/v1/jobs", { key, json: { ...spec, priority: 1000 } });
  if (res.status !== 201) throw new Error(`Cannot submit the test job: ${await res.text()}`);
  return await claimAs(fx.db, (await res.json()).id);
}

/**
 * Backends of `db`'s database waiting for a lock while running a statement that holds `text`
 * (`pg_stat_activity`); for tests that order concurrent requests behind a held row lock.
 */
export async function waitingOn(db: Database, text: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity
     where datname = current_database() and wait_event_type = 'Lock'
       and position($1::text in query) > 0`,
    [text],
  );
  return Number(row.n);
}

/**
 * Resolves once `check` is true, polling (at most `tries` calls; no timers).
 * @throws Error naming `what` when `check` stays false.
 */
export async function until(
  what: string,
  check: () => Promise<boolean>,
  tries = 5000,
): Promise<void> {
  for (let i = 0; i < tries; i++) if (await check()) return;
  throw new Error(`Cannot go on as ${what} must happen: it did not within ${tries} polls`);
}

/**
 * Gives the queued job `from` the id `to` (its submit event dropped: events refer to the id), so a
 * test can hold jobs whose ids share a start, as two random ids do once in 2^32 at 8 digits.
 */
export async function renameJobId(db: Database, from: string, to: string): Promise<void> {
  await db.query("delete from job_events where job_id = $1", [from]);
  await db.query("update jobs set id = $2 where id = $1", [from, to]);
}

/**
 * Outages are waits: with real Postgres stopped (its own throwaway cluster, so other test files
 * are not disturbed) or the S3 server stopped mid-job, the API answers 503 with `Retry-After`
 * (problem+json, never 500), and two real worker processes — each running a reaper, with a lease
 * shorter than the outage — finish the job on its first attempt with every step once.
 */
import assert from "node:assert/strict";
import { createKey, ensureTenant } from "../../../jobs/api_keys.ts";
import { createApp } from "../../../api/app.ts";
import {
  createLogger,
  listCheckpoints,
  listEvents,
  listMetrics,
  listSkillLibraries,
  openDatabase,
  openStore,
  readCheckpointFile,
  reapExpiredLeases,
  startLocalS3,
  startReaper,
} from "../../../jobs/mod.ts";
import { startPostgres } from "../../../jobs/embedded/postgres_cluster.ts";

const STEPS = 12;

Deno.test("outages of the database and the object store", async (t) => {
  const pg = await startPostgres();
  const db = await openDatabase({ url: pg.url, maxConnections: 10 });
  const s3Dir = await Deno.makeTempDir({ prefix: "seed-s3-" });
  let s3 = await startLocalS3({ directory: s3Dir });
  const s3Env = {
    S3_ENDPOINT: s3.endpoint,
    S3_BUCKET: "outage",
    S3_ACCESS_KEY_ID: "S3RVER",
    S3_SECRET_ACCESS_KEY: "S3RVER",
  };
  const store = await openStore({
    endpoint: s3Env.S3_ENDPOINT,
    bucket: s3Env.S3_BUCKET,
    accessKeyId: s3Env.S3_ACCESS_KEY_ID,
    secretAccessKey: s3Env.S3_SECRET_ACCESS_KEY,
  });
  const tenant = await ensureTenant(db, "outage");
  const { key } = await createKey(db, tenant.name);
  const app = createApp({
    db,
    store,
    authCacheMs: 0,
    log: createLogger({}, { sink: () => {} }),
  });
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, app.fetch);
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`http://127.0.0.1:${server.addr.port}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    });
  const workers = [0, 1].map(() =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_compute_worker.ts", import.meta.url).pathname],
      env: {
        ...s3Env,
        DATABASE_URL: pg.url,
        WORKER_LEASE_MS: "1500",
        REAPER_INTERVAL_MS: "200",
        WORKER_POLL_MS: "100",
        BLOCK_MS: "300",
        ARTIFACTS: "1",
        LOG_LEVEL: "error",
      },
      stdout: "null",
      stderr: "null",
    }).spawn()
  );
  const submit = async () => {
    const res = await api("/v1/jobs", {
      method: "POST",
      body: JSON.stringify({ env: { id: "sokoban" }, steps: STEPS, max_attempts: 1 }),
    });
    assert.equal(res.status, 201, await res.clone().text());
    return (await res.json()).id as string;
  };
  /** Polls the API for the job's status until it is final (a bound, not a measurement). */
  const finalStatus = async (id: string) => {
    for (let i = 0; i < 1200; i++) {
      const res = await api(`/v1/jobs/${id}`);
      if (res.status === 200) {
        const job = await res.json();
        if (["succeeded", "failed", "cancelled"].includes(job.status)) return job;
      } else await res.body?.cancel();
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`Job ${id} did not finish`);
  };
  /** Waits until the job has `n` metrics rows (a bound, not a measurement). */
  const stepsDone = async (id: string, n: number) => {
    for (let i = 0; i < 2400; i++) {
      if ((await listMetrics(db, id)).length >= n) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`Job ${id} did not reach ${n} steps`);
  };
  /** Sends `paths` every 250 ms for `ms` and returns every answer's status and headers. */
  const hammer = async (paths: [string, RequestInit?][], ms: number) => {
    const seen: { status: number; type: string | null; retryAfter: string | null }[] = [];
    const until = Date.now() + ms;
    while (Date.now() < until) {
      for (const [path, init] of paths) {
        const res = await api(path, init);
        const body = await res.json();
        seen.push({
          status: res.status,
          type: res.headers.get("content-type"),
          retryAfter: res.headers.get("retry-after"),
        });
        if (res.status === 503) assert.equal(body.type, "https://seed.dev/problems/unavailable");
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    return seen;
  };
  /** The job's history: every status it passed through, and its metrics steps with attempts. */
  const history = async (id: string) => ({
    statuses: (await listEvents(db, id)).filter((e) => e.type === "status")
      .map((e) => (e.data as { status: string }).status),
    metrics: (await listMetrics(db, id)).map((m) => [m.step, m.values.attempt]),
  });
  const allSteps = [...Array(STEPS).keys()].map((i) => [i + 1, 0]);
  try {
    await t.step(
      "Postgres stopped for over three leases: the API answers 503 and the job finishes on its first attempt",
      async () => {
        const id = await submit();
        await stepsDone(id, 2);
        // A third reaper, in this process, scans every 100 ms through the outage.
        const reaper = startReaper(db, { intervalMs: 100 });
        await pg.pause();
        const seen = await hammer([
          [`/v1/jobs/${id}`],
          ["/v1/jobs"],
          ["/v1/jobs", { method: "POST", body: '{"env":{"id":"sokoban"}}' }],
        ], 5_000);
        await pg.resume();
        // A reaper on a fresh connection scans at once, before any worker could heartbeat: the
        // lease expired seconds ago on the database's clock, yet the restart's grace keeps it.
        const fresh = await openDatabase({ url: pg.url, maxConnections: 1 });
        try {
          assert.deepEqual(await reapExpiredLeases(fresh), []);
        } finally {
          await fresh.close();
        }
        assert.ok(seen.length >= 6);
        for (const s of seen) {
          assert.deepEqual(s, {
            status: 503,
            type: "application/problem+json",
            retryAfter: "5",
          });
        }
        const job = await finalStatus(id);
        await reaper.stop();
        assert.equal(job.status, "succeeded", job.error);
        assert.equal(job.attempt, 0);
        assert.deepEqual(await history(id), {
          statuses: ["queued", "running", "succeeded"],
          metrics: allSteps,
        });
      },
    );

    await t.step(
      "the S3 server stopped mid-job: uploads are retried, downloads answer 503, the job goes on",
      async () => {
        const id = await submit();
        await stepsDone(id, 2);
        const port = s3.port;
        await s3.stop();
        const seen = await hammer([[`/v1/jobs/${id}/skills?step=1`]], 3_000);
        s3 = await startLocalS3({ directory: s3Dir, port });
        assert.ok(seen.length >= 3);
        for (const s of seen) {
          assert.deepEqual(s, {
            status: 503,
            type: "application/problem+json",
            retryAfter: "5",
          });
        }
        const job = await finalStatus(id);
        assert.equal(job.status, "succeeded", job.error);
        assert.deepEqual(await history(id), {
          statuses: ["queued", "running", "succeeded"],
          metrics: allSteps,
        });
        const checkpoints = await listCheckpoints(db, id);
        assert.deepEqual(checkpoints.map((c) => c.step), allSteps.map(([s]) => s));
        for (const c of checkpoints) {
          const state = JSON.parse(
            new TextDecoder().decode(await readCheckpointFile(store, c, "state.json")),
          );
          assert.deepEqual(state, { step: c.step, attempt: 0 });
        }
        assert.equal((await listSkillLibraries(db, id)).length, STEPS);
      },
    );
  } finally {
    // Every stage is bounded, and one that runs past its bound says so on stderr: a cleanup that
    // waited for ever once held CI until its time limit with no word of what it waited on.
    for (const [i, w] of workers.entries()) {
      // SIGTERM drains; a second signal exits at once (workers/main.ts); SIGKILL is the backstop.
      for (
        const [signal, ms] of [["SIGTERM", 20_000], ["SIGTERM", 10_000], ["SIGKILL", 0]] as const
      ) {
        try {
          w.kill(signal);
        } catch { /* exited */ }
        if (signal === "SIGKILL" || await settlesWithin(w.status, ms)) break;
        console.error(`outage test cleanup: worker ${i} did not exit within ${ms} ms of ${signal}`);
      }
      await w.status;
    }
    const stages: [string, () => Promise<unknown>][] = [
      ["the API server's shutdown", () => server.shutdown()],
      ["the store's close", () => store.close()],
      ["the S3 server's stop", () => s3.stop()],
      ["the database's close", () => db.close()],
      ["Postgres's stop", () => pg.stop()],
    ];
    for (const [what, stage] of stages) {
      if (!await settlesWithin(stage(), 20_000)) {
        console.error(`outage test cleanup: ${what} did not finish within 20 s; going on`);
      }
    }
    await Deno.remove(s3Dir, { recursive: true }).catch(() => {});
  }
});

/** True when `promise` settles (either way) within `ms`; its timer never outlives it. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((r) => timer = setTimeout(() => r(false), ms));
  try {
    return await Promise.race([promise.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

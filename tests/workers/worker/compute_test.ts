import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  cancelJob,
  createLogger,
  getJob,
  type Job,
  listCheckpoints,
  listEvents,
  listMetrics,
  startReaper,
  submitJob,
} from "../../../jobs/mod.ts";
import { HandlerRegistry, Worker } from "../../../workers/worker/mod.ts";
import { createTenant, openTestDatabase, testSpec } from "../../_harness/fixtures.ts";
import { logRecords } from "../../_harness/proc.ts";
import { startTestStore } from "../../_harness/s3.ts";

const HANDLER = new URL("./_blocking_handler.ts", import.meta.url);

Deno.test("handlers in compute processes", async (t) => {
  const { db, url, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  const reload = async (job: Job) => (await getJob(db, { tenantId, jobId: job.id }))!;
  /** Polls the job until `done(job)` or `boundMs` passes (a bound, not a measurement). */
  const waitFor = async (
    job: Job,
    done: (j: Job) => boolean | Promise<boolean>,
    boundMs = 60_000,
  ) => {
    const until = Date.now() + boundMs;
    for (;;) {
      const now = await reload(job);
      if (await done(now)) return now;
      if (Date.now() > until) return now;
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  /** A worker process (`_compute_worker.ts`) on this test's database and store. */
  const spawnWorker = (env: Record<string, string>) =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_compute_worker.ts", import.meta.url).pathname],
      env: { ...s3.env, DATABASE_URL: url, LOG_LEVEL: "info", ...env },
      stdout: "null",
      stderr: "piped",
    }).spawn();
  try {
    await t.step(
      "a step that blocks its process for three leases keeps the lease and is never requeued",
      async () => {
        const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 2 }) });
        // Two reapers scan on the real clock: the worker's own and one in this process.
        const reaper = startReaper(db, { intervalMs: 100 });
        const child = spawnWorker({
          WORKER_LEASE_MS: "1500",
          REAPER_INTERVAL_MS: "200",
          BLOCK_MS: "4500",
        });
        try {
          const after = await waitFor(
            job,
            (j) => j.status === "succeeded" || j.status === "failed",
          );
          assert.equal(after.status, "succeeded", after.error ?? "");
          assert.equal(after.attempt, 0, "no attempt was spent");
        } finally {
          await reaper.stop();
          child.kill("SIGTERM");
        }
        assert.equal((await child.status).code, 0);
        const statuses = (await listEvents(db, job.id)).filter((e) => e.type === "status")
          .map((e) => (e.data as { status: string }).status);
        assert.deepEqual(statuses, ["queued", "running", "succeeded"], "never requeued");
        const metrics = await listMetrics(db, job.id);
        assert.deepEqual(metrics.map((m) => [m.step, m.values.attempt]), [[1, 0], [2, 0]]);
        const logs = await logRecords(child);
        assert.ok(!logs.some((l) => /blocked the event loop|lease lost/.test(l.msg)));
      },
    );

    await t.step(
      "a step whose checkpoint is 100 MB commits it and reads it back under a 1.5 s lease, never late and never requeued",
      async () => {
        const stateBytes = 100 * 1024 * 1024;
        const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 2 }) });
        const reaper = startReaper(db, { intervalMs: 100 });
        const child = spawnWorker({
          WORKER_LEASE_MS: "1500",
          REAPER_INTERVAL_MS: "200",
          BLOCK_MS: "0",
          STATE_BYTES: String(stateBytes),
        });
        try {
          const after = await waitFor(
            job,
            (j) => j.status === "succeeded" || j.status === "failed",
            120_000,
          );
          assert.equal(after.status, "succeeded", after.error ?? "");
          assert.equal(after.attempt, 0, "no attempt was spent");
        } finally {
          await reaper.stop();
          child.kill("SIGTERM");
        }
        assert.equal((await child.status).code, 0);
        const statuses = (await listEvents(db, job.id)).filter((e) => e.type === "status")
          .map((e) => (e.data as { status: string }).status);
        assert.deepEqual(statuses, ["queued", "running", "succeeded"], "never requeued");
        const checkpoints = await listCheckpoints(db, job.id);
        assert.deepEqual(checkpoints.map((c) => [c.step, c.bytes]), [
          [1, stateBytes],
          [2, stateBytes],
        ]);
        const want = createHash("sha256").update(new Uint8Array(stateBytes).fill(2)).digest("hex");
        assert.equal(checkpoints[1].files[0].sha256, want);
        const logs = await logRecords(child);
        assert.ok(!logs.some((l) => /blocked the event loop|lease lost/.test(l.msg)));
        const scratch = [...Deno.readDirSync(Deno.env.get("TMPDIR") ?? "/tmp")]
          .filter((e) => e.name.startsWith(`seed-compute-${child.pid}-`));
        assert.deepEqual(scratch, [], "the run's scratch folder is removed");
      },
    );

    await t.step(
      "a cancel stops a compute process mid-step at once and nothing of that step is written",
      async () => {
        // Heartbeats every 20 s and a step 2 that never ends: only the cancel notification and
        // stopping the thread can end this job within the 10 s bound below.
        const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 3 }) });
        const child = spawnWorker({
          WORKER_LEASE_MS: "60000",
          REAPER_INTERVAL_MS: "0",
          BLOCK_MS: "0,-1",
        });
        try {
          await waitFor(job, async () => (await listMetrics(db, job.id)).length === 1);
          assert.deepEqual((await listMetrics(db, job.id)).map((m) => m.step), [1]);
          const requestedAt = Date.now();
          assert.equal((await cancelJob(db, { tenantId, jobId: job.id }))?.status, "cancelling");
          const after = await waitFor(job, (j) => j.status === "cancelled", 10_000);
          const tookMs = Date.now() - requestedAt;
          assert.equal(after.status, "cancelled", `still ${after.status} after ${tookMs} ms`);
          assert.deepEqual((await listMetrics(db, job.id)).map((m) => m.step), [1]);
          const events = await listEvents(db, job.id);
          const stepEvents = events.filter((e) => e.type === "step").map((e) => e.data);
          assert.deepEqual(stepEvents, [{ step: 1 }]);
          assert.equal(events.at(-1)?.type, "status");
          assert.deepEqual(events.at(-1)?.data, { status: "cancelled" });
        } finally {
          child.kill("SIGTERM");
        }
        // The control loop is alive and the spinning compute process is gone: the process drains
        // and exits.
        assert.equal((await child.status).code, 0);
        const logs = await logRecords(child);
        assert.ok(logs.some((l) => l.msg === "job cancelled" && l.jobId === job.id));
      },
    );

    await t.step(
      "a handler that throws in its compute process fails the job with its message",
      async () => {
        const registry = new HandlerRegistry();
        registry.register("seed", { module: HANDLER, options: null });
        const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 1 }) });
        const worker = new Worker({
          db,
          store: s3.store,
          registry,
          reaperIntervalMs: 0,
          logger: createLogger({}, { level: "error", sink: () => {} }),
        });
        assert.equal((await worker.runOnce())?.result, "failed");
        assert.match((await reload(job)).error ?? "", /^TypeError: .*null/);
      },
    );
  } finally {
    await s3.close();
    await close();
  }
});

/**
 * A worker process killed (SIGKILL, by pid) between a step's uploads and its commit loses
 * nothing and leaves nothing half-written: every step is either whole (metrics, checkpoint, skill
 * library, `step` event) or absent, and the resumed job ends with every step exactly once.
 */
import assert from "node:assert/strict";
import {
  getJob,
  listEvents,
  listMetrics,
  reapExpiredLeases,
  stepRecord,
  submitJob,
} from "../../../jobs/mod.ts";
import { createTenant, openTestDatabase, testSpec } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";

const STEPS = 6;

Deno.test("a worker killed between a step's uploads and its commit loses nothing", async () => {
  const { db, url, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  const spawnWorker = () =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_compute_worker.ts", import.meta.url).pathname],
      env: {
        ...s3.env,
        DATABASE_URL: url,
        WORKER_LEASE_MS: "60000",
        REAPER_INTERVAL_MS: "0",
        BLOCK_MS: "50",
        ARTIFACTS: "1",
        LOG_LEVEL: "error",
      },
      stdout: "null",
      stderr: "null",
    }).spawn();
  /** Every step is all there or not there at all; returns the committed steps. */
  const wholeSteps = async (jobId: string) => {
    const committed: number[] = [];
    for (let step = 1; step <= STEPS; step++) {
      const r = await stepRecord(db, jobId, step);
      const parts = [r.metrics, r.checkpoint, r.skills, r.events.includes("step")];
      assert.ok(parts.every((p) => p === parts[0]), `step ${step} is half-committed: ${parts}`);
      if (parts[0]) committed.push(step);
    }
    return committed;
  };
  try {
    const { job } = await submitJob(db, {
      tenantId,
      spec: testSpec({ steps: STEPS, max_attempts: 5 }),
    });
    for (const target of [2, 4]) {
      // Kill the worker the moment step `target`'s skill library object lands in the store:
      // its checkpoint objects are uploaded, its rows are not yet committed.
      const watcher = Deno.watchFs(s3.directory, { recursive: true });
      const child = spawnWorker();
      for await (const event of watcher) {
        if (event.paths.some((p) => p.includes(`skills/step-${target}/`))) break;
      }
      child.kill("SIGKILL");
      watcher.close();
      await child.status;
      const committed = await wholeSteps(job.id);
      assert.ok(committed.length < STEPS, "the job was still running when killed");
      const [reaped] = await reapExpiredLeases(db, { now: new Date(Date.now() + 120_000) });
      assert.equal(reaped.id, job.id);
    }
    const child = spawnWorker();
    for (let i = 0; i < 600; i++) {
      if ((await getJob(db, { tenantId, jobId: job.id }))?.status === "succeeded") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill("SIGTERM");
    await child.status;
    const after = (await getJob(db, { tenantId, jobId: job.id }))!;
    assert.equal(after.status, "succeeded");
    assert.equal(after.attempt, 2);
    assert.deepEqual(await wholeSteps(job.id), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual((await listMetrics(db, job.id)).map((m) => m.step), [1, 2, 3, 4, 5, 6]);
    const stepEvents = (await listEvents(db, job.id, { limit: 1000 }))
      .filter((e) => e.type === "step").map((e) => (e.data as { step: number }).step);
    assert.deepEqual(stepEvents, [1, 2, 3, 4, 5, 6], "each step announced exactly once");
  } finally {
    await s3.close();
    await close();
  }
});

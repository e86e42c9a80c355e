import assert from "node:assert/strict";
import { claimJob, submitJob } from "../../jobs/queue.ts";
import { startReaper } from "../../jobs/reaper.ts";
import type { Job } from "../../jobs/schema.ts";
import { createWakeup } from "../../jobs/wakeup.ts";
import { createTenant, openTestDatabase, testSpec } from "../_harness/fixtures.ts";

Deno.test("the reaper service and the wake-up", async (t) => {
  const { db, close } = await openTestDatabase();
  try {
    const tenantId = await createTenant(db);

    await t.step("the reaper's timer requeues a lease that has expired", async () => {
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      await claimJob(db, { workerId: "gone", device: "cpu", leaseMs: 60_000 });
      // Move the lease into the past instead of waiting for it.
      await db.query(
        "update jobs set lease_expires_at = now() - interval '1 second' where id = $1::uuid",
        [job.id],
      );
      let reaped!: (jobs: Job[]) => void;
      const seen = new Promise<Job[]>((r) => reaped = r);
      const reaper = startReaper(db, { intervalMs: 10, onReaped: reaped });
      try {
        const [moved] = await seen;
        assert.equal(moved.id, job.id);
        assert.equal(moved.status, "queued");
        assert.equal(moved.attempt, 1);
      } finally {
        await reaper.stop();
      }
    });

    await t.step("a wake-up falls back to polling and stops when aborted", async () => {
      const wakeup = await createWakeup(db, "gpu");
      try {
        assert.equal(await wakeup.wait(10), "timeout");
        const stop = new AbortController();
        const waiting = wakeup.wait(60_000, stop.signal);
        stop.abort();
        assert.equal(await waiting, "aborted");
        await submitJob(db, { tenantId, spec: testSpec() }); // a cpu job: not for this device
        await submitJob(db, { tenantId, spec: testSpec({ requirements: { device: "gpu" } }) });
        assert.equal(await wakeup.wait(5_000), "notified");
      } finally {
        await wakeup.close();
      }
    });
  } finally {
    await close();
  }
});

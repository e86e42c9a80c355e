import assert from "node:assert/strict";
import {
  claimJob,
  createWakeup,
  EmbeddedDatabaseBusyError,
  fenceOf,
  getJob,
  listMetrics,
  openDatabase,
  openStore,
  recordMetrics,
  submitJob,
  succeedJob,
  tenants,
} from "../../jobs/mod.ts";
import { createLogger, HandlerRegistry, Worker } from "../../workers/worker/mod.ts";
import { countingHandler } from "../workers/worker/_counting_handler.ts";
import { testSpec } from "../_harness/fixtures.ts";

Deno.test("the embedded database (PGlite) runs the same queue", async (t) => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-pglite-" });
  let db = await openDatabase({ dataDir, url: "" });
  try {
    assert.equal(db.driver, "pglite");
    const [tenant] = await db.orm.insert(tenants).values({ name: "local" }).returning();

    await t.step("a second opener of the same folder is refused while it is held", async () => {
      await assert.rejects(openDatabase({ dataDir, url: "" }), EmbeddedDatabaseBusyError);
    });

    await t.step("submit, claim and finish work, and NOTIFY wakes a listener", async () => {
      const wakeup = await createWakeup(db, "cpu");
      const { job } = await submitJob(db, { tenantId: tenant.id, spec: testSpec() });
      assert.equal(await wakeup.wait(5_000), "notified");
      await wakeup.close();
      const claimed = (await claimJob(db, { workerId: "w", device: "cpu", leaseMs: 1_000 }))!;
      assert.equal(claimed.id, job.id);
      await recordMetrics(db, fenceOf(claimed), 0, { reward: 1 });
      const done = await succeedJob(db, fenceOf(claimed));
      assert.equal(done.status, "succeeded");
      assert.ok(done.finishedAt instanceof Date);
      assert.deepEqual((await listMetrics(db, job.id)).map((m) => m.values), [{ reward: 1 }]);
    });

    await t.step("a worker runs a job on the embedded database and object store", async () => {
      const store = await openStore({ dataDir });
      try {
        const registry = new HandlerRegistry();
        registry.register("seed", countingHandler());
        const { job } = await submitJob(db, { tenantId: tenant.id, spec: testSpec({ steps: 2 }) });
        const worker = new Worker({
          db,
          store,
          registry,
          leaseMs: 1_000,
          reaperIntervalMs: 0,
          logger: createLogger({}, { sink: () => {} }),
        });
        assert.equal((await worker.runOnce())?.result, "succeeded");
        assert.equal(
          (await getJob(db, { tenantId: tenant.id, jobId: job.id }))?.status,
          "succeeded",
        );
      } finally {
        await store.close();
      }
    });

    await t.step("the data survives closing and reopening the folder", async () => {
      await db.close();
      db = await openDatabase({ dataDir, url: "" });
      const rows = await db.query<{ n: number }>("select count(*)::int as n from jobs");
      assert.equal(rows[0].n, 2);
    });
  } finally {
    await db.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

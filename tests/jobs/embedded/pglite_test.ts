import assert from "node:assert/strict";
import {
  claimJob,
  createLogger,
  createWakeup,
  EmbeddedDatabaseBusyError,
  fenceOf,
  getJob,
  JOB_EVENTS_CHANNEL,
  listMetrics,
  openDatabase,
  openStore,
  recordMetrics,
  submitJob,
  succeedJob,
  tenants,
} from "../../../jobs/mod.ts";
import { HandlerRegistry, Worker } from "../../../workers/worker/mod.ts";
import { countingHandler } from "../../workers/worker/_counting_handler.ts";
import { testSpec } from "../../_harness/fixtures.ts";

Deno.test("the embedded database (PGlite) runs the same queue", async (t) => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-pglite-" });
  let db = await openDatabase({ dataDir, url: "" });
  try {
    assert.equal(db.driver, "pglite");
    const [tenant] = await db.orm.insert(tenants).values({ name: "local" }).returning();

    await t.step("the same process cannot open a folder twice", async () => {
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

    await t.step(
      "another process in the same folder shares the database and its NOTIFYs",
      async () => {
        const wakeup = await createWakeup(db, "gpu");
        try {
          const child = new Deno.Command(Deno.execPath(), {
            args: [
              "eval",
              `import { openDatabase, submitJob, JobSpecSchema, listEvents } from "${new URL(
                "../../../jobs/mod.ts",
                import.meta.url,
              )}";
             const db = await openDatabase({ dataDir: ${JSON.stringify(dataDir)}, url: "" });
             const spec = JobSpecSchema.parse({ env: { id: "sokoban" }, requirements: { device: "gpu" } });
             const a = await submitJob(db, { tenantId: "${tenant.id}", spec, idempotencyKey: "x" });
             const b = await submitJob(db, { tenantId: "${tenant.id}", spec, idempotencyKey: "x" });
             const events = await listEvents(db, a.job.id);
             console.log(JSON.stringify({ driver: db.driver, id: a.job.id, same: a.job.id === b.job.id, events: events.length }));
             await db.close();`,
            ],
            stdout: "piped",
            stderr: "inherit",
          });
          const out = await child.output();
          assert.ok(out.success);
          const seen = JSON.parse(new TextDecoder().decode(out.stdout));
          assert.deepEqual({ ...seen, id: undefined }, {
            driver: "pglite",
            id: undefined,
            same: true,
            events: 1,
          });
          assert.equal(
            await wakeup.wait(5_000),
            "notified",
            "the child's NOTIFY reached this process",
          );
          const claimed = await claimJob(db, { workerId: "g", device: "gpu", leaseMs: 1_000 });
          assert.equal(claimed?.id, seen.id);
          await succeedJob(db, fenceOf(claimed!));
        } finally {
          await wakeup.close();
        }
      },
    );

    await t.step("a worker process started in the same folder runs a submitted job", async () => {
      const { job } = await submitJob(db, { tenantId: tenant.id, spec: testSpec({ steps: 3 }) });
      let finished!: () => void;
      const done = new Promise<void>((r) => finished = r);
      const unlisten = await db.listen(JOB_EVENTS_CHANNEL, async (id) => {
        if (id !== job.id) return;
        const now = await getJob(db, { tenantId: tenant.id, jobId: job.id });
        if (now?.status === "succeeded") finished();
      });
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          new URL("../../workers/worker/_counting_worker.ts", import.meta.url).pathname,
        ],
        env: {
          SEED_DATA_DIR: dataDir,
          DATABASE_URL: "",
          S3_ENDPOINT: "",
          WORKER_LEASE_MS: "3000",
          WORKER_POLL_MS: "60000",
          STEP_DELAY_MS: "0",
          LOG_LEVEL: "error",
        },
        stdout: "null",
        stderr: "inherit",
      }).spawn();
      try {
        await done;
      } finally {
        child.kill("SIGTERM");
        assert.equal((await child.status).code, 0);
        await unlisten();
      }
      assert.deepEqual((await listMetrics(db, job.id)).map((m) => m.step), [1, 2, 3]);
    });

    await t.step("the data survives closing and reopening the folder", async () => {
      await db.close();
      db = await openDatabase({ dataDir, url: "" });
      const rows = await db.query<{ n: number }>("select count(*)::int as n from jobs");
      assert.equal(rows[0].n, 4);
    });
  } finally {
    await db.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("a process takes over the embedded database when its owner is killed", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-pglite-" });
  const owner = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { openDatabase } from "${new URL("../../../jobs/mod.ts", import.meta.url)}";
       await openDatabase({ dataDir: ${JSON.stringify(dataDir)}, url: "" });
       console.log("ready");
       setInterval(() => {}, 60_000);`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  let db: Awaited<ReturnType<typeof openDatabase>> | undefined;
  try {
    const reader = owner.stdout.pipeThrough(new TextDecoderStream()).getReader();
    assert.match((await reader.read()).value ?? "", /ready/);
    reader.releaseLock();
    db = await openDatabase({ dataDir, url: "" });
    await db.orm.insert(tenants).values({ name: "before" });
    const heard: string[] = [];
    await db.listen("takeover_test", (p) => heard.push(p));
    owner.kill("SIGKILL");
    await owner.status;
    // The next statement finds the owner gone, reopens the folder as its new owner, and retries.
    const rows = await db.query<{ name: string }>("select name from tenants");
    assert.deepEqual(rows.map((r) => r.name), ["before"]);
    const lock = JSON.parse(await Deno.readTextFile(`${dataDir}/pg.lock`));
    assert.equal(lock.pid, Deno.pid);
    await db.notify("takeover_test", "after");
    assert.deepEqual(heard, ["after"], "subscriptions carry over to the new connection");
    assert.equal((await db.orm.select().from(tenants)).length, 1, "the ORM follows too");
  } finally {
    try {
      owner.kill("SIGKILL");
    } catch { /* already gone */ }
    await owner.stdout.cancel().catch(() => {});
    await owner.status;
    await db?.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

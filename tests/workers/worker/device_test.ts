import assert from "node:assert/strict";
import { createLogger, listEvents, submitJob } from "../../../jobs/mod.ts";
import { chooseExecutionProvider } from "../../../workers/engine/mod.ts";
import { HandlerRegistry, Worker } from "../../../workers/worker/mod.ts";
import { createTenant, openTestDatabase, testSpec } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";

Deno.test("a gpu worker's execution provider", async (t) => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  const logs: string[] = [];
  // The real probe, as `deno task worker` runs it with WORKER_DEVICE=gpu.
  const choice = await chooseExecutionProvider(["cuda", "webgpu", "cpu"]);
  const registry = new HandlerRegistry();
  registry.register("seed", { module: new URL("./_provider_handler.ts", import.meta.url) });
  const worker = (device: "cpu" | "gpu") =>
    new Worker({
      db,
      store: s3.store,
      device,
      executionProvider: device === "gpu" ? choice : undefined,
      leaseMs: 5_000,
      reaperIntervalMs: 0,
      registry,
      logger: createLogger({}, { sink: (l) => logs.push(l), level: "debug" }),
    });
  const gpu = worker("gpu");
  let jobId = "";
  try {
    await t.step("a job that requires a gpu is left to gpu workers", async () => {
      const { job } = await submitJob(db, {
        tenantId,
        spec: testSpec({ requirements: { device: "gpu" } }),
      });
      jobId = job.id;
      assert.equal(await worker("cpu").runOnce(), null);
      const run = await gpu.runOnce();
      assert.equal(run?.job.id, job.id);
      assert.equal(run?.result, "succeeded");
    });

    await t.step("the run's first event is `device`, with the skipped providers", async () => {
      const events = await listEvents(db, jobId);
      assert.deepEqual(events.map((e) => e.type), [
        "status",
        "status",
        "device",
        "provider_seen",
        "status",
      ]);
      assert.deepEqual(events[2].data, {
        worker_id: gpu.id,
        device: "gpu",
        execution_provider: choice.provider,
        skipped: choice.skipped.map((s) => ({ execution_provider: s.provider, reason: s.reason })),
      });
      if (choice.provider === "cpu") {
        // No GPU here: the event says why cuda and webgpu were passed over.
        const skipped = events[2].data.skipped as { execution_provider: string; reason: string }[];
        assert.deepEqual(skipped.map((s) => s.execution_provider), ["cuda", "webgpu"]);
        assert.match(skipped[0].reason, /ONNXRUNTIME_NODE_INSTALL=cuda12|CUDA/);
        assert.match(skipped[1].reason, /^no WebGPU adapter: /);
      }
    });

    await t.step("the handler in its compute process gets the same provider", async () => {
      const events = await listEvents(db, jobId);
      assert.deepEqual(events[3].data, { execution_provider: choice.provider });
    });

    await t.step("the worker's start-up log line names the provider", async () => {
      const running = gpu.run();
      gpu.drain(); // it logs its start, claims nothing, and stops
      await running;
      const started = logs.map((l) => JSON.parse(l)).find((l) => l.msg === "worker started");
      assert.equal(started.executionProvider, choice.provider);
      assert.equal(started.device, "gpu");
    });

    await t.step("a cpu worker writes no device event and hands no provider on", async () => {
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      const run = await worker("cpu").runOnce();
      assert.equal(run?.result, "succeeded");
      const events = await listEvents(db, job.id);
      assert.deepEqual(events.map((e) => e.type), ["status", "status", "provider_seen", "status"]);
      assert.deepEqual(events[2].data, { execution_provider: null });
    });
  } finally {
    await s3.close();
    await close();
  }
});

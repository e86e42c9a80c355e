import assert from "node:assert/strict";
import { getJob, listEvents } from "../../../jobs/mod.ts";
import { chooseExecutionProvider } from "../../../workers/engine/mod.ts";
import { createLogger, Worker } from "../../../workers/worker/mod.ts";
import { createTenant, openTestDatabase } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";
import {
  metricsByStep,
  ONE_THREAD,
  runOne,
  submit,
  testWorker,
  tinySpec,
  trainerRegistry,
  untimed,
} from "./_jobs.ts";

Deno.test("a gpu job runs the trainer on the provider its worker chose", async () => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  try {
    // The real probe, as `WORKER_DEVICE=gpu deno task worker` runs it.
    const choice = await chooseExecutionProvider(["cuda", "webgpu", "cpu"]);
    const registry = trainerRegistry(undefined, ONE_THREAD);
    const gpuWorker = new Worker({
      db,
      store: s3.store,
      registry,
      device: "gpu",
      executionProvider: choice,
      pollMs: 50,
      reaperIntervalMs: 0,
      logger: createLogger({}, { level: "error", sink: () => {} }),
    });
    const spec = tinySpec({ method: "grpo", steps: 1 });
    const onGpu = await submit(db, tenantId, { ...spec, requirements: { device: "gpu" } });
    const result = await runOne(gpuWorker);
    const job = await getJob(db, { tenantId, jobId: onGpu.id });
    assert.equal(result, "succeeded", job?.error ?? "");
    const events = await listEvents(db, onGpu.id, { limit: 1000 });
    const device = events.find((e) => e.type === "device");
    assert.equal(
      (device?.data as { execution_provider?: string }).execution_provider,
      choice.provider,
    );
    assert.equal(events.indexOf(device!), 2); // right after queued and running
    if (choice.provider !== "cpu") return; // a GPU's float32 sums differ from the CPU's

    // The trainer's sessions really use the worker's provider: handed webgpu on a machine where it
    // cannot load (as if the GPU went away after the probe), the job fails saying what is missing.
    const lost = new Worker({
      db,
      store: s3.store,
      registry,
      device: "gpu",
      executionProvider: { provider: "webgpu", skipped: [] },
      reaperIntervalMs: 0,
      logger: createLogger({}, { level: "error", sink: () => {} }),
    });
    const failing = await submit(db, tenantId, { ...spec, requirements: { device: "gpu" } });
    assert.equal(await runOne(lost), "failed");
    assert.match(
      (await getJob(db, { tenantId, jobId: failing.id }))?.error ?? "",
      /ProviderUnavailableError: Cannot create an onnxruntime session on execution provider "webgpu" as a WebGPU adapter must be available/,
    );

    // Without a GPU the job fell back to the CPU: it must be the very job a cpu worker runs.
    const onCpu = await submit(db, tenantId, spec);
    assert.equal(await runOne(testWorker(db, s3.store, registry)), "succeeded");
    const [a, b] = [await metricsByStep(db, onGpu.id), await metricsByStep(db, onCpu.id)];
    assert.deepEqual([...a.keys()], [0, 1]);
    for (const step of a.keys()) assert.deepEqual(untimed(a.get(step)!), untimed(b.get(step)!));
  } finally {
    await s3.close();
    await close();
  }
});

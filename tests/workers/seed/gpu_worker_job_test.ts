import assert from "node:assert/strict";
import { listEvents } from "../../../jobs/mod.ts";
import { chooseExecutionProvider } from "../../../workers/engine/mod.ts";
import { metricsByStep, ONE_THREAD, openJobHarness, runOne, tinySpec, untimed } from "./_jobs.ts";

Deno.test("a gpu job runs the trainer on the provider its worker chose", async () => {
  await using h = await openJobHarness();
  const { db } = h;
  // The real probe, as `WORKER_DEVICE=gpu deno task worker` runs it.
  const choice = await chooseExecutionProvider(["cuda", "webgpu", "cpu"]);
  const gpuWorker = h.worker(ONE_THREAD, { device: "gpu", executionProvider: choice });
  const spec = tinySpec({ method: "grpo", steps: 1 });
  const onGpu = await h.submit({ ...spec, requirements: { device: "gpu" } });
  const result = await runOne(gpuWorker);
  assert.equal(result, "succeeded", await h.error(onGpu.id));
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
  const lost = h.worker(ONE_THREAD, {
    device: "gpu",
    executionProvider: { provider: "webgpu", skipped: [] },
  });
  const failing = await h.submit({ ...spec, requirements: { device: "gpu" } });
  assert.equal(await runOne(lost), "failed");
  assert.match(
    await h.error(failing.id),
    /ProviderUnavailableError: Cannot create an onnxruntime session on execution provider "webgpu" as a WebGPU adapter must be available/,
  );

  // Without a GPU the job fell back to the CPU: it must be the very job a cpu worker runs.
  const onCpu = await h.submit(spec);
  assert.equal(await runOne(h.worker(ONE_THREAD)), "succeeded");
  const [a, b] = [await metricsByStep(db, onGpu.id), await metricsByStep(db, onCpu.id)];
  assert.deepEqual([...a.keys()], [0, 1]);
  for (const step of a.keys()) assert.deepEqual(untimed(a.get(step)!), untimed(b.get(step)!));
});

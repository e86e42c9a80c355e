import assert from "node:assert/strict";
import { FenceLostError } from "../../../jobs/mod.ts";
import { isTransient, withRetry, workerConfigFromEnv } from "../../../workers/worker/mod.ts";

const refused = () =>
  Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });

Deno.test("a lost connection is retried until it comes back", async () => {
  let calls = 0;
  const value = await withRetry(() => {
    calls++;
    if (calls < 3) throw refused();
    return Promise.resolve("ok");
  }, { initialDelayMs: 1 });
  assert.equal(value, "ok");
  assert.equal(calls, 3);
});

Deno.test("domain errors and a lost fence are never retried", async () => {
  let calls = 0;
  const fenceLost = new FenceLostError({ jobId: "j", attempt: 0, workerId: "w" }, "heartbeat");
  await assert.rejects(
    withRetry(() => {
      calls++;
      throw fenceLost;
    }, { initialDelayMs: 1 }),
    FenceLostError,
  );
  assert.equal(calls, 1);
  assert.equal(isTransient(new RangeError("bad step")), false);
  assert.equal(isTransient({ $metadata: { httpStatusCode: 503 } }), true);
  assert.equal(isTransient({ $metadata: { httpStatusCode: 404 } }), false);
  assert.equal(isTransient({ code: "57P01" }), true);
});

Deno.test("retries give up after their time budget", async () => {
  let calls = 0;
  await assert.rejects(
    withRetry(() => {
      calls++;
      throw refused();
    }, { initialDelayMs: 5, retryForMs: 20 }),
    /ECONNREFUSED/,
  );
  assert.ok(calls >= 2 && calls < 10);
});

Deno.test("worker settings come from the environment and are validated", () => {
  assert.deepEqual(workerConfigFromEnv({}), {
    device: "cpu",
    executionProviders: ["cpu"],
    workerId: undefined,
    leaseMs: 30_000,
    pollMs: 5_000,
    reaperIntervalMs: 5_000,
    retryForMs: 600_000,
    logLevel: "info",
  });
  const gpu = workerConfigFromEnv({ WORKER_DEVICE: "gpu", WORKER_LEASE_MS: "600" });
  assert.deepEqual([gpu.device, gpu.leaseMs], ["gpu", 600]);
  assert.deepEqual(gpu.executionProviders, ["cuda", "webgpu", "cpu"]); // probed in this order
  assert.throws(() => workerConfigFromEnv({ WORKER_DEVICE: "tpu" }), /WORKER_DEVICE/);
  assert.throws(() => workerConfigFromEnv({ WORKER_LEASE_MS: "10" }), /WORKER_LEASE_MS/);
});

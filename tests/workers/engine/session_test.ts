import assert from "node:assert/strict";
import {
  createSession,
  Graph,
  ProviderUnavailableError,
  SessionCache,
  sessionOptions,
} from "../../../workers/engine/mod.ts";

function tinyModel(): Uint8Array {
  const g = new Graph("t");
  g.output(g.exp(g.input("x", [2])), "y");
  return g.toModel();
}

Deno.test("sessions default to the cpu provider, 2 non-spinning threads, full graph optimisation and no arena", () => {
  const o = sessionOptions();
  assert.deepEqual(o.executionProviders, ["cpu"]);
  assert.equal(o.intraOpNumThreads, 2);
  assert.equal(o.graphOptimizationLevel, "all");
  assert.equal(sessionOptions({ threads: 1 }).intraOpNumThreads, 1);
  assert.deepEqual(o.extra, { session: { intra_op: { allow_spinning: "0" } } });
  assert.equal(o.enableCpuMemArena, false);
  assert.equal(o.enableMemPattern, false);
  const arena = sessionOptions({ memArena: true, memPattern: true });
  assert.equal(arena.enableCpuMemArena, true);
  assert.equal(arena.enableMemPattern, true);
});

Deno.test("cuda either loads or fails saying that its provider libraries are missing", async () => {
  // onnxruntime-node ships without the CUDA provider (ONNXRUNTIME_NODE_INSTALL=cuda12 adds it).
  try {
    await (await createSession(tinyModel(), { ep: "cuda" })).release();
  } catch (e) {
    assert.ok(e instanceof ProviderUnavailableError, String(e));
    assert.match(e.message, /CUDA provider libraries must be installed/);
  }
});

Deno.test("webgpu either loads or fails saying that a GPU adapter is missing", async () => {
  // This machine has no GPU (the error path); on one with a Vulkan driver the session loads.
  try {
    await (await createSession(tinyModel(), { ep: "webgpu" })).release();
  } catch (e) {
    assert.ok(e instanceof ProviderUnavailableError, String(e));
    assert.match(e.message, /WebGPU adapter must be available/);
  }
});

Deno.test("the session cache builds each key once and evicts the least recently used", async () => {
  const cache = new SessionCache({ maxSessions: 2 });
  let builds = 0;
  const build = () => (builds++, tinyModel());
  const a = await cache.get("a", build);
  assert.equal(await cache.get("a", build), a);
  await cache.get("b", build);
  await cache.get("c", build);
  assert.equal(builds, 3);
  assert.equal(cache.size, 2);
  await cache.get("a", build);
  assert.equal(builds, 4);
  await cache.release();
  assert.equal(cache.size, 0);
});

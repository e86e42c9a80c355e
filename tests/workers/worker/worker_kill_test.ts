/**
 * A worker's compute process never outlives it. Killed with SIGKILL in the middle of a step that
 * blocks its compute process forever (synchronous code that never reads the socket), the worker
 * takes the compute process with it (workers/worker/_parent_death.ts); stopped with SIGTERM, it
 * drains and stops its compute process by pid before it exits. Real processes: a worker process
 * (`_compute_worker.ts`, `workers/main.ts`) signalled by its pid alone.
 */
import assert from "node:assert/strict";
import { cancelJob, listMetrics, submitJob } from "../../../jobs/mod.ts";
import { createTenant, openTestDatabase, testSpec } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";
import { childrenOf, isAlive } from "../../_harness/proc.ts";

/** Polls until `done()` or `boundMs` passes (a bound, not a measurement). */
async function waitUntil(done: () => boolean | Promise<boolean>, boundMs = 60_000): Promise<void> {
  const until = Date.now() + boundMs;
  while (!(await done()) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
}

Deno.test("a worker's compute process ends with the worker, killed or stopped by pid", async (t) => {
  const { db, url, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);

  /**
   * Starts a worker whose steps spin `blockMs` (see _blocking_handler.ts), waits until step 1 is
   * committed and its compute process runs, sends `signal` to the worker's pid, and answers the
   * worker's exit code and whether the compute process was gone within the bound.
   */
  const killWorker = async (signal: "SIGKILL" | "SIGTERM", blockMs: string) => {
    const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 3 }) });
    const worker = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_compute_worker.ts", import.meta.url).pathname],
      env: { ...s3.env, DATABASE_URL: url, LOG_LEVEL: "warn", BLOCK_MS: blockMs },
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    let compute: number | undefined;
    try {
      await waitUntil(async () => (await listMetrics(db, job.id)).length >= 1);
      await waitUntil(() => (compute = childrenOf(worker.pid)[0]) !== undefined);
      assert.ok(compute, "the worker runs a compute process");
      Deno.kill(worker.pid, signal);
      const { code } = await worker.status;
      await waitUntil(() => !isAlive(compute!), 20_000);
      return { code, computeAlive: isAlive(compute) };
    } finally {
      for (const pid of [worker.pid, ...compute ? [compute] : []]) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* gone */ }
      }
      await worker.status;
      await cancelJob(db, { tenantId, jobId: job.id });
    }
  };

  try {
    await t.step(
      "SIGKILL during a step that never yields: the compute process dies too",
      async () => {
        // Step 2 spins forever: the compute process never reads its socket again.
        const { code, computeAlive } = await killWorker("SIGKILL", "0,-1");
        assert.equal(code, 137);
        assert.equal(computeAlive, false, "the compute process outlived its killed worker");
      },
    );
    await t.step("SIGTERM: the worker drains, exits 0 and stops its compute process", async () => {
      const { code, computeAlive } = await killWorker("SIGTERM", "0,500");
      assert.equal(code, 0);
      assert.equal(computeAlive, false, "the compute process outlived its drained worker");
    });
  } finally {
    await s3.close();
    await close();
  }
});

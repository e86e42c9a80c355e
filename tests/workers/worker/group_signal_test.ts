/**
 * Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the worker and its
 * compute process both receive it, and a wrapper in the group (`npx deno task worker`) forwards
 * it once more. The worker must still drain: the step in progress finishes, the job is released
 * with no attempt spent, and the worker exits 0. Real processes: a worker process
 * (`_compute_worker.ts`, `workers/main.ts`) in a process group of its own, signalled as a group.
 */
import assert from "node:assert/strict";
import { cancelJob, getJob, type Job, listMetrics, submitJob } from "../../../jobs/mod.ts";
import { SAME_PRESS_MS } from "../../../jobs/mod.ts";
import { createTenant, openTestDatabase, testSpec } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";
import { childrenOf, isAlive, logRecords } from "../../_harness/proc.ts";

Deno.test("a signal to the worker's whole process group drains it", async (t) => {
  const { db, url, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  const reload = async (job: Job) => (await getJob(db, { tenantId, jobId: job.id }))!;
  /** Polls until `done()` or `boundMs` passes (a bound, not a measurement). */
  const waitUntil = async (done: () => Promise<boolean>, boundMs = 60_000) => {
    const until = Date.now() + boundMs;
    while (!(await done()) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  };
  /**
   * A worker process leading a process group of its own (`detached` starts it with setsid), so
   * that a signal to `-pid` reaches it and its compute process, as Ctrl-C in a terminal does.
   */
  const spawnWorker = (blockMs = "300") =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_compute_worker.ts", import.meta.url).pathname],
      // By default 300 ms of synchronous compute per step: the signal lands inside a step.
      env: { ...s3.env, DATABASE_URL: url, LOG_LEVEL: "info", BLOCK_MS: blockMs },
      stdin: "null",
      stdout: "null",
      stderr: "piped",
      detached: true,
    }).spawn();

  /** Runs a job, sends `signal` to the group (`times` deliveries, 5 ms apart) after step 1. */
  const drainsOn = async (signal: "SIGINT" | "SIGTERM", times: number) => {
    const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 40 }) });
    const child = spawnWorker();
    const logs = logRecords(child);
    try {
      await waitUntil(async () => (await listMetrics(db, job.id)).length >= 1);
      assert.ok((await listMetrics(db, job.id)).length >= 1, "step 1 was committed");
      for (let i = 0; i < times; i++) {
        Deno.kill(-child.pid, signal);
        await new Promise((r) => setTimeout(r, 5));
      }
      const status = await child.status;
      const lines = await logs;
      const after = await reload(job);
      const said = lines.map((l) => `${l.msg}${l.error ? `: ${l.error}` : ""}`).join("\n");
      assert.equal(status.code, 0, `the worker exits cleanly after draining; it logged:\n${said}`);
      assert.equal(after.status, "queued", `the job is released; it logged:\n${said}`);
      assert.equal(after.attempt, 0, "draining burns no attempt");
      assert.equal(after.workerId, null);
      assert.ok(lines.some((l) => l.msg === "job released while draining"), said);
      assert.ok(!lines.some((l) => l.msg === "second signal: exiting now"), said);
      const steps = (await listMetrics(db, job.id)).map((m) => m.step);
      assert.ok(steps.length < 40, "the job was drained, not run to its end");
      assert.deepEqual(steps, steps.map((_, i) => i + 1), "every step up to the drain, once");
    } finally {
      try {
        Deno.kill(-child.pid, "SIGKILL");
      } catch { /* the group is gone */ }
      await child.status;
      // Off the queue, so that the next step's worker claims its own job, not this one.
      await cancelJob(db, { tenantId, jobId: job.id });
    }
  };

  try {
    await t.step(
      "Ctrl-C (SIGINT to the group) finishes the step and releases the job",
      () => drainsOn("SIGINT", 1),
    );
    await t.step("SIGTERM to the group does the same", () => drainsOn("SIGTERM", 1));
    await t.step(
      "a Ctrl-C delivered twice within a second (a wrapper forwarding it) is one press",
      () => drainsOn("SIGINT", 2),
    );
    await t.step(
      "a second Ctrl-C over a second later exits at once and kills the compute process",
      async () => {
        // Step 2 spins forever: only the second signal ends this worker.
        const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 3 }) });
        const child = spawnWorker("0,-1");
        const logs = logRecords(child);
        let compute: number | undefined;
        try {
          await waitUntil(async () => (await listMetrics(db, job.id)).length >= 1);
          [compute] = childrenOf(child.pid);
          assert.ok(compute, "the worker runs a compute process");
          Deno.kill(-child.pid, "SIGINT");
          await new Promise((r) => setTimeout(r, SAME_PRESS_MS + 200));
          Deno.kill(-child.pid, "SIGINT");
          assert.equal((await child.status).code, 130);
          // (Before reading the logs: a live compute process holds the worker's stderr open.)
          await waitUntil(() => Promise.resolve(!isAlive(compute!)), 10_000);
          assert.ok(!isAlive(compute), `compute process ${compute} outlived its worker`);
          const lines = await logs;
          assert.deepEqual(
            lines.map((l) => l.msg).filter((m) => /draining|second signal/.test(m)),
            ["draining", "second signal: exiting now"],
          );
          // The lease still names the exited worker; the reaper will requeue it (attempt + 1).
          assert.equal((await reload(job)).status, "running");
        } finally {
          for (const pid of [-child.pid, ...compute ? [compute] : []]) {
            try {
              Deno.kill(pid, "SIGKILL");
            } catch { /* gone */ }
          }
          await child.status;
          await cancelJob(db, { tenantId, jobId: job.id });
        }
      },
    );
  } finally {
    await s3.close();
    await close();
  }
});

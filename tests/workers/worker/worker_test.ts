import assert from "node:assert/strict";
import {
  cancelJob,
  createLogger,
  FenceLostError,
  getJob,
  type Job,
  listEvents,
  listMetrics,
  reapExpiredLeases,
  submitJob,
} from "../../../jobs/mod.ts";
import {
  HandlerRegistry,
  JobCancelledError,
  type JobHandler,
  Worker,
} from "../../../workers/worker/mod.ts";
import { countingHandler } from "./_counting_handler.ts";
import { createTenant, openTestDatabase, testSpec } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";

const LEASE_MS = 300;

/** Resolves when the job's signal aborts, rejecting with its reason (a handler that "works"). */
const waitForAbort: JobHandler = (ctx) =>
  new Promise((_, reject) => {
    ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true });
  });

Deno.test("the worker loop", async (t) => {
  const { db, url, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  const logs: string[] = [];
  const makeWorker = (registry: HandlerRegistry, workerId?: string) =>
    new Worker({
      db,
      store: s3.store,
      workerId,
      leaseMs: LEASE_MS,
      pollMs: 50,
      reaperIntervalMs: 0,
      registry,
      logger: createLogger({}, { sink: (l) => logs.push(l), level: "debug" }),
    });
  const reload = async (job: Job) => (await getJob(db, { tenantId, jobId: job.id }))!;
  /**
   * Reaps `job` as a reaper a minute from now would. The reap skips rows locked at that instant
   * (`for update skip locked`: a live worker's heartbeat or event holds the row for a moment), so
   * it is asked again until the job is among the reaped — as the reaper's next tick would.
   */
  const reapLater = async (job: Job): Promise<Job> => {
    for (let i = 0; i < 100; i++) {
      const reaped = await reapExpiredLeases(db, { now: new Date(Date.now() + 60_000) });
      const mine = reaped.find((r) => r.id === job.id);
      if (mine) return mine;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`job ${job.id} was not reaped in 100 tries`);
  };
  /** A worker process running the counting handler (100 ms per step) on this test's DB and S3. */
  const spawnWorker = () =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_counting_worker.ts", import.meta.url).pathname],
      env: {
        ...s3.env,
        DATABASE_URL: url,
        WORKER_LEASE_MS: String(LEASE_MS),
        REAPER_INTERVAL_MS: "0",
        STEP_DELAY_MS: "100",
        LOG_LEVEL: "error",
      },
      stdout: "piped",
      stderr: "null",
    }).spawn();
  /** Reads the child's `{"step": N}` lines to the end, calling `onStep` for each; the last step. */
  const readSteps = async (child: Deno.ChildProcess, onStep: (step: number) => unknown) => {
    let last = 0;
    let buffered = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        last = JSON.parse(line).step;
        onStep(last);
      }
    }
    return last;
  };
  try {
    await t.step("a job of a method with no handler fails with a clear error", async () => {
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      const run = await makeWorker(new HandlerRegistry()).runOnce();
      assert.equal(run?.result, "failed");
      const after = await reload(job);
      assert.equal(after.status, "failed");
      assert.equal(
        after.error,
        `Cannot run job ${job.id} as method "seed" must have a registered handler: this worker has none`,
      );
    });

    await t.step("a handler's run succeeds with metrics, checkpoints and progress", async () => {
      const registry = new HandlerRegistry();
      registry.register("seed", countingHandler());
      const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 3 }) });
      const run = await makeWorker(registry).runOnce();
      assert.equal(run?.result, "succeeded");
      const after = await reload(job);
      assert.equal(after.status, "succeeded");
      assert.deepEqual(after.progress, { stage: "train", step: 3, totalSteps: 3, etaS: 0 });
      assert.deepEqual((await listMetrics(db, job.id)).map((m) => m.step), [1, 2, 3]);
      const types = (await listEvents(db, job.id)).map((e) => e.type);
      assert.deepEqual(types, ["status", "status", "stage", "step", "step", "step", "status"]);
    });

    await t.step("a handler that throws fails the job with its message and no stack", async () => {
      const registry = new HandlerRegistry();
      registry.register("seed", () => {
        throw new RangeError("Cannot load env sokoban as size must be ≤ 12: current value is 40");
      });
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      assert.equal((await makeWorker(registry).runOnce())?.result, "failed");
      const after = await reload(job);
      assert.equal(
        after.error,
        "RangeError: Cannot load env sokoban as size must be ≤ 12: current value is 40",
      );
      assert.doesNotMatch(after.error!, /at .*\.ts/);
    });

    await t.step("a handler that blocks the event loop is reported in the log", async () => {
      const registry = new HandlerRegistry();
      registry.register("seed", async () => {
        const until = Date.now() + 250; // longer than two heartbeat intervals (lease / 3 = 100 ms)
        while (Date.now() < until) { /* a synchronous stretch, as a long onnxruntime call */ }
        await new Promise((r) => setTimeout(r, 0));
      });
      await submitJob(db, { tenantId, spec: testSpec() });
      logs.length = 0;
      assert.equal((await makeWorker(registry).runOnce())?.result, "succeeded");
      const warning = logs.map((l) => JSON.parse(l)).find((l) => l.msg.includes("blocked"));
      assert.ok(warning, "a warning names the blocked event loop");
      assert.ok(warning.lateMs > 100);
    });

    await t.step("a running job's cancel reaches the handler on a heartbeat", async () => {
      const registry = new HandlerRegistry();
      let reason: unknown;
      let started!: () => void;
      const running = new Promise<void>((r) => started = r);
      registry.register("seed", async (ctx) => {
        started();
        try {
          await waitForAbort(ctx);
        } catch (e) {
          reason = e;
          throw e;
        }
      });
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      const run = makeWorker(registry).runOnce();
      await running;
      assert.equal((await cancelJob(db, { tenantId, jobId: job.id }))?.status, "cancelling");
      assert.equal((await run)?.result, "cancelled");
      assert.ok(reason instanceof JobCancelledError);
      const after = await reload(job);
      assert.equal(after.status, "cancelled");
      assert.ok(after.finishedAt);
    });

    await t.step("a worker whose lease was reaped stops and writes nothing more", async () => {
      const registry = new HandlerRegistry();
      let reason: unknown;
      let started!: () => void;
      const running = new Promise<void>((r) => started = r);
      registry.register("seed", async (ctx) => {
        started();
        try {
          await waitForAbort(ctx);
        } catch (e) {
          reason = e;
          // A write after losing the fence is refused too.
          await assert.rejects(ctx.emit("late", {}), FenceLostError);
          throw e;
        }
      });
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      const run = makeWorker(registry, "slow-worker").runOnce();
      await running;
      await reapLater(job);
      assert.equal((await run)?.result, "fence_lost");
      assert.ok(reason instanceof FenceLostError);
      const after = await reload(job);
      assert.equal(after.status, "queued");
      assert.equal(after.attempt, 1);
      assert.ok((await listEvents(db, job.id)).every((e) => e.type === "status"));
      await cancelJob(db, { tenantId, jobId: job.id });
    });

    await t.step(
      "a draining worker checkpoints, releases the job, and another resumes it",
      async () => {
        const registry = new HandlerRegistry();
        const drainingWorker = makeWorker(registry);
        // The worker is told to drain (as SIGTERM does) right after step 2 is checkpointed.
        registry.register(
          "seed",
          countingHandler({ onStep: (s) => s === 2 && drainingWorker.drain() }),
        );
        const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 5 }) });
        await drainingWorker.run();
        const released = await reload(job);
        assert.equal(released.status, "queued");
        assert.equal(released.attempt, 0, "draining burns no attempt");
        const resumeRegistry = new HandlerRegistry();
        resumeRegistry.register("seed", countingHandler());
        assert.equal((await makeWorker(resumeRegistry).runOnce())?.result, "succeeded");
        assert.deepEqual((await listMetrics(db, job.id)).map((m) => m.step), [1, 2, 3, 4, 5]);
        const resumed = (await listEvents(db, job.id)).find((e) => e.type === "resumed");
        assert.deepEqual(resumed?.data, { from_step: 2 });
      },
    );

    await t.step(
      "SIGTERM drains a worker process: it checkpoints and releases the job",
      async () => {
        const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 50 }) });
        const child = spawnWorker();
        let signalled = false;
        const lastStep = await readSteps(child, (step) => {
          if (step >= 2 && !signalled) child.kill("SIGTERM");
          signalled ||= step >= 2;
        });
        const status = await child.status;
        assert.equal(status.code, 0, "the worker exits cleanly after draining");
        const after = await reload(job);
        assert.equal(after.status, "queued");
        assert.equal(after.attempt, 0, "draining burns no attempt");
        assert.equal(after.workerId, null);
        const metrics = await listMetrics(db, job.id);
        assert.equal(metrics.length, lastStep, "every reported step was recorded once");
        await cancelJob(db, { tenantId, jobId: job.id });
      },
    );

    await t.step("a worker process killed mid-job is resumed from its checkpoint", async () => {
      const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 12 }) });
      const child = spawnWorker();
      let killed = false;
      const killedAfter = await readSteps(child, (step) => {
        if (step >= 3 && !killed) child.kill("SIGKILL");
        killed ||= step >= 3;
      });
      await child.status;
      assert.ok(killedAfter >= 3);
      assert.equal((await reload(job)).status, "running", "the lease still names the dead worker");
      assert.equal((await reapLater(job)).attempt, 1);
      const registry = new HandlerRegistry();
      registry.register("seed", countingHandler());
      assert.equal((await makeWorker(registry).runOnce())?.result, "succeeded");
      const metrics = await listMetrics(db, job.id);
      assert.deepEqual(metrics.map((m) => m.step), [...Array(12).keys()].map((i) => i + 1));
      const resumed = (await listEvents(db, job.id)).find((e) => e.type === "resumed");
      const from = (resumed?.data as { from_step: number }).from_step;
      assert.ok(from >= killedAfter, "resumed at or after the last step the child reported");
      for (const m of metrics) assert.equal(m.values.attempt, m.step <= from ? 0 : 1);
      assert.equal((await reload(job)).status, "succeeded");
    });
  } finally {
    await s3.close();
    await close();
  }
});

import assert from "node:assert/strict";
import {
  acknowledgeCancel,
  cancelJob,
  claimJob,
  failJob,
  fenceOf,
  getJob,
  heartbeat,
  JOB_EVENTS_CHANNEL,
  reapExpiredLeases,
  releaseJob,
  requestCancel,
  submitJob,
  succeedJob,
} from "../../jobs/queue.ts";
import { FenceLostError, IdempotencyConflictError } from "../../jobs/errors.ts";
import { appendEvent, listEvents } from "../../jobs/events.ts";
import { listMetrics, recordMetrics, setProgress } from "../../jobs/metrics.ts";
import { createWakeup } from "../../jobs/wakeup.ts";
import { createTenant, openTestDatabase, testSpec } from "../_harness/fixtures.ts";

const LEASE_MS = 500;
const later = (ms: number) => new Date(Date.now() + ms);
/**
 * A clock at which this file's leases are expired and the reaper's restart grace (10 s after the
 * database started, jobs/queue.ts `reap`) is over, however soon after its start the test runs.
 */
const reapTime = () => later(LEASE_MS + 10_000 + 1_000);

Deno.test("the Postgres queue", async (t) => {
  const { db, close } = await openTestDatabase();
  const tenantId = await createTenant(db);
  const claim = (workerId: string, device: "cpu" | "gpu" = "cpu") =>
    claimJob(db, { workerId, device, leaseMs: LEASE_MS });
  // Each step starts from an empty queue, so claims only see the step's own jobs.
  const drain = async () => {
    await db.query(
      "update jobs set status = 'cancelled', finished_at = now(), worker_id = null, lease_expires_at = null where status not in ('succeeded', 'failed', 'cancelled')",
    );
  };
  try {
    await t.step("submit queues a job, logs a status event and wakes listeners", async () => {
      const wakeup = await createWakeup(db, "cpu");
      try {
        const { job, created } = await submitJob(db, { tenantId, spec: testSpec() });
        assert.equal(created, true);
        assert.equal(job.status, "queued");
        assert.equal(job.attempt, 0);
        assert.equal(job.maxAttempts, 3);
        assert.equal(job.method, "seed");
        assert.equal(await wakeup.wait(5_000), "notified");
        const events = await listEvents(db, job.id);
        assert.deepEqual(events.map((e) => [e.type, e.data]), [["status", { status: "queued" }]]);
      } finally {
        await wakeup.close();
        await drain();
      }
    });

    await t.step(
      "every status change and appended event is announced with the job id",
      async () => {
        const payloads: string[] = [];
        let heard!: () => void;
        let expected = 3;
        const done = new Promise<void>((r) => heard = r);
        const unlisten = await db.listen(JOB_EVENTS_CHANNEL, (p) => {
          payloads.push(p);
          if (--expected === 0) heard();
        });
        try {
          const { job } = await submitJob(db, { tenantId, spec: testSpec() });
          const claimed = (await claim("announcer"))!;
          await appendEvent(db, fenceOf(claimed), "stage", { stage: "rollout" });
          await done;
          assert.deepEqual(payloads, [job.id, job.id, job.id]);
        } finally {
          await unlisten();
          await drain();
        }
      },
    );

    await t.step("an idempotency key returns the same job for the same body", async () => {
      const spec = testSpec({ steps: 3 });
      const results = await Promise.all(
        Array.from({ length: 5 }, () => submitJob(db, { tenantId, spec, idempotencyKey: "k-1" })),
      );
      assert.equal(new Set(results.map((r) => r.job.id)).size, 1);
      assert.equal(results.filter((r) => r.created).length, 1);
      const again = await submitJob(db, {
        tenantId,
        spec: testSpec({ steps: 3 }),
        idempotencyKey: "k-1",
      });
      assert.equal(again.created, false);
      assert.equal(again.job.id, results[0].job.id);
      await assert.rejects(
        submitJob(db, { tenantId, spec: testSpec({ steps: 4 }), idempotencyKey: "k-1" }),
        IdempotencyConflictError,
      );
      const other = await createTenant(db);
      const elsewhere = await submitJob(db, { tenantId: other, spec, idempotencyKey: "k-1" });
      assert.equal(elsewhere.created, true);
      await drain();
    });

    await t.step("8 concurrent claimers take 100 jobs, each exactly once", async () => {
      const submitted = [];
      for (let i = 0; i < 100; i++) {
        submitted.push((await submitJob(db, { tenantId, spec: testSpec() })).job.id);
      }
      const claimed: string[][] = await Promise.all(
        Array.from({ length: 8 }, async (_, w) => {
          const mine: string[] = [];
          for (;;) {
            const job = await claim(`worker-${w}`);
            if (!job) return mine;
            assert.equal(job.status, "running");
            assert.equal(job.workerId, `worker-${w}`);
            mine.push(job.id);
          }
        }),
      );
      const all = claimed.flat();
      assert.equal(all.length, 100);
      assert.deepEqual(new Set(all), new Set(submitted));
      assert.ok(claimed.filter((c) => c.length > 0).length > 1, "work spreads over claimers");
      await drain();
    });

    await t.step(
      "claim takes higher priority first, then the oldest, on the worker's device",
      async () => {
        const low = (await submitJob(db, { tenantId, spec: testSpec({ priority: -5 }) })).job;
        const first = (await submitJob(db, { tenantId, spec: testSpec() })).job;
        const second = (await submitJob(db, { tenantId, spec: testSpec() })).job;
        const urgent = (await submitJob(db, { tenantId, spec: testSpec({ priority: 10 }) })).job;
        const gpu = (await submitJob(db, {
          tenantId,
          spec: testSpec({ requirements: { device: "gpu" } }),
        })).job;
        const order = [];
        for (let job = await claim("w"); job; job = await claim("w")) order.push(job.id);
        assert.deepEqual(order, [urgent.id, first.id, second.id, low.id]);
        assert.equal((await claim("g", "gpu"))?.id, gpu.id);
        await drain();
      },
    );

    await t.step("a heartbeat extends the lease under the fence", async () => {
      await submitJob(db, { tenantId, spec: testSpec() });
      const job = (await claim("hb"))!;
      const before = job.leaseExpiresAt!.getTime();
      const { cancelRequested } = await heartbeat(db, fenceOf(job), 60_000);
      assert.equal(cancelRequested, false);
      const after = (await getJob(db, { tenantId, jobId: job.id }))!;
      assert.ok(after.leaseExpiresAt!.getTime() > before + 30_000);
      await drain();
    });

    await t.step(
      "an expired lease is requeued with attempt + 1 and the old fence is dead",
      async () => {
        await submitJob(db, { tenantId, spec: testSpec() });
        const job = (await claim("lost"))!;
        assert.deepEqual(await reapExpiredLeases(db), [], "an unexpired lease is left alone");
        const reaped = await reapExpiredLeases(db, { now: reapTime() });
        assert.equal(reaped.length, 1);
        assert.equal(reaped[0].status, "queued");
        assert.equal(reaped[0].attempt, 1);
        assert.equal(reaped[0].workerId, null);
        await assert.rejects(heartbeat(db, fenceOf(job), LEASE_MS), FenceLostError);
        const again = (await claim("rescuer"))!;
        assert.equal(again.id, job.id);
        assert.equal(again.attempt, 1);
        await drain();
      },
    );

    await t.step("a job whose attempts are used up fails with a readable error", async () => {
      const { job } = await submitJob(db, { tenantId, spec: testSpec({ max_attempts: 2 }) });
      for (let i = 0; i < 2; i++) {
        assert.equal((await claim(`w${i}`))?.id, job.id);
        await reapExpiredLeases(db, { now: reapTime() });
      }
      const failed = (await getJob(db, { tenantId, jobId: job.id }))!;
      assert.equal(failed.status, "failed");
      assert.equal(failed.attempt, 1);
      assert.ok(failed.finishedAt);
      assert.match(failed.error!, /stopped heartbeating on each of its 2 attempts/);
      assert.equal(await claim("w9"), null);
    });

    await t.step("a stale worker can write no status, event, metrics or progress", async () => {
      await submitJob(db, { tenantId, spec: testSpec() });
      const stale = (await claim("stale"))!;
      await recordMetrics(db, fenceOf(stale), 0, { reward: 1 });
      await setProgress(db, fenceOf(stale), { stage: "rollout", step: 3, etaS: 100 });
      await reapExpiredLeases(db, { now: reapTime() });
      const fresh = (await claim("fresh"))!;
      const old = fenceOf(stale);
      await assert.rejects(appendEvent(db, old, "step", { step: 1 }), FenceLostError);
      await assert.rejects(recordMetrics(db, old, 1, { reward: 2 }), FenceLostError);
      await assert.rejects(setProgress(db, old, { stage: "rollout" }), FenceLostError);
      await assert.rejects(succeedJob(db, old), FenceLostError);
      await assert.rejects(failJob(db, old, "boom"), FenceLostError);
      await assert.rejects(releaseJob(db, old), FenceLostError);
      // The same attempt number with another worker id is not the fence either.
      await assert.rejects(
        heartbeat(db, { ...fenceOf(fresh), workerId: "stale" }, LEASE_MS),
        FenceLostError,
      );
      const events = await listEvents(db, stale.id);
      assert.ok(events.every((e) => e.type === "status"));
      assert.deepEqual((await listMetrics(db, stale.id)).map((m) => m.step), [0]);
      const now = (await getJob(db, { tenantId, jobId: stale.id }))!;
      assert.equal(now.status, "running");
      assert.equal(now.workerId, "fresh");
      assert.equal(now.progress, null, "the claim cleared the lost run's progress");
      await succeedJob(db, fenceOf(fresh));
    });

    await t.step("metrics of a step are stored once; a rerun's values replace them", async () => {
      await submitJob(db, { tenantId, spec: testSpec() });
      const job = (await claim("m"))!;
      await recordMetrics(db, fenceOf(job), 0, { reward: 1 });
      await recordMetrics(db, fenceOf(job), 1, { reward: 2 });
      await recordMetrics(db, fenceOf(job), 1, { reward: 3 });
      const rows = await listMetrics(db, job.id);
      assert.deepEqual(rows.map((r) => [r.step, r.values.reward]), [[0, 1], [1, 3]]);
      const after = (await getJob(db, { tenantId, jobId: job.id }))!;
      assert.deepEqual(after.latestMetrics, { reward: 3, step: 1 });
      await succeedJob(db, fenceOf(job));
    });

    await t.step("cancel moves a queued job to cancelled at once", async () => {
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      const cancelled = (await cancelJob(db, { tenantId, jobId: job.id }))!;
      assert.equal(cancelled.status, "cancelled");
      assert.ok(cancelled.finishedAt);
      assert.equal(await claim("w"), null);
      const again = (await requestCancel(db, { tenantId, jobId: job.id }))!;
      assert.equal(again.job.status, "cancelled", "a second cancel changes nothing");
      assert.equal(again.moved, false, "the second cancel says it moved nothing");
      assert.equal(again.job.finishedAt?.getTime(), cancelled.finishedAt!.getTime());
      const other = await createTenant(db);
      assert.equal(await cancelJob(db, { tenantId: other, jobId: job.id }), null);
    });

    await t.step("cancel of a running job reaches the worker on its heartbeat", async () => {
      await submitJob(db, { tenantId, spec: testSpec() });
      const job = (await claim("c"))!;
      const requested = (await requestCancel(db, { tenantId, jobId: job.id }))!;
      assert.deepEqual([requested.job.status, requested.moved], ["cancelling", true]);
      assert.equal((await heartbeat(db, fenceOf(job), LEASE_MS)).cancelRequested, true);
      const done = await acknowledgeCancel(db, fenceOf(job));
      assert.equal(done.status, "cancelled");
      assert.ok(done.finishedAt);
      await assert.rejects(heartbeat(db, fenceOf(job), LEASE_MS), FenceLostError);
      const types = (await listEvents(db, job.id)).map((e) =>
        (e.data as { status: string }).status
      );
      assert.deepEqual(types, ["queued", "running", "cancelling", "cancelled"]);
    });

    await t.step("a cancelling job whose worker is lost is cancelled by the reaper", async () => {
      await submitJob(db, { tenantId, spec: testSpec() });
      const job = (await claim("c2"))!;
      await cancelJob(db, { tenantId, jobId: job.id });
      const [reaped] = await reapExpiredLeases(db, { now: reapTime() });
      assert.equal(reaped.status, "cancelled");
      assert.equal(reaped.attempt, 0);
    });

    await t.step("a released job goes back to the queue without burning an attempt", async () => {
      await submitJob(db, { tenantId, spec: testSpec() });
      const job = (await claim("drainer"))!;
      const released = await releaseJob(db, fenceOf(job));
      assert.equal(released.status, "queued");
      assert.equal(released.attempt, 0);
      const next = (await claim("next"))!;
      assert.equal(next.id, job.id);
      assert.equal(next.attempt, 0);
      await assert.rejects(heartbeat(db, fenceOf(job), LEASE_MS), FenceLostError);
      const failed = await failJob(db, fenceOf(next), "Cannot train as the env is missing");
      assert.equal(failed.status, "failed");
      assert.equal(failed.error, "Cannot train as the env is missing");
    });

    await t.step("CHECK constraints refuse rows that break the invariants", async () => {
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      const refuse = (text: string) => assert.rejects(db.query(text, [job.id]), /check constraint/);
      await refuse("update jobs set status = 'succeeded' where id = $1::uuid");
      await refuse("update jobs set status = 'running' where id = $1::uuid");
      await refuse("update jobs set attempt = -1 where id = $1::uuid");
      await refuse("update jobs set attempt = max_attempts where id = $1::uuid");
      await refuse("update jobs set status = 'failed', finished_at = now() where id = $1::uuid");
      await refuse("update jobs set worker_id = 'w' where id = $1::uuid");
      await drain();
    });
  } finally {
    await close();
  }
});

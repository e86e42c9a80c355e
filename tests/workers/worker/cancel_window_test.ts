/**
 * A cancel sent the moment a job turns `running` — before its worker has subscribed to
 * `CANCEL_CHANNEL`, or while its run is ending — still ends the job `cancelled`, promptly: the
 * worker reads the job's row right after subscribing, and `succeed` turns `cancelling` into
 * `cancelled`. The lease here is long (a heartbeat every 200 s), so no regular heartbeat can be
 * what brings the cancel.
 */
import assert from "node:assert/strict";
import {
  CANCEL_CHANNEL,
  cancelJob,
  createLogger,
  type Database,
  getJob,
  submitJob,
} from "../../../jobs/mod.ts";
import { HandlerRegistry, JobCancelledError, Worker } from "../../../workers/worker/mod.ts";
import { createTenant, openTestDatabase, testSpec } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";

const LEASE_MS = 600_000;
/**
 * How long a handler waits for its cancel before it gives up and returns (a bound, not a claim).
 */
const GIVE_UP_MS = 20_000;

/**
 * The test database, whose `listen` on CANCEL_CHANNEL first runs `beforeSubscribe` (when set):
 * a cancel sent there falls between the worker's claim and its subscription.
 */
function withCancelBeforeSubscribe(
  db: Database,
  hook: { beforeSubscribe?: () => Promise<void> },
): Database {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "listen") {
        return async (channel: string, onPayload: (payload: string) => void) => {
          if (channel === CANCEL_CHANNEL && hook.beforeSubscribe) await hook.beforeSubscribe();
          return await target.listen(channel, onPayload);
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

Deno.test("a cancel sent right after the claim", async (t) => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  const hook: { beforeSubscribe?: () => Promise<void> } = {};
  const makeWorker = (registry: HandlerRegistry) =>
    new Worker({
      db: withCancelBeforeSubscribe(db, hook),
      store: s3.store,
      leaseMs: LEASE_MS,
      pollMs: 50,
      reaperIntervalMs: 0,
      registry,
      logger: createLogger({}, { sink: () => {}, level: "error" }),
    });
  try {
    await t.step("before the worker subscribes reaches the running handler", async () => {
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      hook.beforeSubscribe = async () => {
        hook.beforeSubscribe = undefined;
        const sent = await cancelJob(db, { tenantId, jobId: job.id });
        assert.equal(sent?.status, "cancelling");
      };
      let reason: unknown;
      const registry = new HandlerRegistry();
      registry.register("seed", (ctx) =>
        new Promise((resolve, reject) => {
          const giveUp = setTimeout(() => resolve(), GIVE_UP_MS);
          ctx.signal.addEventListener("abort", () => {
            clearTimeout(giveUp);
            reason = ctx.signal.reason;
            reject(ctx.signal.reason);
          }, { once: true });
        }));
      const run = await makeWorker(registry).runOnce();
      assert.equal(run?.job.id, job.id);
      assert.ok(reason instanceof JobCancelledError, "the handler was stopped by the cancel");
      assert.equal(run?.result, "cancelled");
      assert.equal((await getJob(db, { tenantId, jobId: job.id }))?.status, "cancelled");
    });

    await t.step("as the run ends ends the job cancelled, not succeeded", async () => {
      const { job } = await submitJob(db, { tenantId, spec: testSpec() });
      const registry = new HandlerRegistry();
      // The handler finishes its work the moment the cancel is accepted (a job of a few steps).
      registry.register("seed", async () => {
        const sent = await cancelJob(db, { tenantId, jobId: job.id });
        assert.equal(sent?.status, "cancelling");
      });
      const run = await makeWorker(registry).runOnce();
      assert.equal(run?.result, "cancelled");
      const after = await getJob(db, { tenantId, jobId: job.id });
      assert.equal(after?.status, "cancelled");
      assert.ok(after?.finishedAt);
    });
  } finally {
    await s3.close();
    await close();
  }
});

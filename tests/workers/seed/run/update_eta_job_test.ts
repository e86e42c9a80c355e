/**
 * The ETA of a job in its RL updates, through the real parts: a real worker runs a 3-update job on
 * Postgres and the S3 protocol, and each progress write is read back through the API
 * (`GET /v1/jobs/{id}`) as the dashboard and `seed status` read it. From the end of update 1 on,
 * every write carries `eta_s` (update_eta.ts), the evaluation and checkpoint stages included.
 */
import assert from "node:assert/strict";
import { createKey } from "../../../../jobs/mod.ts";
import { createApp } from "../../../../api/app.ts";
import { Worker } from "../../../../workers/worker/mod.ts";
import { openJobHarness, runOne, tinySpec, trainerRegistry } from "../_jobs.ts";

Deno.test("a job shows an ETA in its progress from the end of its first update on", async () => {
  await using h = await openJobHarness();
  const [{ name }] = await h.db.query<{ name: string }>(
    `select name from tenants where id = $1::uuid`,
    [h.tenantId],
  );
  const { key } = await createKey(h.db, name);
  const app = createApp({ db: h.db, store: h.store, authCacheMs: 0 });
  const job = await h.submit(tinySpec({
    method: "grpo",
    warmup: { skip: true },
    steps: 3,
    eval_every: 2,
    checkpoint_every: 2,
    eval: { episodes: 1, splits: ["test_seen"] },
  }));
  const seen: Record<string, unknown>[] = [];
  const registry = trainerRegistry((handler) => (ctx) =>
    handler({
      ...ctx,
      get draining() {
        return ctx.draining;
      },
      setProgress: async (p) => {
        await ctx.setProgress(p);
        const res = await app.request(`/v1/jobs/${job.id}`, {
          headers: { authorization: `Bearer ${key}` },
        });
        seen.push((await res.json()).progress);
      },
    })
  );
  const worker = new Worker({
    db: h.db,
    store: h.store,
    registry,
    pollMs: 50,
    reaperIntervalMs: 0,
  });
  const started = performance.now();
  assert.equal(await runOne(worker), "succeeded", await h.error(job.id));
  const jobSeconds = (performance.now() - started) / 1000;

  const shown = JSON.stringify(seen);
  // Update 1 (the step-0 evaluation before it): nothing timed yet.
  const first = seen.findIndex((p) => p.step === 1);
  assert.ok(first > 0, shown);
  assert.ok(seen.slice(0, first).every((p) => !("eta_s" in p)), shown);
  // Updates 2 and 3, with update 2's evaluation and checkpoint: an ETA at every write.
  const later = seen.slice(first);
  assert.ok(later.some((p) => p.stage === "eval" && p.step === 2), shown);
  assert.ok(later.some((p) => p.stage === "rollout" && p.step === 1), shown);
  for (const p of later) {
    const eta = p.eta_s as number;
    assert.ok(Number.isInteger(eta) && eta >= 0 && eta <= 3 * jobSeconds, shown);
  }
  assert.equal(seen.at(-1)!.stage, "done");
  assert.equal(seen.at(-1)!.eta_s, 0);
});

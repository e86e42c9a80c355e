/**
 * The metrics of a job that evaluates every `eval_every` updates, through the real worker on
 * Postgres and the S3 protocol: a step without an evaluation records no evaluation value at all
 * (no rates, no `seconds_eval`), so the dashboard's curves and legends show none there, not 0.
 */
import assert from "node:assert/strict";
import { metricsByStep, openJobHarness, runOne, tinySpec } from "../_jobs.ts";

Deno.test("a step without an evaluation records no evaluation rates and no evaluation seconds", async () => {
  await using h = await openJobHarness();
  const job = await h.submit(tinySpec({
    method: "grpo",
    warmup: { skip: true },
    steps: 3,
    eval_every: 2,
    checkpoint_every: 2,
    eval: { episodes: 1, splits: ["test_seen"] },
  }));
  assert.equal(await runOne(h.worker({})), "succeeded", await h.error(job.id));
  const metrics = await metricsByStep(h.db, job.id);
  // Evaluated at step 0, every 2nd update and the last.
  for (const step of [0, 2, 3]) {
    const m = metrics.get(step)!;
    assert.equal(typeof m["eval/test_seen/success_rate"], "number", `step ${step}`);
    assert.ok(m.seconds_eval > 0, `step ${step}: ${m.seconds_eval}`);
  }
  const trained = metrics.get(1)!;
  assert.equal(typeof trained.success_rate, "number");
  assert.equal(typeof trained.seconds_rollout, "number");
  const evalNames = Object.keys(trained).filter((k) =>
    k.startsWith("eval/") || k === "seconds_eval"
  );
  assert.deepEqual(evalNames, []);
});

/**
 * A job whose spec leaves `env.max_turns` out (parsed directly, as bench/ and a deployment's own
 * tools do, with no API to fill it in) runs its episodes to the environment's own turn limit.
 */
import assert from "node:assert/strict";
import { getEnvironment } from "../../../workers/envs/mod.ts";
import { metricsByStep, openJobHarness, runOne, tinySpec } from "./_jobs.ts";

Deno.test("a household job without env.max_turns cuts its episodes at household's default (30), not 20", async () => {
  assert.equal(getEnvironment("household").defaultMaxTurns, 30);
  await using h = await openJobHarness();
  const { db } = h;
  const worker = h.worker({});
  const job = await h.submit(tinySpec({
    method: "grpo",
    env: { id: "household", history: 0 },
    rollout: { tasks_per_step: 1, group_size: 2, max_new_tokens: 4 },
    warmup: { skip: true },
    steps: 1,
    eval_every: 0,
    eval: { episodes: 1, splits: ["test_seen"] },
  }));
  assert.equal((job.spec as { env: { max_turns?: number } }).env.max_turns, undefined);
  const status = await runOne(worker);
  assert.equal(status, "succeeded", await h.error(job.id));
  const step = (await metricsByStep(db, job.id)).get(1)!;
  // An untrained tiny policy rarely finishes a household task: its episodes run to the cut-off.
  assert.ok(step.mean_turns > 20 && step.mean_turns <= 30, `mean_turns ${step.mean_turns}`);
});

/**
 * The policy warm-up's held-out checks and the skill check, run as a job: `warmup_check` events
 * every `check_every` optimizer steps, a stop at the first check that reaches `target_success`,
 * and one `warmup_skill_check` event with its step-0 metrics.
 */
import assert from "node:assert/strict";
import { listEvents } from "../../../../jobs/mod.ts";
import { metricsByStep, ONE_THREAD, openJobHarness, runOne, tinySpec } from "../_jobs.ts";

const checked = (policy: Record<string, unknown>) =>
  tinySpec({
    method: "sft",
    warmup: {
      policy: {
        episodes: 2,
        epochs: 3,
        batch_size: 2,
        check_every: 2,
        check_episodes: 2,
        ...policy,
      },
      analyzer: { episodes: 0 },
    },
    steps: 0,
    eval: { episodes: 1, splits: ["test_seen"] },
  });

Deno.test("warm-up checks", async (t) => {
  await using h = await openJobHarness();
  const run = async (policy: Record<string, unknown>) => {
    const job = await h.submit(checked(policy));
    const status = await runOne(h.worker(ONE_THREAD));
    assert.equal(status, "succeeded", await h.error(job.id));
    const events = await listEvents(h.db, job.id, { limit: 1000 });
    const data = (type: string) =>
      events.filter((e) => e.type === type).map((e) => e.data as Record<string, unknown>);
    const weights = await h.file(job.id, 0, "model.safetensors");
    return { metrics: (await metricsByStep(h.db, job.id)).get(0)!, data, weights };
  };

  await t.step("a target that the first check reaches stops the policy stage there", async () => {
    const { metrics, data } = await run({ target_success: 0 });
    const checks = data("warmup_check");
    assert.equal(checks.length, 1);
    assert.equal(checks[0].done, 2);
    assert.equal(checks[0].reached, true);
    assert.equal(checks[0].target, 0);
    assert.equal(checks[0].episodes, 2);
    assert.equal(metrics.warmup_policy_optimizer_steps, 2);
    assert.equal(metrics.warmup_policy_checks, 1);
    assert.equal(metrics.warmup_policy_stopped_at_target, 1);
    assert.equal(metrics.warmup_policy_check_success, checks[0].success);
  });

  await t.step(
    "without a target every check runs and the stage trains all its epochs",
    async () => {
      const { metrics, data } = await run({});
      const steps = metrics.warmup_policy_optimizer_steps;
      // 3 epochs of at least one batch; a check after every second step but the last.
      assert.ok(steps >= 3, `optimizer steps ${steps}`);
      const dones = data("warmup_check").map((c) => c.done);
      assert.deepEqual(
        dones,
        Array.from({ length: Math.floor((steps - 1) / 2) }, (_, i) => 2 * (i + 1)),
      );
      assert.ok(data("warmup_check").every((c) => c.reached === false && !("target" in c)));
      assert.equal(metrics.warmup_policy_stopped_at_target, 0);
    },
  );

  await t.step("checks without a target leave the warmed weights bit-identical", async () => {
    const checked = await run({});
    const unchecked = await run({ check_every: 0, check_episodes: 0 });
    assert.ok(checked.weights.length > 0);
    assert.deepEqual(checked.weights, unchecked.weights);
    assert.equal(unchecked.data("warmup_check").length, 0);
  });

  await t.step("the skill check after the warm-up is one event and step-0 metrics", async () => {
    const { metrics, data } = await run({ target_success: 0 });
    const [check] = data("warmup_skill_check");
    assert.equal(data("warmup_skill_check").length, 1);
    assert.equal(check.episodes, 2);
    for (const k of ["success", "success_with_skill", "delta_lost", "lost_scored", "lost_tokens"]) {
      assert.equal(metrics[`warmup_skill_check_${k}`], check[k], k);
    }
    // An untrained policy in 3 turns loses every episode; each has a reference skill to read.
    assert.equal(check.success, 0);
    assert.equal(check.lost_scored, 2);
    assert.ok((check.lost_tokens as number) > 0);
    assert.ok(Number.isFinite(check.delta_lost) && check.delta_lost !== 0);
  });
});

Deno.test("a job without check_episodes runs no checks", async () => {
  await using h = await openJobHarness();
  const job = await h.submit(checked({ check_every: 0, check_episodes: 0 }));
  assert.equal(await runOne(h.worker(ONE_THREAD)), "succeeded", await h.error(job.id));
  const types = (await listEvents(h.db, job.id, { limit: 1000 })).map((e) => e.type);
  assert.ok(!types.includes("warmup_check") && !types.includes("warmup_skill_check"));
  const metrics = (await metricsByStep(h.db, job.id)).get(0)!;
  assert.ok(!Object.keys(metrics).some((k) => k.includes("check")));
});

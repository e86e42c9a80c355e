import assert from "node:assert/strict";
import { listEvents, listTrajectoryDumps, readTrajectoryDump } from "../../../jobs/mod.ts";
import { metricsByStep, ONE_THREAD, openJobHarness, runOne, tinySpec } from "./_jobs.ts";

Deno.test('a job with eval.skills "library" reports success with and without the skill at every evaluation', async () => {
  await using h = await openJobHarness();
  const { db, store } = h;
  const job = await h.submit(tinySpec({ steps: 1, eval: { episodes: 2, skills: "library" } }));
  const result = await runOne(h.worker(ONE_THREAD));
  assert.equal(result, "succeeded", await h.error(job.id));
  const metrics = await metricsByStep(db, job.id);
  for (const step of [0, 1]) {
    const m = metrics.get(step)!;
    for (const split of ["test_seen", "test_unseen"]) {
      for (
        const key of [
          "success_rate",
          "with_skill/success_rate",
          "with_skill/score",
          "skill_coverage",
        ]
      ) {
        assert.ok(
          Number.isFinite(m[`eval/${split}/${key}`]),
          `step ${step} eval/${split}/${key}`,
        );
      }
    }
  }
  // Step 0 comes right after warm-up: the library is empty, so no prompt changed.
  assert.equal(metrics.get(0)!["eval/test_seen/skill_coverage"], 0);
  assert.equal(
    metrics.get(0)!["eval/test_seen/with_skill/success_rate"],
    metrics.get(0)!["eval/test_seen/success_rate"],
  );
  const dumps = (await listTrajectoryDumps(db, job.id)).filter((d) => d.kind === "eval");
  assert.deepEqual(dumps.map((d) => d.step), [0, 1]);
  const report = await readTrajectoryDump(store, dumps[1]) as {
    splits: { split: string; success_rate: number; with_skill: { success_rate: number } }[];
  };
  for (const s of report.splits) {
    assert.equal(s.success_rate, metrics.get(1)![`eval/${s.split}/success_rate`]);
    assert.equal(
      s.with_skill.success_rate,
      metrics.get(1)![`eval/${s.split}/with_skill/success_rate`],
    );
  }
  const evalEvents = (await listEvents(db, job.id, { limit: 1000 })).filter((e) =>
    e.type === "eval"
  );
  assert.ok(
    evalEvents.every((e) => typeof (e.data as { with_skill?: unknown }).with_skill === "object"),
  );
  const steps = (await listEvents(db, job.id, { limit: 1000 })).filter((e) => e.type === "step");
  assert.ok("zero_advantage_group_share" in (steps[0].data as Record<string, unknown>));
});

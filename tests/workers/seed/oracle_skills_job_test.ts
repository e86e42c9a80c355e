import assert from "node:assert/strict";
import { getSkillLibrary, readSkillLibrary } from "../../../jobs/mod.ts";
import { skillLibraryJson } from "../../../workers/skills/mod.ts";
import { metricsByStep, ONE_THREAD, openJobHarness, runOne, tinySpec } from "./_jobs.ts";

Deno.test("a seed job with seed.skill_source reference distils from the environment's reference skills", async () => {
  await using h = await openJobHarness();
  // 2 tasks × 2 copies: 4 trajectories per update, every one analysed (`analyze: "all"`).
  const job = await h.submit(tinySpec({ seed: { skill_source: "reference" } }));
  assert.equal(await runOne(h.worker(ONE_THREAD)), "succeeded", await h.error(job.id));
  const metrics = await metricsByStep(h.db, job.id);
  // No analyzer warm-up: the policy's analyzer is never read.
  assert.ok("warmup_policy_last_loss" in metrics.get(0)!);
  assert.ok(!Object.keys(metrics.get(0)!).some((k) => k.startsWith("warmup_analyzer")));
  for (const step of [1, 2]) {
    const m = metrics.get(step)!;
    assert.equal(m.reference_analyses, 4, `step ${step}`);
    assert.equal(m.analyzer_parse_rate, 1, `step ${step}`);
    // Sokoban's judge compares each skill with its reference analysis: all of them match.
    assert.equal(m.skill_truthful_rate, 1, `step ${step}`);
    assert.equal(m.skill_well_formed_rate, 1, `step ${step}`);
    // Every turn has a teacher prompt.
    assert.equal(m.teacher_samples, m.samples, `step ${step}`);
  }
  const library = skillLibraryJson.parse(
    await readSkillLibrary(h.store, (await getSkillLibrary(h.db, job.id))!),
  );
  const sightings = library.skills.flatMap((s) => s.provenance);
  assert.ok(sightings.length > 0);
  assert.ok(sightings.every((p) => p.source === "reference"), JSON.stringify(sightings));
});

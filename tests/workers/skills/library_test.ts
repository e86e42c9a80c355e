import assert from "node:assert/strict";
import { normalizeSkill, SkillLibrary } from "../../../workers/skills/mod.ts";
import { SkillError } from "../../../workers/seed/errors.ts";

function sighting(step: number, trajectoryId: string, success: boolean, gap: number | null) {
  return { step, taskId: `task-${trajectoryId}`, trajectoryId, success, meanTeacherGap: gap };
}

Deno.test("normalisation lowercases, collapses whitespace and strips end punctuation", () => {
  assert.equal(normalizeSkill("  Push the box UP,\n  then left!! "), "push the box up, then left");
  assert.equal(normalizeSkill('"[Open the drawer.]"'), "open the drawer");
  assert.equal(normalizeSkill("..."), "");
});

Deno.test("skills that normalise alike merge their counts and provenance", () => {
  const library = new SkillLibrary("job-1");
  const first = library.add("Push the box up first.", sighting(1, "t1", true, 0.5), "won");
  const second = library.add("  push the box UP first ", sighting(3, "t7", false, 1.5));
  const third = library.add("Avoid corners.", sighting(2, "t2", false, null));
  assert.equal(first.added, true);
  assert.equal(second.added, false);
  assert.equal(third.added, true);
  assert.equal(library.size, 2);
  const record = library.get("PUSH THE BOX UP FIRST!")!;
  assert.equal(record.text, "Push the box up first.");
  assert.equal(record.summary, "won");
  assert.equal(record.timesSeen, 2);
  assert.equal(record.successCount, 1);
  assert.equal(record.failureCount, 1);
  assert.equal(record.firstStep, 1);
  assert.equal(record.lastStep, 3);
  assert.equal(record.meanTeacherGap, 1.0);
  assert.deepEqual(record.provenance.map((p) => [p.jobId, p.step, p.trajectoryId]), [
    ["job-1", 1, "t1"],
    ["job-1", 3, "t7"],
  ]);
  assert.equal(library.get("Avoid corners")!.meanTeacherGap, null);
  assert.equal(library.step, 3);
});

Deno.test("provenance keeps the most recent sightings while counts keep all", () => {
  const library = new SkillLibrary("job-1", { maxProvenance: 2 });
  for (let step = 1; step <= 4; step++) {
    library.add("same rule", sighting(step, `t${step}`, true, null));
  }
  const record = library.get("same rule")!;
  assert.equal(record.timesSeen, 4);
  assert.deepEqual(record.provenance.map((p) => p.step), [3, 4]);
});

Deno.test("top ranks by the chosen field", () => {
  const library = new SkillLibrary("job-1");
  library.add("a", sighting(1, "t1", true, 0.1));
  library.add("b", sighting(2, "t2", false, 2.0));
  library.add("b", sighting(5, "t3", false, 1.0));
  library.add("c", sighting(3, "t4", true, null));
  assert.deepEqual(library.top(2).map((r) => r.text), ["b", "a"]);
  assert.deepEqual(library.top(3, "meanTeacherGap").map((r) => r.text), ["b", "a", "c"]);
  assert.deepEqual(library.top(3, "lastStep").map((r) => r.text), ["b", "c", "a"]);
  assert.deepEqual(library.top(3, "successRate").map((r) => r.text), ["a", "c", "b"]);
  assert.deepEqual(library.top(0), []);
});

Deno.test("the library round-trips through its versioned JSON", () => {
  const library = new SkillLibrary("job-9");
  library.add("Check the price before clicking buy.", sighting(4, "t1", true, 0.25), "bought it");
  library.add("check the price before clicking buy", sighting(6, "t2", true, 0.75));
  library.add("Search exact words.", sighting(6, "t3", false, null));
  const json = library.toJSON();
  assert.equal(json.version, 1);
  assert.equal(json.job_id, "job-9");
  assert.equal(json.step, 6);
  assert.equal(json.skills[0].times_seen, 2);
  assert.equal(json.skills[0].mean_teacher_gap, 0.5);
  assert.equal(json.skills[0].provenance[1].trajectory_id, "t2");
  const restored = SkillLibrary.fromJSON(JSON.parse(JSON.stringify(json)));
  assert.deepEqual(restored.toJSON(), json);
  // Resume keeps merging: the gap mean continues from the stored count.
  restored.add("Check the price before clicking buy!", sighting(7, "t4", true, 2.0));
  assert.equal(restored.get("check the price before clicking buy")!.meanTeacherGap, 1.0);
  assert.equal(restored.get("check the price before clicking buy")!.timesSeen, 3);
});

Deno.test("malformed or duplicated stored libraries are rejected", () => {
  assert.throws(
    () => SkillLibrary.fromJSON({ version: 2, job_id: "j", step: 0, skills: [] }),
    SkillError,
  );
  assert.throws(
    () => SkillLibrary.fromJSON({ version: 1, job_id: "j", step: -1, skills: [] }),
    SkillError,
  );
  const library = new SkillLibrary("j");
  library.add("rule", sighting(1, "t1", true, null));
  const json = library.toJSON();
  json.skills.push({ ...json.skills[0], text: "Rule." });
  assert.throws(() => SkillLibrary.fromJSON(json), /distinct/);
});

Deno.test("an empty skill is not added", () => {
  assert.throws(() => new SkillLibrary("j").add(" ?! ", sighting(1, "t", true, null)), SkillError);
});

Deno.test("a sighting's source (policy or reference analyzer) survives the stored form", () => {
  const library = new SkillLibrary("job-1");
  library.add("push up", { ...sighting(1, "t1", true, null), source: "reference" });
  library.add("push up", { ...sighting(2, "t2", true, null), source: "policy" });
  library.add("push up", sighting(3, "t3", true, null));
  const json = library.toJSON(3);
  assert.deepEqual(json.skills[0].provenance.map((p) => p.source), [
    "reference",
    "policy",
    undefined,
  ]);
  const restored = SkillLibrary.fromJSON(JSON.parse(JSON.stringify(json)));
  assert.deepEqual(
    restored.get("push up")!.provenance.map((p) => p.source),
    ["reference", "policy", undefined],
  );
});

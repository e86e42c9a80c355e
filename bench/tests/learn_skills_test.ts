/**
 * bench/_learn_skills.ts on a real skill library: which committed libraries become
 * `skills.jsonl` lines, and that each line holds the library's skill texts and counts as stored.
 */
import assert from "node:assert/strict";
import { skillLines } from "../_learn_skills.ts";
import { SkillLibrary } from "../../workers/skills/library.ts";

const RUN = { env: "sokoban", arm: "seed-oracle", method: "seed", seed: 2 };

/** A library as a job commits it: empty at step 0, two skills by step 3, one more sighting by 6. */
function committed(): Map<number, unknown> {
  const library = new SkillLibrary("job-1");
  const out = new Map<number, unknown>([[0, library.toJSON(0)]]);
  const sighting = (step: number, success: boolean, gap: number | null) => ({
    step,
    taskId: `t${step}`,
    trajectoryId: `r${step}-${success}`,
    success,
    meanTeacherGap: gap,
    source: "reference" as const,
  });
  library.add("Push the box left before pushing it up.", sighting(2, true, 0.25), "won in 4");
  library.add("Do not push a box into a corner.", sighting(3, false, -0.5));
  out.set(3, library.toJSON(3));
  library.add("push the box LEFT before pushing it up", sighting(6, false, 0.75));
  out.set(6, library.toJSON(6));
  return out;
}

Deno.test("skill lines skip step 0 and keep each committed library in step order", () => {
  const lines = skillLines(RUN, committed()).map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => l.step), [3, 6]);
  assert.deepEqual(
    lines.map((l) => [l.env, l.arm, l.method, l.seed, l.skill_count]),
    [["sokoban", "seed-oracle", "seed", 2, 2], ["sokoban", "seed-oracle", "seed", 2, 2]],
  );
  const last = lines[1].library;
  assert.equal(last.version, 1);
  assert.equal(last.step, 6);
  assert.deepEqual(
    last.skills.map((
      s: Record<string, unknown>,
    ) => [s.text, s.times_seen, s.success_count, s.failure_count, s.mean_teacher_gap]),
    [
      ["Push the box left before pushing it up.", 2, 1, 1, 0.5],
      ["Do not push a box into a corner.", 1, 0, 1, -0.5],
    ],
  );
  assert.equal(last.skills[0].summary, "won in 4");
  assert.deepEqual(last.skills[0].provenance.map((p: { step: number }) => p.step), [2, 6]);
});

Deno.test("a run whose method commits no library gets no skill lines", () => {
  assert.deepEqual(skillLines({ ...RUN, arm: "grpo", method: "grpo" }, new Map()), []);
});

Deno.test("a library not in the stored format is refused with its run and step named", () => {
  assert.throws(
    () => skillLines(RUN, new Map([[4, { version: 2, skills: [] }]])),
    /sokoban seed-oracle seed 2 at step 4 must match version 1 of the stored format: version/,
  );
});

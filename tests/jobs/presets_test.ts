import assert from "node:assert/strict";
import { SOKOBAN_SEED } from "../../api/demo/specs.ts";
import { parseJobSpec } from "../../jobs/mod.ts";
import { DEMO_PRESETS } from "../../jobs/presets.ts";

Deno.test("the demo submits the trainer's tuned sokoban preset", () => {
  assert.equal(SOKOBAN_SEED, DEMO_PRESETS.sokoban);
});

Deno.test("every demo preset is a valid JobSpec for the environment its name starts with", () => {
  for (const [name, spec] of Object.entries(DEMO_PRESETS)) {
    assert.equal(parseJobSpec(spec).env.id, name.split("-")[0]);
  }
});

Deno.test("the hard presets draw two-box 7x7 rooms and all six household families, with the skill check", () => {
  const sokoban = parseJobSpec(DEMO_PRESETS["sokoban-hard"]);
  assert.equal(sokoban.env.options.size, 7);
  assert.equal(sokoban.env.options.boxes, 2);
  const household = parseJobSpec(DEMO_PRESETS["household-hard"]);
  assert.equal(household.env.options.families, undefined, "no family filter: all six");
  for (const spec of [sokoban, household]) {
    assert.ok(spec.warmup.policy.check_episodes > 0, "the warm-up's skill check runs");
  }
});

Deno.test("the JobSpec reference's fuller example is the demo preset, verbatim", async () => {
  const doc = await Deno.readTextFile(new URL("../../jobs/SPEC.md", import.meta.url));
  assert.ok(
    doc.includes("```json\n" + JSON.stringify(DEMO_PRESETS.sokoban, null, 2) + "\n```"),
    "jobs/SPEC.md's example differs from jobs/presets.ts: run `deno task docs:spec`",
  );
});

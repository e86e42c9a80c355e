import assert from "node:assert/strict";
import { SOKOBAN_SEED } from "../../api/demo/specs.ts";
import { parseJobSpec } from "../../jobs/mod.ts";
import { DEMO_PRESETS } from "../../jobs/presets.ts";

Deno.test("the demo submits the trainer's tuned sokoban preset", () => {
  assert.equal(SOKOBAN_SEED, DEMO_PRESETS.sokoban);
});

Deno.test("every demo preset is a valid JobSpec for its environment", () => {
  for (const [envId, spec] of Object.entries(DEMO_PRESETS)) {
    assert.equal(parseJobSpec(spec).env.id, envId);
  }
});

Deno.test("the JobSpec reference's fuller example is the demo preset, verbatim", async () => {
  const doc = await Deno.readTextFile(new URL("../../jobs/SPEC.md", import.meta.url));
  assert.ok(
    doc.includes("```json\n" + JSON.stringify(DEMO_PRESETS.sokoban, null, 2) + "\n```"),
    "jobs/SPEC.md's example differs from jobs/presets.ts: run `deno task docs:spec`",
  );
});

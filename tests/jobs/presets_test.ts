import assert from "node:assert/strict";
import { SOKOBAN_SEED } from "../../api/demo_specs.ts";
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

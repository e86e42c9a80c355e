import assert from "node:assert/strict";
import { SOKOBAN_SEED } from "../../api/demo/specs.ts";
import { ENV_CATALOG } from "../../jobs/env_catalog.ts";
import { parseJobSpec } from "../../jobs/mod.ts";
import { DEMO_PRESETS, PRESET_FIELD_REASONS } from "../../jobs/presets.ts";
import { armDefaults } from "../../jobs/spec.ts";

Deno.test("the demo submits the trainer's tuned sokoban preset", () => {
  assert.equal(SOKOBAN_SEED, DEMO_PRESETS.sokoban);
});

Deno.test("every demo preset is a valid JobSpec for the environment its name starts with", () => {
  for (const [name, spec] of Object.entries(DEMO_PRESETS)) {
    assert.equal(parseJobSpec(spec).env.id, name.split("-")[0]);
  }
});

Deno.test("the hard preset draws all six household families, with the skill check", () => {
  const household = parseJobSpec(DEMO_PRESETS["household-hard"]);
  assert.equal(household.env.options.families, undefined, "no family filter: all six");
  assert.ok(household.warmup.policy.check_episodes > 0, "the warm-up's skill check runs");
  assert.equal(household.experimental.corrective_share, 0.25);
});

Deno.test("the JobSpec reference's fuller example is the demo preset, verbatim", async () => {
  const doc = await Deno.readTextFile(new URL("../../jobs/SPEC.md", import.meta.url));
  assert.ok(
    doc.includes("```json\n" + JSON.stringify(DEMO_PRESETS.sokoban, null, 2) + "\n```"),
    "jobs/SPEC.md's example differs from jobs/presets.ts: run `deno task docs:spec`",
  );
});

/** Every leaf of `value` by dotted path; `env.options` (the environment's own object) is a leaf. */
function leaves(value: unknown, path = ""): [string, unknown][] {
  if (
    value === null || typeof value !== "object" || Array.isArray(value) || path === "env.options"
  ) {
    return [[path, value]];
  }
  return Object.entries(value).flatMap(([k, v]) => leaves(v, path ? `${path}.${k}` : k));
}

/** The reason listed for `path`: its own, or that of a path above it. */
function reasonOf(path: string): string | undefined {
  const parts = path.split(".");
  for (let n = parts.length; n > 0; n--) {
    const reason = PRESET_FIELD_REASONS[parts.slice(0, n).join(".")];
    if (reason !== undefined) return reason;
  }
  return undefined;
}

Deno.test("a preset sets only fields that differ from the schema defaults, each listed with its reason", () => {
  for (const [name, preset] of Object.entries(DEMO_PRESETS)) {
    const envId = name.split("-")[0];
    const defaults = new Map(leaves(parseJobSpec({ env: { id: envId } })));
    const maxTurns = ENV_CATALOG.envs.find((e) => e.id === envId)?.default_max_turns;
    defaults.set("env.max_turns", maxTurns);
    for (const [path, value] of leaves(preset)) {
      if (path === "env.id") continue;
      assert.notDeepEqual(
        value,
        defaults.get(path),
        `${envId}: ${path} repeats its default ${JSON.stringify(value)}: leave it out`,
      );
      assert.ok(
        reasonOf(path),
        `${envId}: ${path} differs from its default (${JSON.stringify(defaults.get(path))} → ` +
          `${JSON.stringify(value)}) but PRESET_FIELD_REASONS gives no reason`,
      );
    }
  }
});

Deno.test("a bare sokoban job runs the presets' shared RL and analyzer settings", () => {
  const bare = parseJobSpec({ env: { id: "sokoban" } });
  for (const preset of Object.values(DEMO_PRESETS)) {
    const full = parseJobSpec(preset);
    // The optimizer fields a preset sets are listed with their reasons (test above).
    assert.deepEqual({ ...bare.optim, ...preset.optim }, full.optim);
    assert.deepEqual(bare.advantage, { ...full.advantage, ...armDefaults("seed", "sokoban") });
    assert.equal(bare.seed.analyzer_max_field_chars, full.seed.analyzer_max_field_chars);
    assert.equal(bare.warmup.analyzer.lr, full.warmup.analyzer.lr);
    assert.equal(bare.warmup.analyzer.batch_size, full.warmup.analyzer.batch_size);
  }
  assert.deepEqual(
    { ...bare.optim },
    { ...bare.optim, lr: 3e-4, mini_batch_size: 256, entropy_coef: 0, lr_schedule: "warmup" },
  );
});

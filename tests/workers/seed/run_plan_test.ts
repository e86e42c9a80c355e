import assert from "node:assert/strict";
import { parseJobSpec } from "../../../jobs/mod.ts";
import { runPlan } from "../../../workers/seed/run_plan.ts";
import { tinySpec } from "./_jobs.ts";

const plan = (o: Record<string, unknown>) => runPlan(parseJobSpec(tinySpec(o)));

Deno.test("a seed job analyses, distils with its opd_coef, keeps π_ref and warms up both roles", () => {
  assert.deepEqual(plan({ method: "seed", seed: { opd_coef: 0.5, analyze: "failed_only" } }), {
    steps: 2,
    warmup: ["warmup_policy", "warmup_analyzer"],
    analysis: true,
    analyze: "failed_only",
    skillSource: "policy",
    opd_coef: 0.5,
    reference: true,
  });
});

Deno.test("grpo, gigpo, and seed without analysis, run updates with λ_opd 0 and no analyzer warm-up", () => {
  for (
    const o of [{ method: "grpo" }, { method: "gigpo" }, {
      method: "seed",
      seed: { analyze: "none" },
    }]
  ) {
    const p = plan(o);
    assert.equal(p.analysis, false);
    assert.equal(p.opd_coef, 0);
    assert.deepEqual(p.warmup, ["warmup_policy"]);
    assert.equal(p.steps, 2);
  }
});

Deno.test("an sft job only warms up: no updates, no π_ref, the analyzer stage included", () => {
  const p = plan({ method: "sft" });
  assert.equal(p.steps, 0);
  assert.equal(p.reference, false);
  assert.deepEqual(p.warmup, ["warmup_policy", "warmup_analyzer"]);
});

Deno.test("kl_coef 0 drops π_ref and warmup.skip drops every warm-up stage", () => {
  const p = plan({ optim: { kl_coef: 0 }, warmup: { skip: true } });
  assert.equal(p.reference, false);
  assert.deepEqual(p.warmup, []);
});

Deno.test("a seed job with reference skills analyses and distils without analyzer warm-up or replay", () => {
  const p = plan({ method: "seed", seed: { opd_coef: 0.5, skill_source: "reference" } });
  assert.equal(p.analysis, true);
  assert.equal(p.skillSource, "reference");
  assert.equal(p.opd_coef, 0.5);
  assert.deepEqual(p.warmup, ["warmup_policy"]);
});

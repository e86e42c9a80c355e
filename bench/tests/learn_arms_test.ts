import assert from "node:assert/strict";
import { ARMS, parseArms } from "../_learn_arms.ts";
import { parseJobSpec } from "../../jobs/spec.ts";

Deno.test("parseArms keeps the arms in order and refuses unknown, repeated or baseline-less lists", () => {
  assert.deepEqual(parseArms("grpo,gigpo,seed,seed-gigpo,seed-oracle", "grpo"), {
    arms: ["grpo", "gigpo", "seed", "seed-gigpo", "seed-oracle"],
    baseline: "grpo",
  });
  assert.deepEqual(parseArms("seed,grpo", "grpo").arms, ["seed", "grpo"]);
  assert.throws(() => parseArms("grpo,ppo", "grpo"), /--arms .*current value is ppo/);
  assert.throws(() => parseArms("grpo,grpo", "grpo"), /--arms as its arms must differ/);
  assert.throws(() => parseArms("", "grpo"), /--arms as it must name at least one arm/);
  assert.throws(() => parseArms("seed,gigpo", "grpo"), /--baseline .*current value is grpo/);
});

Deno.test("each arm is its method plus at most one field, and parses as a JobSpec", () => {
  const arm = (name: string) =>
    parseJobSpec({ ...ARMS[name].spec, method: ARMS[name].method, env: { id: "sokoban" } });
  const row = (name: string) => {
    const s = arm(name);
    return [s.method, s.advantage.estimator, s.advantage.norm, s.seed.skill_source];
  };
  assert.deepEqual(row("grpo"), ["grpo", "grpo", "mean_std", "policy"]);
  assert.deepEqual(row("gigpo"), ["gigpo", "gigpo", "mean", "policy"]);
  assert.deepEqual(row("seed"), ["seed", "grpo", "mean_std", "policy"]);
  assert.deepEqual(row("seed-gigpo"), ["seed", "gigpo", "mean", "policy"]);
  assert.deepEqual(row("seed-oracle"), ["seed", "grpo", "mean_std", "reference"]);
});

Deno.test("on household only the oracle arm defaults to critical-step skills (the policy's analyzer writes none)", () => {
  const counts = Object.entries(ARMS).map(([name, a]) => [
    name,
    parseJobSpec({ ...a.spec, method: a.method, env: { id: "household" } }).seed.max_step_skills,
  ]);
  assert.deepEqual(counts, [
    ["grpo", 0],
    ["gigpo", 0],
    ["seed", 0],
    ["seed-gigpo", 0],
    ["seed-oracle", 5],
  ]);
});

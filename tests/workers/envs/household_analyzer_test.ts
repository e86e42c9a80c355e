import assert from "node:assert/strict";
import {
  HOUSEHOLD_MAX_TURNS,
  householdEnvironment as env,
  HouseholdEpisode,
  householdScenario,
} from "../../../workers/envs/household/mod.ts";
import { analyzeHousehold, diagnoses, replay } from "../../../workers/envs/household/analyzer.ts";
import { expertPlan } from "../../../workers/envs/household/expert.ts";
import type { Family } from "../../../workers/envs/household/world.ts";
import type { SkillAnalysis, Task } from "../../../workers/envs/types.ts";
import { wordsOf } from "../../../workers/envs/prompt.ts";
import { runActions } from "./household_helpers.ts";

function taskOf(family: Family, seed = 1): Task {
  return env.sampleTasks("train", 1, seed, { families: [family] })[0];
}

function analyze(task: Task, actions: string[]): SkillAnalysis {
  const trajectory = runActions(env, task, actions);
  const episode = new HouseholdEpisode(task, householdScenario(task), HOUSEHOLD_MAX_TURNS);
  const { analysis } = analyzeHousehold(trajectory, episode);
  const vocabulary = new Set(env.vocabulary());
  const text = `${analysis.episode_summary} ${analysis.episode_skill}`;
  assert.deepEqual(wordsOf(text).filter((w) => !vocabulary.has(w)), []);
  return analysis;
}

Deno.test("a success names the object, where it was, the tool and the target receptacle", () => {
  const task = taskOf("clean_then_place", 3);
  const scenario = householdScenario(task);
  const plan = expertPlan(scenario);
  const analysis = analyze(task, plan);
  const obj = plan.find((a) => a.startsWith("take "))!.split(" from ")[0].slice(5);
  const start = scenario.objects.find((o) => o.name === obj)!.location;
  const target = plan[plan.length - 1].split(" in/on ")[1];
  assert.ok(analysis.episode_summary.startsWith("Success"));
  assert.ok(analysis.episode_summary.includes(`found the ${obj} at ${start}`));
  assert.ok(analysis.episode_summary.includes("cleaned it with sinkbasin 1"));
  assert.ok(analysis.episode_summary.includes(`put it in ${target}`));
  assert.ok(analysis.episode_skill.includes(`clean the ${scenario.goal.objectType} with`));
  assert.ok(analysis.episode_skill.includes(scenario.goal.targetType));
});

Deno.test("every family's success skill mentions its object type and target", () => {
  for (const family of env.families as Family[]) {
    const task = taskOf(family, 8);
    const { goal } = householdScenario(task);
    const analysis = analyze(task, expertPlan(householdScenario(task)));
    assert.ok(analysis.episode_summary.startsWith("Success"), family);
    assert.ok(analysis.episode_skill.includes(goal.objectType), family);
    assert.ok(analysis.episode_skill.includes(goal.targetType), family);
  }
});

Deno.test("forgetting to clean before placing is named as the mistake", () => {
  const task = taskOf("clean_then_place", 4);
  const plan = expertPlan(householdScenario(task)).filter((a) => !a.startsWith("clean "));
  const analysis = analyze(task, plan);
  const obj = plan.find((a) => a.startsWith("take "))!.split(" from ")[0].slice(5);
  assert.ok(analysis.episode_summary.startsWith("Failure"));
  assert.ok(analysis.episode_skill.includes(`forgot to clean the ${obj} before putting it in`));
});

Deno.test("never finding the object names where it actually was", () => {
  const task = taskOf("pick_and_place", 5);
  const scenario = householdScenario(task);
  const hiding = new Set(
    scenario.objects.filter((o) => o.type === scenario.goal.objectType).map((o) => o.location),
  );
  const elsewhere = scenario.layout.receptacles.filter((r) => !hiding.has(r.name));
  const actions = elsewhere.map((r) => `go to ${r.name}`);
  const analysis = analyze(task, [...actions, ...actions, ...actions]);
  assert.ok(analysis.episode_skill.includes(`never found a ${scenario.goal.objectType}`));
  for (const place of hiding) assert.ok(analysis.episode_skill.includes(`in ${place}`), place);
  assert.match(analysis.episode_summary, /Warning signs: visited .* 3 times/);
});

Deno.test("taking the wrong object is named with the object taken", () => {
  const task = taskOf("pick_and_place", 6);
  const scenario = householdScenario(task);
  const other = scenario.objects.find((o) => o.type !== scenario.goal.objectType)!;
  const actions = [`go to ${other.location}`];
  if (/^(cabinet|drawer|fridge|microwave|safe)/.test(other.location)) {
    actions.push(`open ${other.location}`);
  }
  actions.push(`take ${other.name} from ${other.location}`);
  const analysis = analyze(task, actions);
  assert.ok(analysis.episode_skill.includes(`took the wrong object: the ${other.name}`));
});

Deno.test("placing in the wrong receptacle names the receptacle used and the one needed", () => {
  const task = taskOf("pick_and_place", 7);
  const scenario = householdScenario(task);
  const plan = expertPlan(scenario);
  const put = plan[plan.length - 1];
  const [obj] = put.slice(4).split(" in/on ");
  const wrong = scenario.layout.receptacles.find((r) =>
    !r.openable && r.type !== scenario.goal.targetType && r.type !== "desklamp" &&
    !plan.includes(`go to ${r.name}`)
  )!;
  const upToTake = plan.slice(0, plan.findIndex((a) => a.startsWith("take ")) + 1);
  const analysis = analyze(task, [
    ...upToTake,
    `go to ${wrong.name}`,
    `put ${obj} in ${wrong.name}`,
  ]);
  assert.ok(
    analysis.episode_skill.includes(`put the ${obj} in ${wrong.name}, the wrong receptacle`),
  );
  assert.ok(analysis.episode_skill.includes(`needs a ${scenario.goal.targetType}`));
});

Deno.test("repeated invalid actions are named with their count", () => {
  const task = taskOf("heat_then_place", 2);
  const analysis = analyze(task, Array(env.defaultMaxTurns).fill("dance with the fridge"));
  assert.ok(analysis.episode_skill.includes("repeated invalid actions: 30 of 30"));
  assert.ok(analysis.episode_skill.includes("choose only actions from the admissible list"));
});

Deno.test("using the desklamp without the object is named for examine tasks", () => {
  const task = taskOf("examine_in_light", 2);
  const lamp = householdScenario(task).layout.receptacles.find((r) => r.type === "desklamp")!;
  const analysis = analyze(task, [`go to ${lamp.name}`, `use ${lamp.name}`]);
  assert.ok(analysis.episode_skill.includes(`used ${lamp.name} without holding a`));
});

Deno.test("bringing only one of two objects is named for pick-two tasks", () => {
  const task = taskOf("pick_two_and_place", 2);
  const plan = expertPlan(householdScenario(task));
  const firstPut = plan.findIndex((a) => a.startsWith("put "));
  const analysis = analyze(task, plan.slice(0, firstPut + 1));
  assert.ok(analysis.episode_skill.includes("put only one"));
});

Deno.test("putting the same object in the target twice still counts as one of two for pick-two tasks", () => {
  const task = taskOf("pick_two_and_place", 2);
  const scenario = householdScenario(task);
  const plan = expertPlan(scenario);
  const firstPut = plan.findIndex((a) => a.startsWith("put "));
  const [put, target] = plan[firstPut].split(" in/on ");
  const obj = put.slice("put ".length);
  const actions = [
    ...plan.slice(0, firstPut + 1),
    `take ${obj} from ${target}`,
    `put ${obj} in/on ${target}`,
  ];
  const trajectory = runActions(env, task, actions);
  assert.equal(trajectory.won, false);
  assert.equal(trajectory.steps.length, actions.length);
  assert.ok(trajectory.steps.every((s) => s.valid));
  const analysis = analyze(task, actions);
  const o = scenario.goal.objectType;
  assert.equal(
    analysis.episode_summary,
    `Failure after ${actions.length} steps: the agent put only one ${o} in the ` +
      `${scenario.goal.targetType} and never brought the second one.`,
  );
  const facts = replay(
    new HouseholdEpisode(task, scenario, env.defaultMaxTurns),
    actions,
  );
  const mistakes = diagnoses(scenario, facts).map(([mistake]) => mistake);
  assert.deepEqual(mistakes, [
    `put only one ${o} in the ${scenario.goal.targetType} and never brought the second one`,
  ]);
});

Deno.test("an object put in the target and taken back out is named as taken back, not as never put", () => {
  const task = taskOf("pick_two_and_place", 2);
  const scenario = householdScenario(task);
  const plan = expertPlan(scenario);
  const firstPut = plan.findIndex((a) => a.startsWith("put "));
  const [put, target] = plan[firstPut].split(" in/on ");
  const obj = put.slice("put ".length);
  const elsewhere =
    scenario.objects.find((x) =>
      x.location !== target && !x.location.startsWith(scenario.goal.targetType)
    )!.location;
  // The first object in, back out and into another receptacle; then the second one in: one
  // object in the target at the end.
  const actions = [
    ...plan.slice(0, firstPut + 1),
    `take ${obj} from ${target}`,
    `go to ${elsewhere}`,
    `put ${obj} in/on ${elsewhere}`,
    ...plan.slice(firstPut + 1),
  ];
  const trajectory = runActions(env, task, actions);
  assert.equal(trajectory.won, false);
  assert.ok(trajectory.steps.every((s) => s.valid));
  const analysis = analyze(task, actions);
  assert.equal(
    analysis.episode_summary,
    `Failure after ${actions.length} steps: the agent took the ${obj} from ${target} after ` +
      `putting it in the ${scenario.goal.targetType}.`,
  );
  const facts = replay(new HouseholdEpisode(task, scenario, env.defaultMaxTurns), actions);
  const mistakes = diagnoses(scenario, facts).map(([mistake]) => mistake);
  assert.deepEqual(mistakes, [
    `took the ${obj} from ${target} after putting it in the ${scenario.goal.targetType}`,
  ]);
  // The skill grammar (judge.ts) holds the new mistake: the reference skill is well-formed.
  const judged = env.judgeSkill!(trajectory, analysis.episode_skill);
  assert.deepEqual([judged.wellFormed, judged.truthful], [true, true]);
});

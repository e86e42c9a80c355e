import assert from "node:assert/strict";
import {
  HOUSEHOLD_MAX_TURNS,
  householdEnvironment as env,
  HouseholdEpisode,
  householdScenario,
} from "../../../workers/envs/household/mod.ts";
import {
  analyzeHousehold,
  diagnoses,
  replay,
  usualPlacesSkill,
  workflowRule,
} from "../../../workers/envs/household/analyzer.ts";
import { expertPlan } from "../../../workers/envs/household/expert.ts";
import type { Scenario } from "../../../workers/envs/household/world.ts";
import type { Task, Trajectory } from "../../../workers/envs/types.ts";
import { runActions } from "./household_helpers.ts";

/**
 * The first pick-two task whose two goal objects start in different receptacles, so the skill
 * lists two places (in scenario order) and two receptacles never visited.
 */
function pickTwoTask(): { task: Task; scenario: Scenario; goalObjects: Scenario["objects"] } {
  for (let seed = 1; seed < 200; seed++) {
    const task = env.sampleTasks("train", 1, seed, { families: ["pick_two_and_place"] })[0];
    const scenario = householdScenario(task);
    const goalObjects = scenario.objects.filter((o) => o.type === scenario.goal.objectType);
    if (goalObjects.length === 2 && goalObjects[0].location !== goalObjects[1].location) {
      return { task, scenario, goalObjects };
    }
  }
  throw new Error("no pick-two task with its goal objects in two receptacles");
}

/** The episode skill of the replay analysis (analyzer.ts), which names the trajectory's mistake. */
function replaySkill(trajectory: Trajectory): string {
  const task = trajectory.task;
  const episode = new HouseholdEpisode(task, householdScenario(task), HOUSEHOLD_MAX_TURNS);
  return analyzeHousehold(trajectory, episode).analysis.episode_skill;
}

/**
 * A lost trajectory with two real mistakes: 16 of its 30 actions are invalid (the replay analysis'
 * mistake) and it only visits receptacles that hold no goal object, so it never finds one.
 */
function lostTwice() {
  const { task, scenario, goalObjects } = pickTwoTask();
  const hiding = new Set(goalObjects.map((o) => o.location));
  const elsewhere = scenario.layout.receptacles.filter((r) => !hiding.has(r.name));
  const actions = Array.from(
    { length: env.defaultMaxTurns },
    (_, i) => i < 16 ? "dance with the fridge" : `go to ${elsewhere[i % elsewhere.length].name}`,
  );
  const trajectory = runActions(env, task, actions);
  const o = scenario.goal.objectType;
  const rule = workflowRule(scenario);
  const where = (objects: Scenario["objects"]) =>
    objects.map((x) => `${x.name} in ${x.location}`).join(" and ");
  const neverFound = (places: string, unvisited: string) =>
    `Avoid this mistake: never found a ${o}, which was in ${places}: it never visited ` +
    `${unvisited}. Instead, search receptacles not yet visited and open closed ones until a ${o} ` +
    `is seen; ${rule}.`;
  return { trajectory, scenario, goalObjects, o, rule, where, neverFound };
}

Deno.test("a lost household trajectory lists every mistake it shows, the replay analysis' first", () => {
  const { trajectory, scenario } = lostTwice();
  assert.equal(trajectory.won, false);
  assert.equal(trajectory.steps.length, 30);
  const facts = replay(
    new HouseholdEpisode(trajectory.task, scenario, env.defaultMaxTurns),
    trajectory.steps.map((s) => s.action),
  );
  const mistakes = diagnoses(scenario, facts).map(([mistake]) => mistake);
  assert.equal(mistakes[0], "repeated invalid actions: 16 of 30 actions were not admissible");
  assert.equal(mistakes.length, 2);
  assert.match(mistakes[1], /^never found a /);
  assert.ok(replaySkill(trajectory).includes(mistakes[0]));
});

Deno.test("a skill naming either real mistake of the lost trajectory is truthful but no reference match, the usual places are both", () => {
  const { trajectory, scenario, goalObjects, where, neverFound } = lostTwice();
  const first = replaySkill(trajectory);
  assert.match(first, /repeated invalid actions: 16 of 30/);
  const skill = neverFound(
    where(goalObjects),
    goalObjects.map((x) => x.location).join(" or "),
  );
  assert.deepEqual(env.judgeSkill!(trajectory, skill), {
    wellFormed: true,
    truthful: true,
    matchesReference: false,
  });
  assert.deepEqual(env.judgeSkill!(trajectory, first), {
    wellFormed: true,
    truthful: true,
    matchesReference: false,
  });
  const reference = env.referenceAnalysis(trajectory).episode_skill;
  assert.equal(reference, usualPlacesSkill(scenario));
  assert.deepEqual(env.judgeSkill!(trajectory, reference), {
    wellFormed: true,
    truthful: true,
    matchesReference: true,
  });
});

Deno.test("the places a household skill lists count in any order", () => {
  const { trajectory, goalObjects, where, neverFound } = lostTwice();
  const swapped = [...goalObjects].reverse();
  const skill = neverFound(where(swapped), swapped.map((x) => x.location).join(" or "));
  assert.deepEqual(env.judgeSkill!(trajectory, skill), {
    wellFormed: true,
    truthful: true,
    matchesReference: false,
  });
});

Deno.test("a household skill placing a goal object in the wrong receptacle is not truthful", () => {
  const { trajectory, scenario, goalObjects, where, neverFound } = lostTwice();
  const wrong = scenario.layout.receptacles.find((r) =>
    !goalObjects.some((x) => x.location === r.name)
  )!;
  const moved = [{ ...goalObjects[0], location: wrong.name }, goalObjects[1]];
  const unvisited = goalObjects.map((x) => x.location).join(" or ");
  assert.deepEqual(env.judgeSkill!(trajectory, neverFound(where(moved), unvisited)), {
    wellFormed: true,
    truthful: false,
    matchesReference: false,
  });
  // The receptacles never visited are facts too.
  const visited = `${wrong.name} or ${goalObjects[1].location}`;
  assert.deepEqual(env.judgeSkill!(trajectory, neverFound(where(goalObjects), visited)), {
    wellFormed: true,
    truthful: false,
    matchesReference: false,
  });
});

Deno.test("a household skill naming a mistake that did not occur is not truthful", () => {
  const { trajectory, scenario, o, rule, goalObjects, where } = lostTwice();
  const other = scenario.objects.find((x) => x.type !== o)!;
  const cases = [
    // The agent never took anything, and never saw a goal object.
    `Avoid this mistake: took the wrong object: the ${other.name} instead of a ${o}. Instead, ` +
    `take only a ${o} (${where(goalObjects)}); ${rule}.`,
    `Avoid this mistake: saw a ${o} at ${goalObjects[0].location} but never took it. Instead, ` +
    `take the ${o} as soon as it is seen; ${rule}.`,
    // The right mistake with the wrong count.
    `Avoid this mistake: repeated invalid actions: 15 of 30 actions were not admissible. ` +
    `Instead, choose only actions from the admissible list; ${rule}.`,
  ];
  for (const skill of cases) {
    assert.deepEqual(env.judgeSkill!(trajectory, skill), {
      wellFormed: true,
      truthful: false,
      matchesReference: false,
    }, skill);
  }
});

Deno.test("a won household trajectory's skill is truthful only as its family's workflow rule or its usual places", () => {
  const task = env.sampleTasks("train", 1, 3, { families: ["heat_then_place"] })[0];
  const scenario = householdScenario(task);
  const trajectory: Trajectory = runActions(env, task, expertPlan(scenario));
  assert.equal(trajectory.won, true);
  const rule = workflowRule(scenario);
  const workflow = `${rule.charAt(0).toUpperCase()}${rule.slice(1)}.`;
  assert.deepEqual(env.judgeSkill!(trajectory, workflow), {
    wellFormed: true,
    truthful: true,
    matchesReference: false,
  });
  const usual = usualPlacesSkill(scenario);
  assert.deepEqual(env.judgeSkill!(trajectory, usual), {
    wellFormed: true,
    truthful: true,
    matchesReference: true,
  });
  const { objectType: o, targetType: r } = scenario.goal;
  // The places in the other order: the same fact (a set), though not the reference's text.
  const places = /in (.*) first/.exec(usual)![1];
  assert.match(places, / or /);
  const swapped = usual.replace(places, places.split(" or ").reverse().join(" or "));
  assert.deepEqual(env.judgeSkill!(trajectory, swapped), {
    wellFormed: true,
    truthful: true,
    matchesReference: false,
  });
  const otherTarget = ["countertop", "diningtable", "cabinet"].find((t) => t !== r)!;
  const untrue = [
    // The rule of another family for the same object and target.
    `To put a ${o} in ${r}: find the ${o} (open closed receptacles to look inside), take it, go ` +
    `to the ${r} (open it if closed) and put it.`,
    // The right family with another target.
    workflow.replaceAll(` ${r}`, ` ${otherTarget}`),
    // Places that are not the object's usual places.
    `Look for a ${o} in a toilet first: that is where it usually is.`,
    // A failure skill on a win.
    `Avoid this mistake: took the ${o} 1 but never heated it with the microwave. Instead, go to ` +
    `the microwave and heat the ${o} right after taking it; ${rule}.`,
  ];
  for (const skill of untrue) {
    const j = env.judgeSkill!(trajectory, skill);
    assert.equal(j.wellFormed, true, skill);
    assert.equal(j.truthful, false, skill);
    assert.equal(j.matchesReference, false, skill);
  }
});

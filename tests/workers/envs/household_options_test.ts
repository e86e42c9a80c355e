/**
 * The household options for small models: `prompt: "compact"`, `status_line` and
 * `expert: "search"` (workers/envs/household/mod.ts).
 */
import assert from "node:assert/strict";
import {
  householdEnvironment as env,
  householdScenario,
} from "../../../workers/envs/household/mod.ts";
import { searchPlan } from "../../../workers/envs/household/expert.ts";
import { FAMILIES, type Family, TOOLS } from "../../../workers/envs/household/world.ts";
import { EnvOptionsError } from "../../../workers/envs/errors.ts";
import { ENV_CATALOG, envSpecIssues } from "../../../jobs/env_catalog.ts";
import { SPLITS, type Task } from "../../../workers/envs/types.ts";
import { runActions, runPolicy } from "./household_helpers.ts";

const SMALL = { prompt: "compact", status_line: true, expert: "search" };

Deno.test("tasks keep their former options unless a newer option is set", () => {
  const plain = env.sampleTasks("train", 3, 4);
  assert.deepEqual(plain[0].options, { families: [...FAMILIES] });
  const small = env.sampleTasks("train", 3, 4, { ...SMALL, families: ["pick_and_place"] });
  assert.deepEqual(small[0].options, { families: ["pick_and_place"], ...SMALL });
  // The options change the prompt and the expert, never the task drawn.
  assert.deepEqual(
    small.map((t) => t.id),
    env.sampleTasks("train", 3, 4, {
      families: ["pick_and_place"],
    }).map((t) => t.id),
  );
  assert.throws(() => env.sampleTasks("train", 1, 1, { prompt: "short" }), EnvOptionsError);
  assert.throws(() => env.sampleTasks("train", 1, 1, { expert: "human" }), EnvOptionsError);
  const issues = envSpecIssues(ENV_CATALOG.envs, { id: "household", options: SMALL });
  assert.deepEqual(issues, []);
});

Deno.test("the compact prompt is the task line, the history lines and the observation", () => {
  const task = env.sampleTasks("train", 1, 2, { prompt: "compact" })[0];
  const episode = env.createEpisode(task);
  const first = episode.reset();
  const r = householdScenario(task).layout.receptacles[0].name;
  const step = episode.step(`go to ${r}`);
  const history = [{ observation: first.text, action: `go to ${r}`, response: "", valid: true }];
  const prompt = env.buildPrompt({
    task,
    history: history.map((h) => ({ ...h, reward: 0 })),
    observation: step.observation,
    historyLength: 1,
    turn: 2,
  });
  assert.equal(
    prompt,
    `Your task is to: ${task.instruction}\n` +
      `[Observation 1: ${first.text}, Action 1: go to ${r}]\n` +
      step.observation.text,
  );
});

Deno.test("the status line shows what is held and the receptacles not yet searched", () => {
  const task = env.sampleTasks("train", 40, 9, { status_line: true }).find((t) => {
    const s = householdScenario(t);
    return s.objects.some((o) => o.location.startsWith("drawer"));
  })!;
  const scenario = householdScenario(task);
  const inside = scenario.objects.find((o) => o.location.startsWith("drawer"))!;
  const all = scenario.layout.receptacles.filter((r) => r.type !== "desklamp").map((r) => r.name);
  const others = all.filter((r) => r !== inside.location);
  const episode = env.createEpisode(task);
  const start = episode.reset().text.split("\n");
  assert.equal(start.length, 2);
  assert.equal(start[1], `You are not carrying anything. To search: ${all.join(", ")}.`);
  // A closed drawer is visited, not searched; opening it shows its contents.
  const arrive = episode.step(`go to ${inside.location}`).observation.text;
  assert.equal(
    arrive,
    `You arrive at ${inside.location}. The ${inside.location} is closed.\n` +
      `You are not carrying anything. To search: ${all.join(", ")}.`,
  );
  const open = episode.step(`open ${inside.location}`).observation.text.split("\n");
  assert.equal(open[1], `You are not carrying anything. To search: ${others.join(", ")}.`);
  const take = episode.step(`take ${inside.name} from ${inside.location}`).observation.text;
  assert.equal(
    take.split("\n")[1],
    `You are carrying: a ${inside.name}. To search: ${others.join(", ")}.`,
  );
  // Invalid actions show the line too, unchanged.
  assert.equal(episode.step("fly").observation.text.split("\n")[1], take.split("\n")[1]);
  // The reference analysis replays without the line: the same analysis as without the option.
  const plain = { ...task, options: { families: task.options!.families } };
  const actions = [`go to ${inside.location}`, `open ${inside.location}`];
  const trajectory = (t: Task) => runActions(env, t, actions);
  assert.deepEqual(
    env.referenceAnalysis(trajectory(task)),
    env.referenceAnalysis(trajectory(plain)),
  );
});

/**
 * The action a policy that sees only the compact prompt (task line and observation with its
 * status line) can compute, for every family but `pick_two_and_place`: the search expert's rule
 * read off the text.
 */
function actionFromPrompt(task: Task, observation: string): string {
  const { goal } = householdScenario(task);
  const [text, status] = observation.split("\n");
  const held = /^You are carrying: a (.+?)\. /.exec(status)?.[1] ?? null;
  const toSearch = /To search: (.+)\.$/.exec(status)![1].split(", ");
  const tool = TOOLS[goal.family];
  const at = /^You (?:arrive at|open the) ([a-z]+ \d+)\./.exec(text)?.[1] ?? null;
  if (held !== null) {
    const pickedFrom = /^You pick up the .+ from the ([a-z]+ \d+)\.$/.exec(text)?.[1];
    const here = at ?? pickedFrom ?? null;
    const hereType = here?.replace(/ \d+$/, "");
    if (goal.family === "examine_in_light") {
      return hereType === "desklamp" ? `use ${here}` : "go to desklamp 1";
    }
    // The expert goes to the target only once the object is processed (no object starts there).
    if (hereType === goal.targetType) {
      return text.endsWith(`is closed.`) ? `open ${here}` : `put ${held} in/on ${here}`;
    }
    if (tool !== undefined && !text.startsWith(`You ${tool.verb} the `)) {
      return hereType === tool.type ? `${tool.verb} ${held} with ${here}` : `go to ${tool.type} 1`;
    }
    return `go to ${goal.targetType} 1`;
  }
  const seen = new RegExp(`\\ba (${goal.objectType} \\d+)`).exec(text.split("you see")[1] ?? "");
  if (at !== null && seen !== null) return `take ${seen[1]} from ${at}`;
  if (at !== null && text.endsWith(`The ${at} is closed.`)) return `open ${at}`;
  return `go to ${toSearch[0]}`;
}

Deno.test("the search expert wins every task, and its actions follow from the compact prompt", () => {
  const single = FAMILIES.filter((f) => f !== "pick_two_and_place") as Family[];
  for (const split of SPLITS) {
    const tasks = env.sampleTasks(split, 150, 13, SMALL);
    for (const task of tasks) {
      const expert = env.createExpert(task);
      const check = single.includes(task.family as Family);
      const trajectory = runPolicy(env, task, (observation) => {
        const action = expert.act(observation);
        if (check) assert.equal(action, actionFromPrompt(task, observation.text), task.id);
        return action;
      });
      assert.ok(trajectory.won, `${task.id}: ${searchPlan(task, householdScenario(task))}`);
      const prompt = env.buildPrompt({
        task,
        history: [],
        observation: env.createEpisode(task).reset(),
        historyLength: 0,
        turn: 1,
      });
      assert.ok(!prompt.includes("admissible"));
    }
  }
});

Deno.test("the search expert looks before it takes: it opens every closed receptacle it passes", () => {
  const tasks = env.sampleTasks("train", 60, 5, { expert: "search" });
  for (const task of tasks) {
    const scenario = householdScenario(task);
    const plan = searchPlan(task, scenario);
    const firstTake = plan.findIndex((a) => a.startsWith("take "));
    const visited = plan.slice(0, firstTake).filter((a) => a.startsWith("go to "));
    const order = scenario.layout.receptacles.filter((r) => r.type !== "desklamp").map((r) =>
      `go to ${r.name}`
    );
    assert.deepEqual(visited, order.slice(0, visited.length), task.id);
    for (const r of scenario.layout.receptacles.filter((r) => r.openable)) {
      const go = plan.indexOf(`go to ${r.name}`);
      if (go >= 0 && go < firstTake) assert.equal(plan[go + 1], `open ${r.name}`, task.id);
    }
  }
});

import assert from "node:assert/strict";
import {
  HOUSEHOLD_MAX_TURNS,
  householdEnvironment as env,
  householdScenario,
} from "../../../workers/envs/household/mod.ts";
import {
  type Family,
  LAYOUT_POOLS,
  ROOMS,
  supportsFamily,
  USUAL_PLACES,
} from "../../../workers/envs/household/world.ts";
import { expertPlan, searchPlan } from "../../../workers/envs/household/expert.ts";
import { EnvOptionsError, InvalidTaskError } from "../../../workers/envs/errors.ts";
import { ENV_CATALOG, envSpecIssues } from "../../../jobs/env_catalog.ts";
import { SPLITS, type Task } from "../../../workers/envs/types.ts";
import { wordsOf } from "../../../workers/envs/prompt.ts";
import { randomPolicy, runActions, runPolicy } from "./household_helpers.ts";

Deno.test("sampleTasks is deterministic and differs by seed and split", () => {
  const a = env.sampleTasks("train", 20, 7);
  const b = env.sampleTasks("train", 20, 7);
  assert.deepEqual(a, b);
  assert.notDeepEqual(env.sampleTasks("train", 20, 8), a);
  assert.notDeepEqual(env.sampleTasks("test_seen", 20, 7), a);
  assert.equal(new Set(a.map((t) => t.id)).size, 20);
  for (const t of a) assert.match(t.id, /^household\/train\/\d+$/);
});

Deno.test("episodes are deterministic: the same actions give the same observations", () => {
  for (const task of env.sampleTasks("train", 10, 3)) {
    const plan = expertPlan(householdScenario(task));
    const first = runActions(env, task, plan);
    const second = runActions(env, task, plan);
    assert.deepEqual(first.steps, second.steps);
  }
});

Deno.test("the expert solves at least 99% of 200 tasks of every split within the turn limit", () => {
  assert.equal(env.defaultMaxTurns, HOUSEHOLD_MAX_TURNS);
  for (const split of SPLITS) {
    const tasks = env.sampleTasks(split, 200, 11);
    let won = 0;
    for (const task of tasks) {
      const expert = env.createExpert(task);
      if (runPolicy(env, task, (obs) => expert.act(obs)).won) won++;
    }
    assert.ok(won >= 198, `${split}: expert won ${won}/200`);
  }
});

Deno.test("a uniformly random admissible-action policy scores far below the expert", () => {
  const tasks = env.sampleTasks("train", 200, 5);
  let won = 0;
  tasks.forEach((task, i) => {
    if (runPolicy(env, task, randomPolicy(i + 1)).won) won++;
  });
  console.log(`household random admissible policy: ${won}/200 won (${won / 2}%)`);
  assert.ok(won <= 40, `random policy won ${won}/200`);
});

Deno.test("every family is drawn, and the families option restricts the draw", () => {
  const families = new Set(env.sampleTasks("train", 200, 1).map((t) => t.family));
  assert.deepEqual([...families].sort(), [...env.families].sort());
  const only = env.sampleTasks("train", 30, 1, { families: ["heat_then_place"] });
  assert.ok(only.every((t) => t.family === "heat_then_place"));
  assert.throws(() => env.sampleTasks("train", 3, 1, { families: ["juggle"] }), EnvOptionsError);
  assert.throws(() => env.sampleTasks("train", 3, 1, { families: [] }), EnvOptionsError);
});

Deno.test("a misspelt household option is refused, in the env and in the submit-time catalog", () => {
  const typo = { famillies: ["heat_then_place"] };
  assert.throws(() => env.sampleTasks("train", 3, 1, typo), EnvOptionsError);
  const issues = envSpecIssues(ENV_CATALOG.envs, { id: "household", options: typo });
  assert.deepEqual(issues.map((i) => [i.path, i.code]), [["env.options", "unrecognized_keys"]]);
});

Deno.test("test_unseen shares no room layout with train or test_seen", () => {
  const signatures = (split: Task["split"]) =>
    new Set(env.sampleTasks(split, 300, 2).map((t) => householdScenario(t).layout.signature));
  const train = signatures("train");
  const seen = signatures("test_seen");
  const unseen = signatures("test_unseen");
  for (const s of unseen) assert.ok(!train.has(s) && !seen.has(s), s);
  for (const s of seen) assert.ok(train.has(s) || LAYOUT_POOLS.seen.some((l) => l.signature === s));
  for (const layouts of [LAYOUT_POOLS.seen, LAYOUT_POOLS.unseen]) {
    for (const family of env.families as Family[]) {
      assert.ok(layouts.some((l) => supportsFamily(l, family)), family);
    }
  }
  const pool = new Set(LAYOUT_POOLS.seen.map((l) => l.signature));
  assert.ok(LAYOUT_POOLS.unseen.every((l) => !pool.has(l.signature)));
});

Deno.test("objects start in their usual places most of the time, so where one was says where the next is", () => {
  for (const [room, places] of Object.entries(USUAL_PLACES)) {
    const spec = ROOMS[room as keyof typeof ROOMS];
    const types = new Set([...spec.fixed, ...Object.keys(spec.optional)]);
    assert.deepEqual(Object.keys(places).sort(), [...spec.objects].sort(), room);
    for (const [object, receptacles] of Object.entries(places)) {
      for (const r of receptacles) assert.ok(types.has(r), `${room}: ${object} in ${r}`);
    }
  }
  // 400 training tasks: 80% of objects go to a usual place when the room has one (and the goal
  // object never to the target type), so between 65% and 80% of goal objects start in one; a
  // uniform placement gives 71 of 400.
  let usual = 0;
  for (const task of env.sampleTasks("train", 400, 5)) {
    const { layout, objects, goal } = householdScenario(task);
    const start = objects.find((o) => o.type === goal.objectType)!.location.replace(/ \d+$/, "");
    if (USUAL_PLACES[layout.room][goal.objectType].includes(start)) usual++;
  }
  assert.ok(usual >= 260 && usual <= 320, `${usual} of 400`);
});

Deno.test("rooms are compact: 6 to 10 receptacles, and prompts stay short", () => {
  for (const l of [...LAYOUT_POOLS.seen, ...LAYOUT_POOLS.unseen]) {
    assert.ok(l.receptacles.length >= 6 && l.receptacles.length <= 10, l.signature);
  }
  const task = env.sampleTasks("train", 1, 4)[0];
  const episode = env.createEpisode(task);
  const observation = episode.reset();
  const prompt = env.buildPrompt({ task, history: [], observation, historyLength: 2, turn: 1 });
  assert.ok(prompt.includes(`Your task is to: ${task.instruction}`));
  assert.ok(wordsOf(prompt).length < 200, `prompt has ${wordsOf(prompt).length} words`);
});

Deno.test("openable receptacles are closed until opened and then show their contents", () => {
  const task = env.sampleTasks("train", 50, 9).find((t) => {
    const s = householdScenario(t);
    return s.objects.some((o) =>
      o.location.startsWith("fridge") || o.location.startsWith("drawer")
    );
  })!;
  const scenario = householdScenario(task);
  const inside = scenario.objects.find((o) => /^(fridge|drawer)/.test(o.location))!;
  const episode = env.createEpisode(task);
  episode.reset();
  const arrive = episode.step(`go to ${inside.location}`);
  assert.equal(
    arrive.observation.text,
    `You arrive at ${inside.location}. The ${inside.location} is closed.`,
  );
  assert.ok(!arrive.observation.admissibleActions!.some((a) => a.startsWith("take ")));
  const open = episode.step(`open ${inside.location}`);
  assert.ok(open.valid);
  assert.match(open.observation.text, new RegExp(`In it, you see .*a ${inside.name}`));
  const take = episode.step(`take ${inside.name} from ${inside.location}`);
  assert.equal(
    take.observation.text,
    `You pick up the ${inside.name} from the ${inside.location}.`,
  );
  assert.equal(episode.step("inventory").observation.text, `You are carrying: a ${inside.name}.`);
});

Deno.test("invalid and garbage actions are marked invalid and leave the state unchanged", () => {
  const task = env.sampleTasks("test_unseen", 1, 3)[0];
  const episode = env.createEpisode(task);
  const start = episode.reset();
  for (const junk of ["", "fly away", "take unicorn 9 from moon 1", "go to", "ＧＯ 🚀", "put"]) {
    const result = episode.step(junk);
    assert.equal(result.valid, false);
    assert.equal(result.reward, 0);
    assert.equal(result.observation.text, "Nothing happens.");
    assert.deepEqual(result.observation.admissibleActions, start.admissibleActions);
  }
  const r = householdScenario(task).layout.receptacles[0].name;
  assert.equal(episode.step(`GO TO ${r.toUpperCase()}.`).valid, true);
  assert.equal(episode.step(`go to ${r}`).valid, false);
});

Deno.test("an episode ends after the turn limit, and a win pays 10 once", () => {
  const task = env.sampleTasks("train", 1, 1)[0];
  const stalled = runActions(env, task, Array(HOUSEHOLD_MAX_TURNS + 5).fill("look"));
  assert.equal(stalled.steps.length, HOUSEHOLD_MAX_TURNS);
  assert.equal(stalled.won, false);
  const won = runActions(env, task, expertPlan(householdScenario(task)));
  assert.equal(won.won, true);
  assert.equal(won.score, 10);
  assert.throws(() => env.createEpisode({ ...task, envId: "sokoban" }), InvalidTaskError);
});

Deno.test("the vocabulary covers prompts, observations, actions and analyses", () => {
  const vocabulary = new Set(env.vocabulary());
  assert.ok(vocabulary.size < 2000, `vocabulary has ${vocabulary.size} words`);
  const missing = new Set<string>();
  const check = (text: string) => {
    for (const w of wordsOf(text)) if (!vocabulary.has(w)) missing.add(w);
  };
  SPLITS.forEach((split, k) => {
    env.sampleTasks(split, 60, 21).forEach((task, i) => {
      const expert = env.createExpert(task);
      const runs = [
        runPolicy(env, task, (obs) => expert.act(obs)),
        runPolicy(env, task, randomPolicy(100 * k + i)),
      ];
      for (const traj of runs) {
        check(task.instruction);
        for (const s of traj.steps) check(s.observation + " " + s.action);
        const analysis = env.referenceAnalysis(traj);
        check(analysis.episode_summary + " " + analysis.episode_skill);
        const observation = env.createEpisode(task).reset();
        check(
          env.buildPrompt({
            task,
            history: traj.steps,
            observation,
            historyLength: 3,
            turn: traj.steps.length + 1,
          }),
        );
      }
    });
  });
  assert.deepEqual([...missing], []);
});

Deno.test("parseAction reads tagged and bare actions", () => {
  assert.equal(
    env.parseAction("<think>hm</think><action>go to fridge 1</action>"),
    "go to fridge 1",
  );
  assert.equal(env.parseAction("open drawer 2"), "open drawer 2");
  assert.equal(env.parseAction("<think>never closed"), null);
});

Deno.test("the usual-first search reaches a goal object in its usual place sooner than the room-order search, and both win", () => {
  const options = { prompt: "compact", status_line: true, expert: "search" };
  const [task] = env.sampleTasks("train", 1, 3, options);
  // The scenario (printed once, checked by hand): a bathroom of cabinet 1, cabinet 2,
  // countertop 1, drawer 1, drawer 2, sinkbasin 1, toilet 1 and towelholder 1; the only soapbar
  // starts in sinkbasin 1, one of its usual places (USUAL_PLACES: bathtubbasin, sinkbasin) and
  // the sixth receptacle of the room's order.
  assert.equal(task.instruction, "clean some soapbar and put it in toilet");
  const scenario = householdScenario(task);
  const plain = searchPlan(task, scenario);
  const usualFirst = searchPlan(task, scenario, { usualFirst: true });
  assert.deepEqual(usualFirst, [
    "go to sinkbasin 1",
    "take soapbar 1 from sinkbasin 1",
    "clean soapbar 1 with sinkbasin 1",
    "go to toilet 1",
    "put soapbar 1 in/on toilet 1",
  ]);
  // The room's order opens both cabinets and both drawers and looks at the countertop first.
  assert.equal(plain.length, 14);
  assert.deepEqual(plain.slice(0, 3), ["go to cabinet 1", "open cabinet 1", "go to cabinet 2"]);
  for (const plan of [plain, usualFirst]) {
    const played = runActions(env, task, plan);
    assert.equal(played.won, true);
    assert.ok(played.steps.every((s) => s.valid));
  }
});

Deno.test("the skilled demonstration states the goal object's usual places and its expert searches them first", () => {
  const options = { prompt: "compact", status_line: true, expert: "search" };
  // The task of the test above: the only soapbar starts in sinkbasin 1.
  const [task] = env.sampleTasks("train", 1, 3, options);
  const demo = env.skilledDemonstration!(task);
  assert.equal(
    demo.skill,
    "Look for a soapbar in a bathtubbasin or a sinkbasin first: that is where it usually is.",
  );
  const played = runPolicy(env, task, (o) => demo.expert.act(o));
  assert.deepEqual(
    played.steps.map((s) => s.action),
    searchPlan(task, householdScenario(task), { usualFirst: true }),
  );
  assert.equal(played.steps.length, 5);
  assert.equal(played.won, true);
  // Without the skill the searching expert needs 14 actions (test above).
  const searching = env.createExpert(task);
  assert.equal(runPolicy(env, task, (o) => searching.act(o)).steps.length, 14);
});

Deno.test("the reference analysis teaches the usual places only, won or lost: no step skills", () => {
  const options = { prompt: "compact", status_line: true, expert: "search" };
  // The task of the skilled-demonstration test above: the only soapbar starts in sinkbasin 1.
  const [task] = env.sampleTasks("train", 1, 3, options);
  const searching = env.createExpert(task);
  const search = runPolicy(env, task, (o) => searching.act(o));
  assert.equal(search.won, true);
  const actions = ["fly away", "go to sinkbasin 1", "look", "take soapbar 1 from sinkbasin 1"];
  const played = runPolicy(
    env,
    task,
    (() => {
      let turn = 0;
      return () => actions[turn++] ?? "look";
    })(),
    4,
  );
  assert.equal(played.won, false);
  const oracle = runActions(env, task, expertPlan(householdScenario(task)));
  assert.equal(oracle.won, true);
  // The reference analysis, won or lost, teaches the usual places only: no step skills.
  const usual =
    "Look for a soapbar in a bathtubbasin or a sinkbasin first: that is where it usually is.";
  for (const t of [search, played, oracle]) {
    const reference = env.referenceAnalysis(t);
    assert.equal(reference.episode_skill, usual);
    assert.equal(reference.step_skills, undefined);
    assert.equal(reference.episode_summary.startsWith(t.won ? "Success" : "Failure"), true);
  }
});

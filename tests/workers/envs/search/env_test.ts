import assert from "node:assert/strict";
import {
  EnvOptionsError,
  InvalidTaskError,
  type Split,
  SPLITS,
  TaskSamplingError,
} from "../../../../workers/envs/mod.ts";
import { wordsOf } from "../../../../workers/envs/prompt.ts";
import {
  HELD_OUT_RELATIONS,
  isTestSeenSubject,
  QUESTION_FAMILIES,
  relationsOf,
  SEARCH_MAX_TURNS,
  searchEnvironment as env,
  searchPassages,
  searchQuestion,
  WORLD,
} from "../../../../workers/envs/search/mod.ts";
import { runActions, runPolicy } from "../household_helpers.ts";

Deno.test("the world has thousands of passages, unique names and facts their passages state", () => {
  assert.ok(WORLD.passages.length >= 3000, `${WORLD.passages.length} passages`);
  const names = WORLD.entities.map((e) => e.name.toLowerCase());
  assert.equal(new Set(names).size, names.length);
  for (const fact of WORLD.facts.values()) {
    const text = WORLD.passages[fact.passage].text;
    assert.ok(text.includes(WORLD.entities[fact.subject].name), text);
    assert.ok(text.includes(fact.value), `${text} / ${fact.value}`);
  }
  // Generated once from a fixed seed: the same on every load and machine.
  assert.equal(WORLD.passages.length, 3560);
  assert.equal(WORLD.passages[0].text, "Jilgate is a city in Fanova.");
});

Deno.test("options default to all families, top 3 and 4 turns, and are validated strictly", () => {
  const [task] = env.sampleTasks("train", 1, 0);
  assert.deepEqual(task.options, {
    families: ["single_hop", "bridge", "comparison"],
    top_k: 3,
    max_turns: 4,
    prompt: "full",
  });
  assert.equal(env.defaultMaxTurns, SEARCH_MAX_TURNS);
  assert.match(task.id, /^search\/train\/\d+$/);
  const [bridge] = env.sampleTasks("train", 1, 0, { families: ["bridge", "comparison"] });
  assert.match(bridge.id, /^search\/train\/bridge\+comparison\/\d+$/);
  const bad: [Record<string, unknown>, string][] = [
    [{ topk: 3 }, ""],
    [{ top_k: 0 }, "top_k"],
    [{ top_k: 2.5 }, "top_k"],
    [{ max_turns: 2 }, "max_turns"],
    [{ families: [] }, "families"],
    [{ families: ["trivia"] }, "families.0"],
    [{ prompt: "short" }, "prompt"],
  ];
  for (const [options, path] of bad) {
    assert.throws(() => env.sampleTasks("train", 1, 0, options), (e: unknown) => {
      assert.ok(e instanceof EnvOptionsError, JSON.stringify(options));
      assert.equal(e.issues[0].path.join("."), path);
      return true;
    });
  }
  assert.throws(() => env.sampleTasks("valid" as Split, 1, 0), TaskSamplingError);
  assert.throws(() => env.createEpisode({ ...task, envId: "webshop" }), InvalidTaskError);
});

Deno.test("sampleTasks is deterministic and draws each family", () => {
  assert.deepEqual(env.sampleTasks("test_seen", 50, 4), env.sampleTasks("test_seen", 50, 4));
  assert.notDeepEqual(env.sampleTasks("train", 20, 5), env.sampleTasks("train", 20, 4));
  const families = new Set(env.sampleTasks("train", 60, 1).map((t) => t.family));
  assert.deepEqual([...families].sort(), [...QUESTION_FAMILIES].sort());
  for (const task of env.sampleTasks("train", 30, 2, { families: ["comparison"] })) {
    assert.equal(task.family, "comparison");
    assert.match(task.instruction, /^answer the question: .* first, .* or .*\?$/);
  }
});

Deno.test("splits are disjoint: held-out relations only in test_unseen, subjects split train/test_seen", () => {
  const questions = (split: Split) =>
    env.sampleTasks(split, 400, 11).map((t) => searchQuestion(t).question);
  const train = questions("train"),
    seen = questions("test_seen"),
    unseen = questions("test_unseen");
  for (const q of [...train, ...seen]) {
    for (const r of relationsOf(q)) assert.ok(!HELD_OUT_RELATIONS.has(r), `${q.text} uses ${r}`);
  }
  for (const q of unseen) {
    assert.ok(relationsOf(q).some((r) => HELD_OUT_RELATIONS.has(r)), q.text);
  }
  // Every held-out relation is asked about in test_unseen.
  const unseenRelations = new Set(unseen.flatMap(relationsOf));
  for (const r of HELD_OUT_RELATIONS) assert.ok(unseenRelations.has(r), r);
  // The named subjects of train and test_seen questions are disjoint, so are the questions.
  const subjects = (q: (typeof train)[number]) =>
    q.family === "comparison" ? q.hops.map((h) => h.subject) : [q.hops[0].subject];
  for (const q of train) for (const s of subjects(q)) assert.equal(isTestSeenSubject(s), false);
  for (const q of seen) for (const s of subjects(q)) assert.equal(isTestSeenSubject(s), true);
  const trainTexts = new Set(train.map((q) => q.text));
  assert.ok(seen.every((q) => !trainTexts.has(q.text)));
  assert.ok(unseen.every((q) => !trainTexts.has(q.text)));
});

Deno.test("the expert answers exactly in at least 99% of 400 tasks per split, in 2-3 turns", () => {
  for (const split of SPLITS) {
    let won = 0;
    for (const task of env.sampleTasks(split, 400, 17)) {
      const expert = env.createExpert(task);
      const trajectory = runPolicy(env, task, (obs) => expert.act(obs));
      if (trajectory.won) won++;
      const hops = searchQuestion(task).question.hops.length;
      assert.equal(trajectory.steps.length, hops + 1);
      assert.ok(trajectory.steps.length <= 3);
    }
    assert.ok(won >= 396, `${split}: expert won ${won}/400`);
  }
});

Deno.test("a search shows the top-k passages by BM25 and an answer ends the episode with F1", () => {
  const [task] = env.sampleTasks("train", 1, 3, { families: ["bridge"], top_k: 2 });
  const { question } = searchQuestion(task);
  const episode = env.createEpisode(task);
  assert.deepEqual(episode.reset(), { text: "No search results yet." });
  const query = question.hops[0].query;
  const first = episode.step(`<search>${query}</search>`);
  const ids = searchPassages(query, 2);
  assert.equal(ids.length, 2);
  assert.deepEqual(first.info.retrieved, ids);
  assert.equal(
    first.observation.text,
    `Results for "${query}": (1) ${WORLD.passages[ids[0]].text} (2) ${WORLD.passages[ids[1]].text}`,
  );
  assert.equal(first.valid, true);
  assert.equal(first.done, false);
  assert.equal(first.reward, 0);
  // Tags in any case, a missing closing tag and extra spaces are accepted.
  const nothing = episode.step("< SEARCH > qqqq zzzz");
  assert.deepEqual(nothing.observation.text, 'No results for "qqqq zzzz".');
  assert.equal(nothing.valid, true);
  const answer = episode.step(`<Answer>  THE ${question.answer.toUpperCase()}. </answer>`);
  assert.equal(answer.valid, true);
  assert.equal(answer.done, true);
  assert.equal(answer.won, true);
  assert.equal(answer.reward, 1);
  assert.equal(answer.info.score, 1);
  assert.equal(answer.info.exact_match, true);
  const after = episode.step(`<answer>${question.answer}</answer>`);
  assert.equal(after.valid, false);
  assert.equal(after.reward, 0);
});

Deno.test("a partly right answer scores its F1 and does not win", () => {
  const task = env.sampleTasks("train", 40, 9).find((t) =>
    searchQuestion(t).question.answer.includes(" ") &&
    !searchQuestion(t).question.answer.startsWith("The ")
  )!;
  const answer = searchQuestion(task).question.answer; // two words, e.g. a person's name
  const trajectory = runActions(env, task, [`<answer>${answer.split(" ")[0]}</answer>`]);
  assert.equal(trajectory.won, false);
  assert.ok(Math.abs(trajectory.score - 2 / 3) < 1e-12);
  assert.match(trajectory.steps[0].action, /^<answer>/);
});

Deno.test("invalid actions count as turns, keep the results and the episode ends unanswered at the limit", () => {
  const [task] = env.sampleTasks("test_unseen", 1, 6);
  const episode = env.createEpisode(task);
  episode.reset();
  const results = episode.step(`<search>${searchQuestion(task).question.hops[0].query}</search>`);
  for (
    const junk of ["", "Paford", "<search></search>", "<answer> </answer>", "<think>x</think>"]
  ) {
    const r = episode.step(junk);
    assert.equal(r.valid, false, junk);
    assert.equal(r.observation.text, `Invalid action. ${results.observation.text}`);
    if (r.done) {
      assert.equal(r.info.score, 0);
      assert.equal(r.won, false);
      return;
    }
  }
  assert.fail("the episode did not end after 4 turns");
});

Deno.test("max_turns sets the episode's own turn limit", () => {
  const [task] = env.sampleTasks("train", 1, 6, { max_turns: 6 });
  const trajectory = runActions(env, task, Array(10).fill("<search>nothing here</search>"));
  assert.equal(trajectory.steps.length, 6);
  assert.equal(trajectory.won, false);
  assert.equal(trajectory.score, 0);
});

Deno.test("parseAction takes the last search or answer tag, inside <action> or bare", () => {
  const cases: [string, string | null][] = [
    ["<action><search>Jemi Shonland born</search></action>", "<search>Jemi Shonland born</search>"],
    ["<think>who?</think><search> Jemi  Shonland </search>", "<search>Jemi Shonland</search>"],
    ["<search>a</search> then <answer>Paford</answer>", "<answer>Paford</answer>"],
    ["<action><answer>The Silent Harbor", "<answer>The Silent Harbor</answer>"],
    ["<ANSWER>Paford</ANSWER>", "<answer>Paford</answer>"],
    ["<search></search><answer>x</answer>", "<answer>x</answer>"],
    ["<action>Paford</action>", "Paford"],
    ["<action></action>", null],
  ];
  for (const [response, action] of cases) assert.equal(env.parseAction(response), action, response);
});

Deno.test("prompts: full has the verl-agent lines, compact only task, history and observation", () => {
  const [task] = env.sampleTasks("train", 1, 2026, { families: ["bridge"] });
  const expert = env.createExpert(task);
  const trajectory = runPolicy(env, task, (obs) => expert.act(obs));
  const input = {
    task,
    history: trajectory.steps.slice(0, 2),
    observation: { text: trajectory.steps[2].observation },
    historyLength: 1,
    turn: 3,
  };
  const full = env.buildPrompt(input);
  assert.match(full, /^You answer questions about a fictional world/);
  assert.match(full, /\nYour task is to: answer the question: .*\?\n/);
  assert.match(full, /Write <search>your query<\/search> to see the top passages/);
  const [compactTask] = env.sampleTasks("train", 1, 2026, {
    families: ["bridge"],
    prompt: "compact",
  });
  const compact = env.buildPrompt({ ...input, task: compactTask });
  const lines = compact.split("\n");
  assert.equal(lines.length, 3);
  assert.equal(lines[0], `Your task is to: ${task.instruction}`);
  assert.equal(
    lines[1],
    `[Observation 2: ${trajectory.steps[1].observation}, Action 2: ${trajectory.steps[1].action}]`,
  );
  assert.equal(lines[2], trajectory.steps[2].observation);
});

Deno.test("the vocabulary covers prompts, observations, expert actions and analyses", () => {
  const vocabulary = new Set(env.vocabulary());
  assert.ok(vocabulary.size < 2000, `vocabulary has ${vocabulary.size} words`);
  const missing = new Set<string>();
  const check = (text: string) => {
    for (const w of wordsOf(text)) if (!vocabulary.has(w)) missing.add(w);
  };
  for (const split of SPLITS) {
    for (const task of env.sampleTasks(split, 60, 12)) {
      const expert = env.createExpert(task);
      const won = runPolicy(env, task, (obs) => expert.act(obs));
      const lost = runActions(env, task, ["<search>where</search>", "<answer>Paford</answer>"]);
      for (const traj of [won, lost]) {
        for (const s of traj.steps) check(`${s.observation} ${s.action}`);
        const a = env.referenceAnalysis(traj);
        check(`${a.episode_summary} ${a.episode_skill}`);
        check(env.buildPrompt({
          task,
          history: traj.steps,
          observation: { text: traj.steps.at(-1)!.observation },
          historyLength: 2,
          turn: traj.steps.length + 1,
        }));
      }
    }
  }
  assert.deepEqual([...missing], []);
});

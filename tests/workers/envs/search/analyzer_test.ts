import assert from "node:assert/strict";
import type { Task, Trajectory } from "../../../../workers/envs/mod.ts";
import {
  type Question,
  searchEnvironment as env,
  searchPassages,
  searchQuestion,
  WORLD,
} from "../../../../workers/envs/search/mod.ts";
import { runActions, runPolicy } from "../household_helpers.ts";

const search = (query: string) => `<search>${query}</search>`;
const answer = (text: string) => `<answer>${text}</answer>`;
const name = (id: number) => WORLD.entities[id].name;
const passage = (q: Question, hop: number) => WORLD.passages[q.hops[hop].fact.passage].text;

/** The first task of `family` on `split` (seeded) whose question satisfies `accept`. */
function taskWhere(
  family: string,
  accept: (q: Question) => boolean = () => true,
  split: Task["split"] = "train",
): { task: Task; question: Question } {
  for (const task of env.sampleTasks(split, 400, 31, { families: [family] })) {
    const { question } = searchQuestion(task);
    if (accept(question)) return { task, question };
  }
  throw new Error(`no ${family} task fits`);
}

/** The question verbatim shows none of the evidence passages in the top 3. */
const verbatimMisses = (q: Question) =>
  !q.hops.some((h) => searchPassages(q.text.slice(0, -1), 3).includes(h.fact.passage));
/** The question verbatim shows the first hop's evidence but not the second's. */
const verbatimFindsBridgeOnly = (q: Question) => {
  const shown = searchPassages(q.text.slice(0, -1), 3);
  return shown.includes(q.hops[0].fact.passage) && !shown.includes(q.hops[1].fact.passage);
};
/** A wrong answer of the same kind (another entity's name, another year). */
const wrong = (q: Question) => (/^\d+$/.test(q.answer) ? String(Number(q.answer) + 1) : "Zunport");

Deno.test("a won bridge names the decisive searches and the bridge entity", () => {
  const { task, question } = taskWhere("bridge");
  const expert = env.createExpert(task);
  const trajectory = runPolicy(env, task, (obs) => expert.act(obs));
  assert.equal(trajectory.won, true);
  const a = env.referenceAnalysis(trajectory);
  const [q1, q2] = question.hops.map((h) => h.query);
  assert.match(a.episode_summary, /^Success in 3 steps: /);
  assert.ok(a.episode_skill.startsWith("Find the bridge entity first, then search it: "));
  assert.ok(a.episode_skill.includes(`"${q1}" showed `), a.episode_skill);
  assert.ok(a.episode_skill.includes(` is ${name(question.bridge!)}, then "${q2}" showed `));
  assert.ok(a.episode_skill.endsWith(`answer ${question.answer} alone.`), a.episode_skill);
});

Deno.test("a won single hop names the search that actually showed the fact", () => {
  // The subject's name alone (not the expert's query) is enough when its passage ranks top 3.
  const { task, question } = taskWhere("single_hop", (q) => {
    const own = name(q.hops[0].subject);
    return searchPassages(own, 3).includes(q.hops[0].fact.passage);
  });
  const subject = name(question.hops[0].subject);
  const trajectory = runActions(env, task, [search(subject), answer(question.answer)]);
  assert.equal(trajectory.won, true);
  const a = env.referenceAnalysis(trajectory);
  assert.ok(a.episode_skill.includes(`"${subject}" showed `), a.episode_skill);
  assert.ok(!a.episode_skill.includes(question.hops[0].query));
});

Deno.test("answering a bridge question before finding the bridge entity is the named mistake", () => {
  const { task, question } = taskWhere("bridge");
  const trajectory = runActions(env, task, [answer(wrong(question))]);
  assert.equal(trajectory.won, false);
  const a = env.referenceAnalysis(trajectory);
  assert.ok(
    a.episode_skill.startsWith(
      `Avoid this mistake: answered "${wrong(question)}" before the bridge entity was found: ` +
        "no search showed ",
    ),
    a.episode_skill,
  );
  assert.ok(a.episode_skill.includes(`is ${name(question.bridge!)}`));
  assert.ok(a.episode_skill.includes(`Instead, first search "${question.hops[0].query}"`));
  assert.ok(!a.episode_skill.includes("verbatim"));
});

Deno.test("a verbatim search that showed none of the needed passages is named as the cause", () => {
  const { task, question } = taskWhere("bridge", verbatimMisses);
  const verbatim = question.text.slice(0, -1); // without the question mark
  const trajectory = runActions(env, task, [search(verbatim), answer(wrong(question))]);
  for (const hop of [0, 1]) {
    assert.ok(!trajectory.steps[1].observation.includes(passage(question, hop)));
  }
  const a = env.referenceAnalysis(trajectory);
  assert.ok(
    a.episode_skill.startsWith(
      `Avoid this mistake: searched the question verbatim ("${verbatim}"), which showed none ` +
        `of the needed passages, then answered "${wrong(question)}" before the bridge entity ` +
        "was found",
    ),
    a.episode_skill,
  );
  assert.ok(a.episode_summary.includes(`"${verbatim}" showed nothing needed`));
});

Deno.test("a verbatim search that found the bridge is not blamed; answering without the second hop is", () => {
  const { task, question } = taskWhere("bridge", verbatimFindsBridgeOnly);
  const verbatim = question.text;
  const trajectory = runActions(env, task, [search(verbatim), answer(wrong(question))]);
  assert.ok(trajectory.steps[1].observation.includes(passage(question, 0)));
  const a = env.referenceAnalysis(trajectory);
  assert.ok(!a.episode_skill.includes("verbatim"), a.episode_skill);
  assert.ok(
    a.episode_skill.startsWith(
      `Avoid this mistake: found the bridge entity ${name(question.bridge!)} but answered ` +
        `"${wrong(question)}" before a search showed `,
    ),
    a.episode_skill,
  );
});

Deno.test("misreading the evidence, a half-searched comparison and a lucky guess are told apart", () => {
  const single = taskWhere("single_hop");
  const q = single.question;
  const misread = runActions(env, single.task, [search(q.hops[0].query), answer(wrong(q))]);
  const a1 = env.referenceAnalysis(misread);
  assert.ok(
    a1.episode_skill.includes(
      `answered "${wrong(q)}" although the passages showed `,
    ),
    a1.episode_skill,
  );
  assert.ok(a1.episode_skill.includes(`so the answer is ${q.answer}`));

  const pair = taskWhere("comparison");
  const [ha, hb] = pair.question.hops;
  const loser = name(pair.question.answer === name(ha.subject) ? hb.subject : ha.subject);
  const half = runActions(env, pair.task, [search(ha.query), answer(loser)]);
  const a2 = env.referenceAnalysis(half);
  assert.ok(
    a2.episode_skill.includes(`answered "${loser}" before a search showed `),
    a2.episode_skill,
  );
  assert.ok(a2.episode_skill.includes(name(hb.subject)));
  assert.ok(a2.episode_skill.includes(`Instead, search "${ha.query}" and "${hb.query}"`));

  const guess = runActions(env, pair.task, [answer(pair.question.answer)]);
  assert.equal(guess.won, true);
  const a3 = env.referenceAnalysis(guess);
  assert.match(a3.episode_summary, /^Success in 1 step by a guess: /);
  assert.ok(a3.episode_skill.startsWith("Answer only what the passages show: search "));
});

Deno.test("running out of turns, with or without the facts, and invalid actions are reported", () => {
  const { task, question } = taskWhere("single_hop");
  const q1 = question.hops[0].query;
  const stalled = runActions(env, task, [search(q1), search(q1), search(q1), search(q1)]);
  const a1 = env.referenceAnalysis(stalled);
  assert.ok(
    a1.episode_skill.startsWith(
      `Avoid this mistake: found the answer ${question.answer} but never answered before the ` +
        "turn limit.",
    ),
    a1.episode_skill,
  );
  assert.match(a1.episode_summary, /Warning signs: 3 repeated searches\.$/);

  const junk = runActions(env, task, ["hello", "search x", "<answer></answer>", "<find>y</find>"]);
  const a2 = env.referenceAnalysis(junk);
  assert.ok(
    a2.episode_skill.startsWith("Avoid this mistake: never searched or answered in 4 turns."),
  );
  assert.match(
    a2.episode_summary,
    /^Failure after 4 steps: no valid action\. Warning signs: 4 invalid actions\.$/,
  );
});

/** Mixed trajectories: expert prefixes, verbatim or off-topic searches, right or wrong answers. */
function mixedTrajectories(): Trajectory[] {
  const out: Trajectory[] = [];
  env.sampleTasks("train", 60, 5).concat(env.sampleTasks("test_unseen", 60, 5)).forEach(
    (task, i) => {
      const { question } = searchQuestion(task);
      const plan = question.hops.map((h) => search(h.query));
      const variants = [
        [
          ...plan.slice(0, i % (plan.length + 1)),
          answer(i % 2 ? question.answer : wrong(question)),
        ],
        [search(question.text), answer(wrong(question))],
        [search(question.text), ...plan.slice(1), answer(question.answer)],
        [search(name(question.hops[0].subject)), "oops", answer(question.answer)],
      ];
      for (const actions of variants) out.push(runActions(env, task, actions));
    },
  );
  return out;
}

Deno.test("every claim of the analyses on 480 mixed trajectories is true of the trajectory", () => {
  for (const trajectory of mixedTrajectories()) {
    const { question } = searchQuestion(trajectory.task);
    const a = env.referenceAnalysis(trajectory);
    const context = `${trajectory.task.instruction} ${
      JSON.stringify(trajectory.steps)
    }\n${a.episode_skill}`;
    assert.equal(a.episode_summary.startsWith("Success"), trajectory.won, context);
    const answerAt = trajectory.steps.findIndex((s) => s.action.startsWith("<answer>"));
    const seenBefore = (hop: number) =>
      trajectory.steps.slice(0, answerAt < 0 ? undefined : answerAt + 1)
        .some((s) => s.observation.includes(passage(question, hop)));
    if (a.episode_skill.includes("before the bridge entity was found")) {
      assert.equal(seenBefore(0), false, context);
    }
    if (a.episode_skill.includes("found the bridge entity")) {
      assert.equal(seenBefore(0), true, context);
      assert.equal(seenBefore(1), false, context);
    }
    if (a.episode_skill.includes("although the passages showed")) {
      assert.ok(question.hops.every((_, h) => seenBefore(h)), context);
    }
    const verbatim = /searched the question verbatim \("([^"]*)"\)/.exec(a.episode_skill);
    if (verbatim !== null) {
      const at = trajectory.steps.findIndex((s) => s.action === search(verbatim[1]));
      assert.ok(at >= 0, context);
      const shown = trajectory.steps[at + 1]?.observation ?? "";
      assert.ok(question.hops.every((_, h) => !shown.includes(passage(question, h))), context);
    }
    // Every search quoted as showing something was made.
    for (const m of a.episode_summary.matchAll(/"([^"]*)" showed/g)) {
      assert.ok(trajectory.steps.some((s) => s.action === search(m[1])), context);
    }
  }
});

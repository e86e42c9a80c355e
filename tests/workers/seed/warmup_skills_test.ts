import assert from "node:assert/strict";
import { getEnvironment, toAsyncEnvironment } from "../../../workers/envs/mod.ts";
import { gridLinesOf, move, parseGrid } from "../../../workers/envs/sokoban/room.ts";
import { solve } from "../../../workers/envs/sokoban/solver.ts";
import { Policy, Tokenizer } from "../../../workers/model/mod.ts";
import { correctiveSteps, expertSamples, sftTrain, TextPolicy } from "../../../workers/seed/mod.ts";
import { insertSkill, SKILL_HEADING } from "../../../workers/skills/mod.ts";
import { resolveModel } from "../../../workers/seed/run/mod.ts";

const env = toAsyncEnvironment(getEnvironment("sokoban"));
const envOptions = { relative_positions: true, prompt: "compact" };
const data = { env, envOptions, episodes: 6, maxTurns: 20, historyLength: 0, seed: 3 };

async function textPolicy(): Promise<TextPolicy> {
  const model = await resolveModel("builtin:tiny", { env, seed: 1, artifacts: null as never });
  return new TextPolicy(
    new Policy(model.config, model.parameters, { threads: 1 }),
    new Tokenizer(model.tokenizer),
  );
}

Deno.test("skill-conditioned demonstrations carry their own episode's reference skill after the task line", async () => {
  const text = await textPolicy();
  const plain = await expertSamples(text, data);
  const skilled = await expertSamples(text, { ...data, skillShare: 1 });
  assert.equal(plain.skilled, 0);
  assert.equal(skilled.skilled, skilled.samples.length);
  assert.equal(skilled.samples.length, plain.samples.length);
  // The skill of each episode: the reference analysis of that expert episode.
  const tasks = await env.sampleTasks("train", data.episodes, data.seed, envOptions);
  const skills: string[] = [];
  for (const task of tasks) {
    const episode = env.createEpisode(task), expert = env.createExpert(task);
    let observation = await episode.reset();
    const steps = [];
    let won = false;
    for (let turn = 1; turn <= data.maxTurns; turn++) {
      const action = await expert.act(observation);
      const r = await episode.step(action);
      steps.push({
        observation: observation.text,
        response: "",
        action,
        valid: r.valid,
        reward: r.reward,
      });
      observation = r.observation;
      if (r.done) {
        won = r.won;
        break;
      }
    }
    const skill = (await env.referenceAnalysis({ task, steps, won, score: 0 })).episode_skill;
    for (let i = 0; i < steps.length; i++) skills.push(skill);
  }
  assert.equal(skills.length, plain.samples.length);
  plain.samples.forEach((s, i) => {
    const prompt = text.tokenizer.decode(s.prompt).replace(/\n$/, "");
    assert.ok(!prompt.includes(SKILL_HEADING));
    assert.deepEqual(skilled.samples[i].prompt, text.promptIds(insertSkill(prompt, skills[i])));
    assert.deepEqual(skilled.samples[i].response, s.response);
    // The ordinary passes see the same turn without its skill.
    assert.deepEqual(skilled.ordinary[i], s);
  });
  assert.match(skills[0], /^Walk behind the box, then push it (up|down|left|right)/);
  await text.policy.release();
});

Deno.test("a share of 0.5 puts the skill on about half of the turns, the same ones for the same seed", async () => {
  const text = await textPolicy();
  const a = await expertSamples(text, { ...data, episodes: 20, skillShare: 0.5 });
  const b = await expertSamples(text, { ...data, episodes: 20, skillShare: 0.5 });
  const share = a.skilled / a.samples.length;
  assert.ok(share > 0.3 && share < 0.7, `share ${share}`);
  assert.deepEqual(a.samples.map((s) => s.prompt), b.samples.map((s) => s.prompt));
  await text.policy.release();
});

Deno.test("corrective samples put a failure skill in the prompt and an action that keeps the level solvable as the target", async () => {
  const tasks = await env.sampleTasks("train", 30, 5, envOptions);
  const steps = await correctiveSteps(env, tasks, { ...data, seed: 9 });
  assert.ok(steps.length > 5, `only ${steps.length} corrective steps`);
  for (const s of steps) {
    const block = /\*\*Episode-Level Skill\*\*\n.*\n\[(.*)\]/.exec(s.prompt);
    assert.ok(block, s.prompt);
    assert.ok(
      !block[1].startsWith("Walk behind the box, then push"),
      `a success skill: ${block[1]}`,
    );
    assert.equal(s.response, `<action>${s.action}</action>`);
    const { room, state } = parseGrid(gridLinesOf(s.observation));
    const next = move(room, state, s.action as "up").state;
    assert.ok(
      solve(room, next, { maxDepth: 200, maxStates: 1_000_000 }) !== null,
      `${s.action} deadlocks`,
    );
  }
  const text = await textPolicy();
  const withCorrective = await expertSamples(text, { ...data, correctiveShare: 0.25 });
  const plain = await expertSamples(text, data);
  assert.equal(withCorrective.corrective, Math.round(0.25 * plain.samples.length));
  assert.equal(withCorrective.samples.length, plain.samples.length + withCorrective.corrective);
  await text.policy.release();
});

Deno.test("SFT phases run in order under one optimizer, and a phase of no epochs is skipped", async () => {
  const text = await textPolicy();
  const { samples, ordinary } = await expertSamples(text, { ...data, episodes: 2, skillShare: 1 });
  const initial = new Map([...text.policy.params].map(([k, v]) => [k, v.slice()]));
  const reset = () => {
    for (const [k, v] of initial) text.policy.params.get(k)!.set(v);
  };
  const run = async (phases: Parameters<typeof sftTrain>[1]) => {
    reset();
    const totals: number[] = [];
    const report = await sftTrain(text, phases, {
      batchSize: 4,
      lr: 1e-2,
      maxGradNorm: 1,
      seed: 5,
      onStep: (_, total) => void totals.push(total),
    });
    const weights = [...text.policy.params.values()].map((v) => v.slice());
    return { report, totals, weights };
  };
  const perEpoch = Math.ceil(samples.length / 4);
  const both = await run([{ samples: ordinary, epochs: 1 }, { samples, epochs: 2 }]);
  assert.equal(both.report.optimizerSteps, 3 * perEpoch);
  assert.ok(both.totals.every((t) => t === 3 * perEpoch));
  const first = await run([{ samples: ordinary, epochs: 1 }]);
  // The first phase's steps are the same whether or not a phase follows (its shuffle comes first).
  assert.equal(both.report.firstLoss, first.report.firstLoss);
  // Three passes over the same response tokens (the skill changes prompts only).
  assert.equal(both.report.tokens, 3 * first.report.tokens);
  const skipped = await run([{ samples: ordinary, epochs: 0 }, { samples, epochs: 2 }]);
  const alone = await run([{ samples, epochs: 2 }]);
  assert.deepEqual(skipped.weights, alone.weights);
  assert.notDeepEqual(both.weights, alone.weights);
  await text.policy.release();
});

Deno.test("household skill-conditioned demonstrations search the usual places their skill names first, the ordinary ones the room's order", async () => {
  const household = toAsyncEnvironment(getEnvironment("household"));
  const model = await resolveModel("builtin:tiny", {
    env: household,
    seed: 1,
    artifacts: null as never,
  });
  const text = new TextPolicy(
    new Policy(model.config, model.parameters, { threads: 1 }),
    new Tokenizer(model.tokenizer),
  );
  const options = {
    env: household,
    envOptions: { prompt: "compact", status_line: true, expert: "search" },
    episodes: 1,
    maxTurns: 30,
    historyLength: 0,
    seed: 3,
  };
  // The one task: "clean some soapbar and put it in toilet", the soapbar in sinkbasin 1, one of
  // its usual places (tests/workers/envs/household_test.ts); the searching expert needs 14
  // actions, the one that searches the usual places first 5.
  const demos = await expertSamples(text, { ...options, skillShare: 1 });
  assert.equal(demos.won, 1);
  assert.equal(demos.ordinary.length, 14);
  assert.equal(demos.samples.length, 5);
  assert.equal(demos.skilled, 5);
  const decode = (ids: number[]) => text.tokenizer.decode(ids);
  assert.equal(decode(demos.samples[0].response), "<action>go to sinkbasin 1</action>");
  assert.equal(decode(demos.ordinary[0].response), "<action>go to cabinet 1</action>");
  const first = decode(demos.samples[0].prompt);
  assert.ok(first.includes("Look for a soapbar in a bathtubbasin or a sinkbasin first"), first);
  assert.ok(!decode(demos.ordinary[0].prompt).includes(SKILL_HEADING));
  // The same task without skills: the ordinary demonstrations only.
  const plain = await expertSamples(text, options);
  assert.deepEqual(plain.samples, demos.ordinary);
  await text.policy.release();
});

import assert from "node:assert/strict";
import { getEnvironment } from "../../../workers/envs/registry.ts";
import { toAsyncEnvironment } from "../../../workers/envs/async.ts";
import {
  compileSkillGrammar,
  judgeWithGrammar,
  normalizeSkillText,
} from "../../../workers/envs/skill_judge.ts";
import type { Environment, Observation, Task, Trajectory } from "../../../workers/envs/types.ts";
import { compileTextPattern } from "../../../workers/model/mod.ts";

/**
 * Word salad like that the demo's skill library was full of (README.md, "Quick start": after
 * RL updates the skills are often garbled fragments).
 */
const SALAD = "Never push a push a: a or or wall a a no target";

/** mulberry32 in [0, 1). */
function rng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Plays `task` with the expert, taking a random admissible (or made-up) action instead with
 * probability `noise`; noise 0 is the expert, noise 1 a random agent.
 */
function play(env: Environment, task: Task, noise: number, seed: number): Trajectory {
  const random = rng(seed);
  const expert = env.createExpert(task);
  const episode = env.createEpisode(task);
  let obs: Observation = episode.reset();
  const trajectory: Trajectory = { task, steps: [], won: false, score: 0 };
  for (let turn = 0; turn < env.defaultMaxTurns; turn++) {
    let action = expert.act(obs);
    if (random() < noise) {
      const options = obs.admissibleActions ?? ["up", "down", "left", "right", "7", "+", "="];
      action = random() < 0.1 ? "dance" : options[Math.floor(random() * options.length)];
    }
    const r = episode.step(action);
    trajectory.steps.push({
      observation: obs.text,
      response: `<action>${action}</action>`,
      action,
      valid: r.valid,
      reward: r.reward,
    });
    trajectory.score += r.reward;
    obs = r.observation;
    if (r.done) {
      trajectory.won = r.won;
      break;
    }
  }
  return trajectory;
}

/** Expert, noisy and random trajectories of train and held-out tasks. */
function trajectories(env: Environment, perSplit: number): Trajectory[] {
  const out: Trajectory[] = [];
  for (const split of ["train", "test_unseen"] as const) {
    env.sampleTasks(split, perSplit, 11).forEach((task, i) => {
      for (const noise of [0, 0.3, 1]) out.push(play(env, task, noise, 1000 * i + noise * 10));
    });
  }
  return out;
}

for (const id of ["sokoban", "household", "webshop", "ezpoints"]) {
  Deno.test(`${id}: every reference skill is judged well-formed and truthful for its trajectory, and a different one well-formed but untrue`, () => {
    const env = getEnvironment(id);
    const played = trajectories(env, 12);
    const skills = played.map((t) => env.referenceAnalysis(t).episode_skill);
    const kinds = new Set<string>();
    played.forEach((t, i) => {
      assert.deepEqual(
        env.judgeSkill!(t, skills[i]),
        { wellFormed: true, truthful: true, matchesReference: true },
        `reference skill not accepted: ${skills[i]}`,
      );
      // Case, spacing and sentence punctuation do not matter.
      const restyled = `  ${skills[i].toUpperCase().replace(/[.;,]/g, "")}!! `;
      assert.deepEqual(env.judgeSkill!(t, restyled), {
        wellFormed: true,
        truthful: true,
        matchesReference: true,
      });
      kinds.add(normalizeSkillText(skills[i]).split(" ").slice(0, 6).join(" "));
      const other = skills.find((s) => normalizeSkillText(s) !== normalizeSkillText(skills[i]));
      assert.ok(other !== undefined);
      assert.deepEqual(
        env.judgeSkill!(t, other),
        { wellFormed: true, truthful: false, matchesReference: false },
        `${other} vs ${skills[i]}`,
      );
    });
    assert.ok(kinds.size >= 3, `too few kinds of skill exercised: ${[...kinds].join(" | ")}`);
    assert.ok(played.some((t) => t.won) && played.some((t) => !t.won));
  });

  Deno.test(`${id}: word salad, a cut-off skill and an illegal slot value are not well-formed`, () => {
    const env = getEnvironment(id);
    const t = trajectories(env, 2)[1];
    const skill = env.referenceAnalysis(t).episode_skill;
    assert.deepEqual(env.judgeSkill!(t, SALAD), {
      wellFormed: false,
      truthful: false,
      matchesReference: false,
    });
    assert.deepEqual(env.judgeSkill!(t, ""), {
      wellFormed: false,
      truthful: false,
      matchesReference: false,
    });
    const cut = skill.slice(0, Math.floor(skill.length * 0.6));
    assert.deepEqual(env.judgeSkill!(t, cut), {
      wellFormed: false,
      truthful: false,
      matchesReference: false,
    });
    assert.equal(env.judgeSkill!(t, `${skill} again`).wellFormed, false);
  });
}

for (const id of ["sokoban", "household"]) {
  Deno.test(`${id}: the skill pattern of each outcome admits every reference skill of that outcome, and every sentence it admits is well-formed`, () => {
    const env = getEnvironment(id);
    const { won, lost } = env.skillPatterns!;
    const byOutcome = { won: compileTextPattern(won), lost: compileTextPattern(lost) };
    const dfa = compileTextPattern({ oneOf: [won, lost] });
    const played = trajectories(env, 12);
    for (const t of played) {
      const skill = env.referenceAnalysis(t).episode_skill;
      const [own, other] = t.won
        ? [byOutcome.won, byOutcome.lost]
        : [byOutcome.lost, byOutcome.won];
      assert.ok(own.matches(skill), `reference skill outside its outcome's pattern: ${skill}`);
      // household's reference skill (the usual places) is the same won or lost: in both patterns
      const shared = id === "household";
      assert.equal(
        other.matches(skill),
        shared,
        `reference skill vs the other outcome's: ${skill}`,
      );
    }
    assert.ok(played.some((t) => t.won) && played.some((t) => !t.won));
    // random sentences of the pattern (random walks over its automaton)
    const random = rng(5);
    const seen = new Set<string>();
    for (let walk = 0; walk < 300; walk++) {
      const bytes: number[] = [];
      for (let s = 0;;) {
        const options = [...dfa.bytesFrom(s)];
        if (dfa.accepting[s] && (options.length === 0 || random() < 0.2)) break;
        const b = options[Math.floor(random() * options.length)];
        bytes.push(b);
        s = dfa.step(s, b);
      }
      const text = new TextDecoder().decode(Uint8Array.from(bytes));
      seen.add(text.slice(0, 12));
      assert.equal(env.judgeSkill!(played[0], text).wellFormed, true, text);
    }
    assert.ok(seen.size >= 5, `too few kinds of sentence: ${[...seen].join(" | ")}`);
    assert.equal(dfa.matches(SALAD), false);
  });
}

Deno.test("sokoban: slot values outside the grammar are rejected (direction, noun phrases)", () => {
  const env = getEnvironment("sokoban");
  const t = trajectories(env, 1)[0];
  const ok =
    "Walk behind the box, then push it up then left onto the target; never push a box into a corner or along a wall with no target.";
  assert.equal(env.judgeSkill!(t, ok).wellFormed, true);
  assert.equal(env.judgeSkill!(t, ok.replace("up then left", "up then north")).wellFormed, false);
  assert.equal(env.judgeSkill!(t, ok.replace("the target;", "the targets;")).wellFormed, false);
  assert.equal(
    env.judgeSkill!(
      t,
      "Never push a box into a corner or along a wall with no target; before pushing down, check the box can still be pushed onto a target.",
    ).wellFormed,
    true,
  );
});

Deno.test("sokoban: a workflow never names one push direction twice in a row, in the grammar or the pattern", () => {
  const env = getEnvironment("sokoban");
  const t = trajectories(env, 1)[0];
  const workflow = (pushes: string) =>
    `Walk behind the box, then push it ${pushes} onto the target; never push a box into a corner or along a wall with no target.`;
  const won = compileTextPattern(env.skillPatterns!.won);
  for (
    const pushes of ["up", "up then left", "up then left then up", "down then right then down"]
  ) {
    assert.equal(env.judgeSkill!(t, workflow(pushes)).wellFormed, true, pushes);
    assert.ok(won.matches(workflow(pushes)), pushes);
  }
  for (const pushes of ["up then up", "left then up then up", "up then left then left"]) {
    assert.equal(env.judgeSkill!(t, workflow(pushes)).wellFormed, false, pushes);
    assert.ok(!won.matches(workflow(pushes)), pushes);
  }
  // the decoder's bound: six directions, not seven
  const six = "up then left then up then left then up then left";
  assert.ok(won.matches(workflow(six)));
  assert.ok(!won.matches(workflow(`${six} then up`)));
  assert.equal(env.judgeSkill!(t, workflow(`${six} then up`)).wellFormed, true);
});

Deno.test("household: the goal object type must be the same wherever it recurs", () => {
  const env = getEnvironment("household");
  const t = trajectories(env, 1)[0];
  const good =
    "To put a apple in countertop: find the apple (open closed receptacles to look inside), take it, go to the countertop (open it if closed) and put it.";
  assert.equal(env.judgeSkill!(t, good).wellFormed, true);
  assert.equal(
    env.judgeSkill!(t, good.replace("find the apple", "find the mug")).wellFormed,
    false,
  );
  assert.equal(env.judgeSkill!(t, good.replace(/apple/g, "unicorn")).wellFormed, false);
});

Deno.test("household: the skill pattern holds the goal object and target types fixed, as the grammar does", () => {
  const env = getEnvironment("household");
  const t = trajectories(env, 1)[0];
  const dfa = compileTextPattern({ oneOf: [env.skillPatterns!.won, env.skillPatterns!.lost] });
  const good =
    "To put a apple in countertop: find the apple (open closed receptacles to look inside), take it, go to the countertop (open it if closed) and put it.";
  const failure =
    "Avoid this mistake: took the apple 2 but ran out of steps before putting it in a countertop. Instead, go straight to the countertop and put the apple; to put a apple in countertop: find the apple (open closed receptacles to look inside), take it, go to the countertop (open it if closed) and put it.";
  for (const text of [good, failure]) {
    assert.equal(dfa.matches(text), true, text);
    for (
      const bad of [
        text.replace("find the apple", "find the mug"),
        text.replace("go to the countertop", "go to the cabinet"),
        text.replace(/apple/g, "unicorn"),
        text.replace(/countertop/g, "desklamp"), // no target type of pick_and_place
      ]
    ) {
      assert.equal(dfa.matches(bad), false, bad);
      assert.equal(env.judgeSkill!(t, bad).wellFormed, false, bad);
    }
    // the grammar ignores case; the pattern writes the analyzer's
    assert.equal(dfa.matches(text.toLowerCase()), false);
  }
  assert.equal(dfa.matches(failure.replace("apple 2", "apple 12")), true);
  assert.equal(dfa.matches(failure.replace("apple 2", "mug 2")), false);
});

Deno.test("ezpoints: a formula slot keeps its operators (10 + 2 is not 10 * 2)", () => {
  const grammar = compileSkillGrammar([{
    text: "with these cards {solution} makes 12.",
    slots: { solution: "(?:\\d+|[-+*/()])(?: (?:\\d+|[-+*/()]))*" },
  }]);
  const j = judgeWithGrammar(
    grammar,
    "With these cards (10+2) makes 12",
    "with these cards ( 10 * 2 ) makes 12.",
  );
  assert.deepEqual(j, { wellFormed: true, truthful: false, matchesReference: false });
  assert.equal(normalizeSkillText("Push it UP; then (10+2)!"), "push it up then ( 10 + 2 )");
});

Deno.test("the async form judges like the sync one, and is absent for an env without a judge", async () => {
  const env = getEnvironment("sokoban");
  const t = trajectories(env, 1)[0];
  const skill = env.referenceAnalysis(t).episode_skill;
  const wrapped = toAsyncEnvironment(env);
  assert.deepEqual(await wrapped.judgeSkill!(t, skill), {
    wellFormed: true,
    truthful: true,
    matchesReference: true,
  });
  assert.deepEqual(await wrapped.judgeSkill!(t, SALAD), {
    wellFormed: false,
    truthful: false,
    matchesReference: false,
  });
  const { judgeSkill: _, ...plain } = env;
  assert.equal(toAsyncEnvironment(plain as Environment).judgeSkill, undefined);
});

import assert from "node:assert/strict";
import { analyzeEzPoints, valueWords } from "../../../../workers/envs/ezpoints/analyzer.ts";
import { fraction } from "../../../../workers/envs/ezpoints/formula.ts";
import type { Card } from "../../../../workers/envs/ezpoints/cards.ts";
import { ezpointsEnvironment as env } from "../../../../workers/envs/ezpoints/mod.ts";
import { wordsOf } from "../../../../workers/envs/prompt.ts";
import { Rng } from "../../../../workers/envs/_rng.ts";
import { rollout } from "../sokoban/_rollout.ts";
import type { SkillAnalysis, Task, Trajectory } from "../../../../workers/envs/types.ts";

const [task] = env.sampleTasks("train", 1, 0, { render: "text" }); // any task: the hand is given
const vocabulary = new Set(env.vocabulary());

/** Analyses `actions` played on `hand`, checking every word is in the vocabulary. */
function analyze(hand: Card[], actions: string[], t: Task = task): SkillAnalysis {
  const trajectory: Trajectory = {
    task: t,
    won: false,
    score: 0,
    steps: actions.map((action) => ({
      observation: "",
      response: action,
      action,
      valid: true,
      reward: 0,
    })),
  };
  const out = analyzeEzPoints(hand, trajectory);
  for (const word of wordsOf(out.episode_summary + " " + out.episode_skill)) {
    assert.ok(vocabulary.has(word), `missing ${word} in ${JSON.stringify(out)}`);
  }
  return out;
}

const fiveSeven: Card[] = [{ rank: 5, suit: "hearts" }, { rank: 7, suit: "spades" }];
const fourThree: Card[] = [{ rank: 4, suit: "clubs" }, { rank: 3, suit: "diamonds" }];
const fiveThreeThree: Card[] = [
  { rank: 5, suit: "hearts" },
  { rank: 3, suit: "spades" },
  { rank: 3, suit: "clubs" },
];

Deno.test("a solved sum gives the addition workflow and the formula used", () => {
  const a = analyze(fiveSeven, ["7", "+", "5", "="]);
  assert.equal(a.episode_summary, "Solved in 4 steps: 7 + 5 = 12.");
  assert.match(a.episode_skill, /^When the card values add up to 12/);
});

Deno.test("a solved product gives the multiplication workflow, a mixed formula the general one", () => {
  assert.match(analyze(fourThree, ["4", "*", "3", "="]).episode_skill, /multiply to 12/);
  const hand: Card[] = [{ rank: 2, suit: "hearts" }, { rank: 2, suit: "spades" }, {
    rank: 4,
    suit: "clubs",
  }];
  const a = analyze(hand, ["(", "2", "+", "4", ")", "*", "2", "="]);
  assert.equal(a.episode_summary, "Solved in 8 steps: ( 2 + 4 ) * 2 = 12.");
  assert.match(a.episode_skill, /^Combine the card values/);
});

Deno.test("a wrong value names the value and a formula that does make 12", () => {
  const a = analyze(fiveSeven, ["7", "-", "5", "="]);
  assert.equal(a.episode_summary, "Failed: the formula 7 - 5 equals 2, not 12.");
  assert.match(a.episode_skill, /with these cards 5 \+ 7 makes 12\.$/);
  assert.match(analyze(fiveSeven, ["7", "/", "5", "="]).episode_summary, /equals 7\/5, not 12/);
  const tens: Card[] = [10, 11, 12].map((rank) => ({ rank, suit: "clubs" as const }));
  assert.match(
    analyze(tens, ["10", "*", "10", "*", "10", "="]).episode_summary,
    /equals more than 100, not 12/,
  );
  const sevens: Card[] = [7, 7, 9].map((rank, i) => ({ rank, suit: i ? "spades" : "hearts" }));
  assert.match(
    analyze(sevens, ["7", "/", "(", "9", "*", "7", ")", "="]).episode_summary,
    /equals 1\/9, not 12/,
  );
  assert.equal(valueWords(fraction(250, 3)), "about 83");
  assert.equal(valueWords(fraction(-1000)), "less than -100");
});

Deno.test("= too early and division by zero are the mistakes they are", () => {
  const early = analyze(fiveSeven, ["5", "+", "="]);
  assert.equal(
    early.episode_summary,
    "Failed: entered = at step 3 before the formula 5 + was complete.",
  );
  assert.match(early.episode_skill, /^Enter = only after every card's number is in the formula/);
  assert.match(analyze(fiveSeven, ["="]).episode_summary, /before the formula \(empty\) was/);
  const zero = analyze(fiveThreeThree, ["5", "/", "(", "3", "-", "3", ")", "="]);
  assert.equal(zero.episode_summary, "Failed: the formula 5 / ( 3 - 3 ) divides by zero.");
  assert.match(zero.episode_skill, /makes 12\.$/);
});

Deno.test("without a submission the first inadmissible token is the mistake", () => {
  assert.equal(
    analyze(fiveSeven, ["5", "+", "8", "7"]).episode_summary,
    "Failed: at step 3 entered 8, which is not the number of any card.",
  );
  assert.equal(
    analyze(fiveSeven, ["5", "+", "5"]).episode_summary,
    "Failed: at step 3 entered 5 again, but each card is used exactly once.",
  );
  assert.equal(
    analyze(fiveSeven, ["5", "*", "+"]).episode_summary,
    "Failed: at step 3 + could not follow the formula 5 *.",
  );
  assert.equal(
    analyze(fiveSeven, ["twelve please"]).episode_summary,
    "Failed: at step 1 the action was not a number, operator, parenthesis or =.",
  );
});

Deno.test("running out of steps with only admissible tokens says so, with the formula", () => {
  const a = analyze(fiveSeven, ["5", "+", "7"]);
  assert.equal(
    a.episode_summary,
    "Failed: ran out of steps before entering =; the formula was 5 + 7.",
  );
  assert.match(a.episode_skill, /^Enter = as soon as the formula uses every card/);
});

Deno.test("the environment's referenceAnalysis replays on the task's own hand", () => {
  const [t] = env.sampleTasks("test_unseen", 1, 3);
  const episode = env.createEpisode(t);
  const expert = env.createExpert(t);
  let obs = episode.reset();
  const actions: string[] = [];
  for (let turn = 0; turn < 6; turn++) {
    const action = expert.act(obs);
    actions.push(action);
    const r = episode.step(action);
    obs = r.observation;
    if (r.done) break;
  }
  const trajectory: Trajectory = {
    task: t,
    won: true,
    score: 10,
    steps: actions.map((action) => ({
      observation: "",
      response: action,
      action,
      valid: true,
      reward: 0,
    })),
  };
  assert.equal(
    env.referenceAnalysis(trajectory).episode_summary,
    `Solved in 4 steps: ${actions.slice(0, 3).join(" ")} = 12.`,
  );
});

Deno.test("for random play the analysis says Solved exactly when the episode was won, in known words", () => {
  const rng = new Rng(5);
  let wins = 0;
  for (const cards of [2, 3]) {
    for (const t of env.sampleTasks("train", 150, 9, { cards, render: "text" })) {
      const trajectory = rollout(
        env,
        t,
        (obs) =>
          rng.next() < 0.1 ? rng.pick(["7", "+", ")", "x"]) : rng.pick(obs.admissibleActions!),
      );
      const a = env.referenceAnalysis(trajectory);
      assert.equal(a.episode_summary.startsWith("Solved"), trajectory.won, a.episode_summary);
      if (trajectory.won) wins++;
      for (const word of wordsOf(a.episode_summary + " " + a.episode_skill)) {
        assert.ok(vocabulary.has(word), `missing ${word} in ${a.episode_summary}`);
      }
    }
  }
  assert.ok(wins > 0 && wins < 100, `random play won ${wins} of 300`);
});

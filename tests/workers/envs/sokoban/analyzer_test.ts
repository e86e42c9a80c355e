import assert from "node:assert/strict";
import { analyzeSokoban } from "../../../../workers/envs/sokoban/analyzer.ts";
import type { Level } from "../../../../workers/envs/sokoban/generate.ts";
import { parseGrid } from "../../../../workers/envs/sokoban/room.ts";
import { sokobanEnvironment as env } from "../../../../workers/envs/sokoban/mod.ts";
import { Rng } from "../../../../workers/envs/_rng.ts";
import { wordsOf } from "../../../../workers/envs/prompt.ts";
import { SPLITS, type Task, type Trajectory } from "../../../../workers/envs/types.ts";
import { rollout } from "./_rollout.ts";

const task: Task = {
  envId: "sokoban",
  id: "sokoban/train/hand",
  split: "train",
  seed: 0,
  family: "sokoban",
  instruction: "push the box onto the target",
  options: {},
};

function levelOf(rows: string[]): Level {
  const { room, state } = parseGrid(rows.join("\n"));
  return { room, start: state, solution: [] };
}

function trajectoryOf(actions: string[], won: boolean): Trajectory {
  return {
    task,
    won,
    score: 0,
    steps: actions.map((action) => ({
      observation: "",
      response: `<action>${action}</action>`,
      action,
      valid: true,
      reward: -0.1,
    })),
  };
}

const corridor = levelOf([
  "# # # # # #",
  "# _ _ _ _ #",
  "# P X _ O #",
  "# _ _ _ _ #",
  "# # # # # #",
  "# # # # # #",
]);

Deno.test("a success is summarised by the moves actually made and the push order", () => {
  const a = analyzeSokoban(corridor, trajectoryOf(["up", "down", "right", "right"], true));
  assert.equal(
    a.episode_summary,
    "Solved in 4 steps: walked up 1, walked down 1, pushed the box right 2.",
  );
  assert.match(a.episode_skill, /^Walk behind the box, then push it right onto the target;/);
});

Deno.test("pushing a box into a corner is found as the deadlock, with its step and direction", () => {
  const level = levelOf([
    "# # # # # #",
    "# # _ _ _ #",
    "# _ X P _ #",
    "# _ _ _ O #",
    "# _ _ _ _ #",
    "# # # # # #",
  ]);
  const a = analyzeSokoban(level, trajectoryOf(["up", "down", "left", "right"], false));
  assert.equal(
    a.episode_summary,
    "Failed: at step 3 pushing left moved the box into a corner, where it can never reach a target.",
  );
  assert.match(a.episode_skill, /Never push a box into a corner .* before pushing left/);
});

Deno.test("pushing a box against a wall with no target is found as the deadlock", () => {
  const level = levelOf([
    "# # # # # #",
    "# _ _ _ O #",
    "# _ X P _ #",
    "# _ _ _ _ #",
    "# _ _ _ _ #",
    "# # # # # #",
  ]);
  const a = analyzeSokoban(level, trajectoryOf(["left"], false));
  assert.match(
    a.episode_summary,
    /at step 1 pushing left moved the box against a wall with no target/,
  );
});

Deno.test("failures without a deadlock name invalid actions, back-and-forth moves or wall bumps", () => {
  const invalid = analyzeSokoban(corridor, trajectoryOf(["", "jump", "", "up", "down"], false));
  assert.equal(
    invalid.episode_summary,
    "Failed: 3 of 5 actions were invalid, so those steps were lost.",
  );
  const back = analyzeSokoban(
    corridor,
    trajectoryOf(["up", "down", "up", "down", "up", "down"], false),
  );
  assert.match(back.episode_summary, /back and forth/);
  const bumps = analyzeSokoban(corridor, trajectoryOf(["left", "left", "left", "down"], false));
  assert.equal(
    bumps.episode_summary,
    "Failed: 3 of 4 moves walked into a wall or a stuck box and changed nothing.",
  );
  const slow = analyzeSokoban(corridor, trajectoryOf(["up", "right"], false));
  assert.equal(
    slow.episode_summary,
    "Failed: ran out of steps with 1 of 1 boxes still off target.",
  );
});

Deno.test("expert successes name the push directions the expert actually used", () => {
  for (const t of env.sampleTasks("train", 30, 9)) {
    const expert = env.createExpert(t);
    const traj = rollout(env, t, (obs) => expert.act(obs));
    assert.ok(traj.won);
    const episode = env.createEpisode(t);
    episode.reset();
    const pushes: string[] = [];
    for (const s of traj.steps) {
      if (episode.step(s.action).info.pushed && pushes[pushes.length - 1] !== s.action) {
        pushes.push(s.action);
      }
    }
    const a = env.referenceAnalysis(traj);
    assert.ok(
      a.episode_skill.includes(`push it ${pushes.join(" then ")} onto the target`),
      a.episode_skill,
    );
  }
});

Deno.test("every word of prompts, observations and reference skills is in the vocabulary", () => {
  const vocab = new Set(env.vocabulary());
  const rng = new Rng(3);
  for (const split of SPLITS) {
    for (const boxes of [1, 2]) {
      for (const t of env.sampleTasks(split, 40, 4, { boxes, size: 7 })) {
        const expert = env.createExpert(t);
        for (
          const traj of [
            rollout(env, t, (obs) => expert.act(obs)),
            rollout(env, t, (obs) => rng.pick([...obs.admissibleActions!, "<think>"])),
          ]
        ) {
          const a = env.referenceAnalysis(traj);
          const prompt = env.buildPrompt({
            task: t,
            history: traj.steps.slice(0, -1),
            observation: {
              text: traj.steps[traj.steps.length - 1].observation,
              admissibleActions: ["up", "down", "left", "right"],
            },
            historyLength: 2,
            turn: traj.steps.length,
          });
          for (const w of wordsOf(`${a.episode_summary} ${a.episode_skill} ${prompt}`)) {
            assert.ok(vocab.has(w), `"${w}" is not in the vocabulary`);
          }
        }
      }
    }
  }
});

import assert from "node:assert/strict";
import {
  EnvOptionsError,
  InvalidTaskError,
  TaskSamplingError,
} from "../../../../workers/envs/errors.ts";
import { sokobanEnvironment as env } from "../../../../workers/envs/sokoban/mod.ts";
import { TASK_LINE_PREFIX, wordsOf } from "../../../../workers/envs/prompt.ts";
import { rollout } from "./_rollout.ts";

Deno.test("options are validated with field paths and defaults are filled", () => {
  const [task] = env.sampleTasks("train", 1, 0);
  assert.deepEqual(task.options, {
    size: 6,
    boxes: 1,
    end_on_deadlock: true,
    relative_positions: false,
    prompt: "full",
  });
  assert.equal(task.instruction, "push the box onto the target");
  assert.equal(
    env.sampleTasks("train", 1, 0, { boxes: 2 })[0].instruction,
    "push all 2 boxes onto the targets",
  );
  for (
    const bad of [
      { size: 4 },
      { size: 11 },
      { boxes: 0 },
      { boxes: 1.5 },
      { colour: "red" },
      { prompt: "short" },
      { relative_positions: "yes" },
    ]
  ) {
    assert.throws(() => env.sampleTasks("train", 1, 0, bad), (e: unknown) => {
      assert.ok(e instanceof EnvOptionsError);
      assert.match(e.message, /^Cannot use options for environment sokoban as /);
      return true;
    });
  }
  const err = (() => {
    try {
      env.sampleTasks("train", 1, 0, { size: 99 });
    } catch (e) {
      return e as EnvOptionsError;
    }
  })();
  assert.deepEqual(err?.issues[0].path, ["size"]);
});

Deno.test("a task of another environment is refused", () => {
  const [task] = env.sampleTasks("train", 1, 0);
  assert.throws(() => env.createEpisode({ ...task, envId: "household" }), InvalidTaskError);
});

Deno.test("a 6x6 prompt with two steps of history stays within 150 words", () => {
  const [task] = env.sampleTasks("train", 1, 0);
  const expert = env.createExpert(task);
  const traj = rollout(env, task, (obs) => expert.act(obs));
  const episode = env.createEpisode(task);
  let obs = episode.reset();
  for (const s of traj.steps.slice(0, 3)) obs = episode.step(s.action).observation;
  const prompt = env.buildPrompt({
    task,
    history: traj.steps.slice(0, 3),
    observation: obs,
    historyLength: 2,
    turn: 4,
  });
  const lines = prompt.split("\n");
  assert.equal(lines[1], `${TASK_LINE_PREFIX}push the box onto the target`);
  assert.match(lines[lines.length - 1], /^Now it's your turn to take an action\./);
  assert.ok(wordsOf(prompt).length <= 150, `${wordsOf(prompt).length} words`);
});

Deno.test("the description, families, turn limit and split notes are set", () => {
  assert.equal(env.id, "sokoban");
  assert.deepEqual(env.families, ["sokoban"]);
  assert.equal(env.defaultMaxTurns, 20);
  assert.match(env.splitDescriptions?.test_unseen ?? "", /pillar/);
});

Deno.test("sampleTasks refuses an unknown split, a bad count or a bad seed", () => {
  assert.throws(() => env.sampleTasks("valid" as "train", 1, 0), TaskSamplingError);
  assert.throws(() => env.sampleTasks("train", -1, 0), TaskSamplingError);
  assert.throws(() => env.sampleTasks("train", 1.5, 0), TaskSamplingError);
  assert.throws(
    () => env.sampleTasks("train", 1, -3),
    /seed must be an integer in 0\.\.4294967295/,
  );
  assert.deepEqual(env.sampleTasks("train", 0, 0), []);
});

Deno.test("relative_positions adds a line with each box and target as rows and columns from the player", () => {
  const [task] = env.sampleTasks("train", 1, 3, { relative_positions: true });
  const obs = env.createEpisode(task).reset();
  const lines = obs.text.split("\n");
  assert.equal(lines.length, 7);
  const grid = lines.slice(0, 6).map((row) => row.split(" "));
  const find = (symbols: string[]) => {
    for (const [r, row] of grid.entries()) {
      for (const [c, cell] of row.entries()) if (symbols.includes(cell)) return [r, c];
    }
    throw new Error(`no ${symbols}`);
  };
  const [pr, pc] = find(["P", "S"]);
  const [br, bc] = find(["X", "√"]);
  const [tr, tc] = find(["O", "√", "S"]);
  const offset = (r: number, c: number) =>
    `${Math.abs(r - pr)} ${r >= pr ? "down" : "up"} ${Math.abs(c - pc)} ${
      c >= pc ? "right" : "left"
    }`;
  assert.equal(lines[6], `box ${offset(br, bc)} target ${offset(tr, tc)}`);
  const plain = env.createEpisode(env.sampleTasks("train", 1, 3)[0]).reset();
  assert.equal(plain.text, lines.slice(0, 6).join("\n"));
});

Deno.test("the compact prompt is the task line and the observation, with history lines between", () => {
  const options = { relative_positions: true, prompt: "compact" };
  const [task] = env.sampleTasks("train", 1, 0, options);
  const expert = env.createExpert(task);
  const traj = rollout(env, task, (obs) => expert.act(obs));
  const episode = env.createEpisode(task);
  let obs = episode.reset();
  assert.equal(
    env.buildPrompt({ task, history: [], observation: obs, historyLength: 0, turn: 1 }),
    `${TASK_LINE_PREFIX}push the box onto the target\n${obs.text}`,
  );
  for (const s of traj.steps.slice(0, 2)) obs = episode.step(s.action).observation;
  const prompt = env.buildPrompt({
    task,
    history: traj.steps.slice(0, 2),
    observation: obs,
    historyLength: 1,
    turn: 3,
  });
  assert.equal(
    prompt,
    `${TASK_LINE_PREFIX}push the box onto the target\n` +
      `[Observation 2:\n${traj.steps[1].observation}, Action 2: ${traj.steps[1].action}]\n` +
      obs.text,
  );
});

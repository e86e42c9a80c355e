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
  assert.deepEqual(task.options, { size: 6, boxes: 1, end_on_deadlock: true });
  assert.equal(task.instruction, "push the box onto the target");
  assert.equal(
    env.sampleTasks("train", 1, 0, { boxes: 2 })[0].instruction,
    "push all 2 boxes onto the targets",
  );
  for (const bad of [{ size: 4 }, { size: 11 }, { boxes: 0 }, { boxes: 1.5 }, { colour: "red" }]) {
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

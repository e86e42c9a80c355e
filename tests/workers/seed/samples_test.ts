import assert from "node:assert/strict";
import type { Task } from "../../../workers/envs/types.ts";
import type { RolloutTrajectory } from "../../../workers/seed/rollout.ts";
import {
  broadcastToTokens,
  buildSamples,
  meanPerTrajectory,
  miniBatches,
  selectForAnalysis,
  teacherMask,
} from "../../../workers/seed/samples.ts";
import { SeedOptionError } from "../../../workers/seed/errors.ts";

function task(id: string): Task {
  return { envId: "toy", id, split: "train", seed: 0, family: "toy", instruction: id, options: {} };
}

function rollout(
  id: string,
  taskId: string,
  won: boolean,
  valid: boolean[],
  position: [number, number] = [0, 0],
): RolloutTrajectory {
  return {
    id,
    taskIndex: position[0],
    copyIndex: position[1],
    task: task(taskId),
    won,
    score: won ? 10 : 0,
    truncated: false,
    steps: valid.map((v, t) => ({
      prompt: `${id} prompt ${t}`,
      observation: `obs ${t}`,
      response: `${id} response ${t}`,
      action: v ? "go" : "",
      valid: v,
      reward: 0,
    })),
  };
}

/** A small deterministic generator (mulberry32) standing in for the trainer's RNG. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const trajectories = [
  rollout("t1", "a", true, [true, false], [0, 0]),
  rollout("t2", "a", false, [true], [0, 1]),
  rollout("t3", "b", false, [true, true], [1, 0]),
];

Deno.test("each turn becomes one sample with its prompt, response, score and advantage", () => {
  const samples = buildSamples(trajectories, {
    rewardSource: "success",
    invalidPenalty: 0.1,
    estimator: "grpo",
    norm: "mean",
  });
  assert.equal(samples.length, 5);
  assert.deepEqual(
    samples.map((s) => [s.index, s.trajectoryId, s.turn, s.taskIndex, s.copyIndex]),
    [
      [0, "t1", 0, 0, 0],
      [1, "t1", 1, 0, 0],
      [2, "t2", 0, 0, 1],
      [3, "t3", 0, 1, 0],
      [4, "t3", 1, 1, 0],
    ],
  );
  assert.equal(samples[1].prompt, "t1 prompt 1");
  assert.equal(samples[1].response, "t1 response 1");
  assert.equal(samples[1].valid, false);
  assert.deepEqual(samples.map((s) => s.score), [10, 9.9, 0, 0, 0]);
  // Task a: mean 19.9 / 3; task b: all equal → 0.
  const mean = 19.9 / 3;
  const expected = [10 - mean, 9.9 - mean, -mean, 0, 0];
  samples.forEach((s, i) => assert.ok(Math.abs(s.advantage - expected[i]) < 1e-12));
  // r_t without the penalty; p on the invalid turn apart (GiGPO subtracts it after discounting)
  assert.deepEqual(samples.map((s) => s.stepReward), [0, 10, 0, 0, 0]);
  assert.deepEqual(samples.map((s) => s.stepPenalty), [0, 0.1, 0, 0, 0]);
});

Deno.test("an unknown estimator is rejected", () => {
  assert.throws(
    () =>
      buildSamples(trajectories, {
        rewardSource: "success",
        invalidPenalty: 0.1,
        estimator: "ppo" as "grpo",
        norm: "mean",
      }),
    SeedOptionError,
  );
});

Deno.test("failed_only selects the trajectories that were not won", () => {
  assert.deepEqual(selectForAnalysis(trajectories, "failed_only").map((t) => t.id), ["t2", "t3"]);
  assert.deepEqual(selectForAnalysis(trajectories, "all").map((t) => t.id), ["t1", "t2", "t3"]);
});

Deno.test("samples of trajectories whose analysis failed or was skipped get teacher mask 0", () => {
  const samples = buildSamples(trajectories, {
    rewardSource: "success",
    invalidPenalty: 0.1,
    estimator: "grpo",
    norm: "mean_std",
  });
  // t1 was won and not analysed (failed_only): absent. t2 parsed. t3 failed to parse: null.
  const skills = new Map<string, string | null>([["t2", "Move before waiting."], ["t3", null]]);
  assert.deepEqual([...teacherMask(samples, skills)], [0, 0, 1, 0, 0]);
  const blank = new Map<string, string | null>([["t1", "  "], ["t2", "x"], ["t3", "y"]]);
  assert.deepEqual([...teacherMask(samples, blank)], [0, 0, 1, 1, 1]);
});

Deno.test("advantages broadcast to each response token with a padding mask", () => {
  const b = broadcastToTokens([0.5, -2, 1], [2, 0, 3]);
  assert.equal(b.width, 3);
  assert.equal(b.rows, 3);
  assert.deepEqual([...b.values], [0.5, 0.5, 0, 0, 0, 0, 1, 1, 1]);
  assert.deepEqual([...b.mask], [1, 1, 0, 0, 0, 0, 1, 1, 1]);
  const padded = broadcastToTokens([3], [1], 4);
  assert.deepEqual([...padded.values], [3, 0, 0, 0]);
  assert.throws(() => broadcastToTokens([1, 2], [1]), SeedOptionError);
  assert.throws(() => broadcastToTokens([1], [5], 4), SeedOptionError);
  assert.throws(() => broadcastToTokens([1], [-1]), SeedOptionError);
});

Deno.test("the mean teacher gap is taken over all response tokens of a trajectory", () => {
  const samples = [{ trajectoryId: "t1" }, { trajectoryId: "t1" }, { trajectoryId: "t2" }, {
    trajectoryId: "t3",
  }];
  const gaps = meanPerTrajectory(samples, [[1, 2], [6], [-1, 1], []]);
  assert.deepEqual([...gaps], [["t1", 3], ["t2", 0]]);
});

Deno.test("mini-batches cover every sample once per epoch in a seeded shuffled order", () => {
  const batches = miniBatches(10, { miniBatchSize: 4, epochs: 3, rng: mulberry32(7) });
  assert.equal(batches.length, 3);
  for (const epoch of batches) {
    assert.deepEqual(epoch.map((b) => b.length), [4, 4, 2]);
    assert.deepEqual(epoch.flat().sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  }
  assert.notDeepEqual(batches[0].flat(), batches[1].flat());
  assert.notDeepEqual(batches[0].flat(), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  // Same seed, same partition; another seed, another one.
  assert.deepEqual(miniBatches(10, { miniBatchSize: 4, epochs: 3, rng: mulberry32(7) }), batches);
  assert.notDeepEqual(
    miniBatches(10, { miniBatchSize: 4, epochs: 3, rng: mulberry32(8) }),
    batches,
  );
});

Deno.test("a shuffle driven by rng 0 is the Fisher-Yates rotation it must be", () => {
  // With r = 0, step i swaps order[i] with order[0]: [0,1,2,3] → [1,2,3,0].
  assert.deepEqual(miniBatches(4, { miniBatchSize: 4, epochs: 1, rng: () => 0 }), [[[1, 2, 3, 0]]]);
  assert.deepEqual(miniBatches(0, { miniBatchSize: 2, epochs: 2, rng: () => 0 }), [[], []]);
  assert.throws(
    () => miniBatches(3, { miniBatchSize: 0, epochs: 1, rng: () => 0 }),
    SeedOptionError,
  );
  assert.throws(
    () => miniBatches(3, { miniBatchSize: 1, epochs: 1, rng: () => 1 }),
    SeedOptionError,
  );
});

Deno.test("an estimator name that is not registered is refused with the registered names, even an Object key", () => {
  const trajectories = [rollout("a", "t", true, [true]), rollout("b", "t", false, [true])];
  for (const name of ["ppo", "toString"]) {
    assert.throws(
      () =>
        buildSamples(trajectories, {
          rewardSource: "success",
          invalidPenalty: 0.1,
          estimator: name as "grpo",
          norm: "mean_std",
        }),
      (e: unknown) =>
        e instanceof SeedOptionError &&
        e.message.includes(`must be one of grpo, gigpo: current value is ${name}`),
    );
  }
});

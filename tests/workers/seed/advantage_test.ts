import assert from "node:assert/strict";
import {
  advantageEstimators,
  type AdvantageSample,
  anchorStateGroups,
  discountedReturns,
  gigpoAdvantages,
  groupNormalize,
  grpoAdvantages,
  sampleScores,
  stepRewards,
} from "../../../workers/seed/advantage.ts";
import type { Task, Trajectory } from "../../../workers/envs/types.ts";
import { SeedOptionError } from "../../../workers/seed/errors.ts";

const task: Task = {
  envId: "toy",
  id: "toy/train/0",
  split: "train",
  seed: 0,
  family: "toy",
  instruction: "reach the end",
  options: {},
};

function trajectory(won: boolean, valid: boolean[], rewards?: number[]): Trajectory {
  return {
    task,
    won,
    score: (rewards ?? []).reduce((a, b) => a + b, 0),
    steps: valid.map((v, t) => ({
      observation: `o${t}`,
      response: "",
      action: "",
      valid: v,
      reward: rewards?.[t] ?? 0,
    })),
  };
}

function sample(
  taskId: string,
  trajectoryId: string,
  turn: number,
  score: number,
  extra: Partial<AdvantageSample> = {},
): AdvantageSample {
  return { taskId, trajectoryId, turn, score, stepReward: 0, observation: `${turn}`, ...extra };
}

function assertClose(actual: ArrayLike<number>, expected: number[], tol = 1e-9) {
  assert.equal(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) {
    assert.ok(
      Math.abs(actual[i] - expected[i]) <= tol,
      `index ${i}: ${actual[i]} is not within ${tol} of ${expected[i]}`,
    );
  }
}

Deno.test("scores subtract the invalid-action penalty from the success reward", () => {
  const scores = sampleScores(trajectory(true, [true, false, true]), {
    rewardSource: "success",
    invalidPenalty: 0.1,
  });
  assertClose(scores, [10, 9.9, 10]);
  const lost = sampleScores(trajectory(false, [false]), {
    rewardSource: "success",
    invalidPenalty: 0.1,
  });
  assertClose(lost, [-0.1]);
});

Deno.test("scores under the score source use the trajectory's score", () => {
  const t = trajectory(false, [true, true], [-0.1, 1.9]);
  assertClose(sampleScores(t, { rewardSource: "score", invalidPenalty: 0.5 }), [1.8, 1.8]);
});

Deno.test("a negative invalid-action penalty is rejected", () => {
  assert.throws(
    () => sampleScores(trajectory(true, [true]), { rewardSource: "success", invalidPenalty: -1 }),
    SeedOptionError,
  );
});

Deno.test("grpo mean_std pools every turn of a task and uses the unbiased std", () => {
  // Task a: trajectory 1 won in 2 turns (second invalid), trajectory 2 lost in 1 turn.
  const scores = [10, 9.9, 0];
  const samples = [
    sample("a", "t1", 0, scores[0]),
    sample("a", "t1", 1, scores[1]),
    sample("a", "t2", 0, scores[2]),
  ];
  // Reference values: (s - mean) / (stdev_{n-1} + 1e-6), computed independently in Python.
  assertClose(grpoAdvantages(samples, { norm: "mean_std" }), [
    0.5860317428870874,
    0.5686248594349957,
    -1.1546566023220828,
  ]);
});

Deno.test("grpo mean subtracts the task mean only, per task", () => {
  const samples = [
    sample("a", "t1", 0, 10),
    sample("b", "t3", 0, 4),
    sample("a", "t2", 0, 0),
    sample("a", "t2", 1, 0),
    sample("b", "t4", 0, 2),
  ];
  assertClose(grpoAdvantages(samples, { norm: "mean" }), [
    10 - 10 / 3,
    1,
    -10 / 3,
    -10 / 3,
    -1,
  ]);
});

Deno.test("grpo gives exactly zero to all-equal groups and single-sample groups", () => {
  const samples = [
    sample("same", "t1", 0, 10),
    sample("same", "t2", 0, 10),
    sample("same", "t2", 1, 10),
    sample("alone", "t3", 0, 7),
    sample("mixed", "t4", 0, 10),
    sample("mixed", "t5", 0, 0),
  ];
  for (const norm of ["mean_std", "mean"] as const) {
    const a = grpoAdvantages(samples, { norm });
    assert.deepEqual([...a.slice(0, 4)], [0, 0, 0, 0]);
    assert.ok(a.every((x) => Number.isFinite(x)));
    assert.ok(a[4] > 0 && a[5] < 0);
  }
});

Deno.test("a group of four scores 10, 10, 0, 0 normalises to ±0.866", () => {
  const a = groupNormalize([10, 10, 0, 0], [[0, 1, 2, 3]], { norm: "mean_std" });
  assertClose(a, [
    0.8660252537844647,
    0.8660252537844647,
    -0.8660252537844647,
    -0.8660252537844647,
  ]);
});

Deno.test("success step rewards put 10 on the last step and penalise invalid steps", () => {
  const r = stepRewards(trajectory(true, [true, false, true]), {
    rewardSource: "success",
    invalidPenalty: 0.1,
  });
  assertClose(r, [0, -0.1, 10]);
  const s = stepRewards(trajectory(false, [true, true], [-0.1, 1]), {
    rewardSource: "score",
    invalidPenalty: 0.1,
  });
  assertClose(s, [-0.1, 1]);
});

Deno.test("discounted returns follow turn order, not array order", () => {
  const samples = [
    sample("a", "t1", 1, 0, { stepReward: 10 }),
    sample("a", "t1", 0, 0, { stepReward: 0 }),
    sample("a", "t2", 0, 0, { stepReward: 1 }),
  ];
  assertClose(discountedReturns(samples, 0.5), [10, 5, 1]);
});

Deno.test("anchor groups join identical observations of the same task only", () => {
  const samples = [
    sample("a", "t1", 0, 0, { observation: "s0" }),
    sample("a", "t2", 0, 0, { observation: "s0" }),
    sample("b", "t3", 0, 0, { observation: "s0" }),
    sample("a", "t2", 1, 0, { observation: "s1" }),
  ];
  assert.deepEqual(anchorStateGroups(samples), [[0, 1], [2], [3]]);
});

Deno.test("gigpo adds the weighted step advantage of anchor-state groups", () => {
  // Trajectory t1 (won): s0 → s1 (reward 10 at the end). t2 (lost): s0 → s2 → s1.
  const samples = [
    sample("a", "t1", 0, 10, { observation: "s0", stepReward: 0 }),
    sample("a", "t1", 1, 10, { observation: "s1", stepReward: 10 }),
    sample("a", "t2", 0, 0, { observation: "s0", stepReward: 0 }),
    sample("a", "t2", 1, 0, { observation: "s2", stepReward: 0 }),
    sample("a", "t2", 2, 0, { observation: "s1", stepReward: 0 }),
  ];
  // Episode (mean): scores mean 4 → [6, 6, -4, -4, -4].
  // Returns (γ = 0.5): t1 [5, 10], t2 [0, 0, 0]; groups s0 {5, 0} → ±2.5, s1 {10, 0} → ±5,
  // s2 singleton → 0.
  const a = gigpoAdvantages(samples, { norm: "mean", gamma: 0.5, stepWeight: 1 });
  assertClose(a, [8.5, 11, -6.5, -4, -9]);
  const halfWeight = gigpoAdvantages(samples, { norm: "mean", gamma: 0.5, stepWeight: 0.5 });
  assertClose(halfWeight, [7.25, 8.5, -5.25, -4, -6.5]);
});

Deno.test("gigpo equals grpo when no two samples share an anchor state", () => {
  const samples = [
    sample("a", "t1", 0, 10, { observation: "x", stepReward: 10 }),
    sample("a", "t2", 0, 0, { observation: "y", stepReward: 0 }),
  ];
  assertClose(
    advantageEstimators.gigpo(samples, { norm: "mean_std" }),
    [...advantageEstimators.grpo(samples, { norm: "mean_std" })],
  );
});

Deno.test("a discount outside [0, 1] is rejected", () => {
  assert.throws(() => gigpoAdvantages([], { norm: "mean", gamma: 1.5 }), SeedOptionError);
});

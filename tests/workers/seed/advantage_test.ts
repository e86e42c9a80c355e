import assert from "node:assert/strict";
import {
  advantageEstimators,
  type AdvantageSample,
  anchorStateGroups,
  discountedReturns,
  gigpoAdvantages,
  groupNormalize,
  grpoAdvantages,
  penalizedStepReturns,
  sampleScores,
  stepPenalties,
  stepRewards,
} from "../../../workers/seed/advantage.ts";
import type { Task, Trajectory } from "../../../workers/envs/types.ts";
import type { RolloutTrajectory } from "../../../workers/seed/rollout.ts";
import { buildSamples } from "../../../workers/seed/samples.ts";
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
  taskIndex: number,
  trajectoryId: string,
  turn: number,
  score: number,
  extra: Partial<AdvantageSample> = {},
): AdvantageSample {
  return { taskIndex, trajectoryId, turn, score, stepReward: 0, observation: `${turn}`, ...extra };
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
    sample(0, "t1", 0, scores[0]),
    sample(0, "t1", 1, scores[1]),
    sample(0, "t2", 0, scores[2]),
  ];
  // Reference values: (s - mean) / (stdev_{n-1} + 1e-6), computed independently in Python.
  assertClose(grpoAdvantages(samples, { norm: "mean_std" }), [
    0.5860317428870874,
    0.5686248594349957,
    -1.1546566023220828,
  ]);
});

Deno.test("grpo mean subtracts the group mean only, per rollout group", () => {
  const samples = [
    sample(0, "t1", 0, 10),
    sample(1, "t3", 0, 4),
    sample(0, "t2", 0, 0),
    sample(0, "t2", 1, 0),
    sample(1, "t4", 0, 2),
  ];
  assertClose(grpoAdvantages(samples, { norm: "mean" }), [
    10 - 10 / 3,
    1,
    -10 / 3,
    -10 / 3,
    -1,
  ]);
});

Deno.test("grpo gives a group of one sample its raw score and equal scores (s − mean)/(0 + ε), as the reference code", () => {
  // gigpo/core_gigpo.py `episode_norm_reward` at 2cf2fad: a group of one has mean 0 and std 1,
  // so A = s/(1 + 1e-6) under mean_std and s under mean; equal scores are not a special case.
  const samples = [
    sample(0, "t1", 0, 10),
    sample(0, "t2", 0, 10),
    sample(0, "t2", 1, 10),
    sample(1, "t3", 0, 7),
    sample(2, "t4", 0, 10),
    sample(2, "t5", 0, 0),
  ];
  const std = grpoAdvantages(samples, { norm: "mean_std" });
  assert.deepEqual([...std.slice(0, 3)], [0, 0, 0]); // the mean of three 10s is exact
  assert.equal(std[3], 7 / (1 + 1e-6));
  assert.equal(grpoAdvantages(samples, { norm: "mean" })[3], 7);
  assert.ok(std[4] > 0 && std[5] < 0);
  // Scores whose mean is not exact in float64 get its rounding over ε, tiny but not forced to 0.
  const thirds = grpoAdvantages([0, 1, 2].map((k) => sample(0, `t${k}`, 0, 0.1)), {
    norm: "mean_std",
  });
  const mean = (0.1 + 0.1 + 0.1) / 3;
  assertClose(thirds, [0, 1, 2].map(() => (0.1 - mean) / 1e-6), 1e-20); // std ~1e-17 ≪ ε
  assert.ok(thirds.every((a) => Math.abs(a) < 1e-8));
  // The same scores through the reference code (PyTorch float32, `episode_norm_reward`):
  // a solo group's 7 and a pair of 9.9s.
  assertClose(
    grpoAdvantages([sample(0, "a", 0, 7)], { norm: "mean_std" }),
    [6.999993324279785],
    1e-6,
  );
  assertClose(
    grpoAdvantages([sample(1, "b", 0, 9.9), sample(1, "c", 0, 9.9)], { norm: "mean_std" }),
    [0, 0],
  );
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

Deno.test("success step rewards put 10 on the last step; the penalty is kept apart, per step", () => {
  const won = trajectory(true, [true, false, true]);
  assertClose(stepRewards(won, { rewardSource: "success" }), [0, 0, 10]);
  assertClose(stepPenalties(won, { invalidPenalty: 0.1 }), [0, 0.1, 0]);
  const s = stepRewards(trajectory(false, [true, true], [-0.1, 1]), { rewardSource: "score" });
  assertClose(s, [-0.1, 1]);
  assert.throws(() => stepPenalties(won, { invalidPenalty: -1 }), SeedOptionError);
});

Deno.test("the invalid-action penalty comes off the step's discounted return after discounting, on that step only", () => {
  // Won in 3 turns, turn 1 invalid, γ = 0.5, p = 1: R_t = [2.5, 5, 10] before the penalty, so
  // [2.5, 5 − 1, 10]. Subtracting p from r_1 before discounting would give [2, 4, 10]: turn 0
  // would carry γ·p (reference: ray_trainer.py `apply_invalid_action_penalty` on `step_rewards`,
  // after `compute_step_discounted_returns`).
  const samples = [0, 1, 2].map((t) =>
    sample(0, "w", t, 0, { stepReward: t === 2 ? 10 : 0, stepPenalty: t === 1 ? 1 : 0 })
  );
  assertClose(penalizedStepReturns(samples, 0.5), [2.5, 4, 10]);
  assertClose(discountedReturns(samples, 0.5), [2.5, 5, 10]);
});

Deno.test("discounted returns follow turn order, not array order", () => {
  const samples = [
    sample(0, "t1", 1, 0, { stepReward: 10 }),
    sample(0, "t1", 0, 0, { stepReward: 0 }),
    sample(0, "t2", 0, 0, { stepReward: 1 }),
  ];
  assertClose(discountedReturns(samples, 0.5), [10, 5, 1]);
});

Deno.test("anchor groups join identical observations of the same rollout group only", () => {
  const samples = [
    sample(0, "t1", 0, 0, { observation: "s0" }),
    sample(0, "t2", 0, 0, { observation: "s0" }),
    sample(1, "t3", 0, 0, { observation: "s0" }),
    sample(0, "t2", 1, 0, { observation: "s1" }),
  ];
  assert.deepEqual(anchorStateGroups(samples), [[0, 1], [2], [3]]);
});

Deno.test("gigpo adds the weighted step advantage of anchor-state groups", () => {
  // Trajectory t1 (won): s0 → s1 (reward 10 at the end). t2 (lost): s0 → s2 → s1.
  const samples = [
    sample(0, "t1", 0, 10, { observation: "s0", stepReward: 0 }),
    sample(0, "t1", 1, 10, { observation: "s1", stepReward: 10 }),
    sample(0, "t2", 0, 0, { observation: "s0", stepReward: 0 }),
    sample(0, "t2", 1, 0, { observation: "s2", stepReward: 0 }),
    sample(0, "t2", 2, 0, { observation: "s1", stepReward: 0 }),
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
    sample(0, "t1", 0, 10, { observation: "x", stepReward: 10 }),
    sample(0, "t2", 0, 0, { observation: "y", stepReward: 0 }),
  ];
  assertClose(
    advantageEstimators.gigpo(samples, { norm: "mean_std" }),
    [...advantageEstimators.grpo(samples, { norm: "mean_std" })],
  );
});

Deno.test("a discount outside [0, 1] is rejected", () => {
  assert.throws(() => gigpoAdvantages([], { norm: "mean", gamma: 1.5 }), SeedOptionError);
});

/** The reference batch of tests: one task ("a") drawn twice (rollout groups 0 and 1). */
function drawnTwice(): RolloutTrajectory[] {
  const t = (
    taskIndex: number,
    copyIndex: number,
    won: boolean,
    steps: [string, boolean][],
  ): RolloutTrajectory => ({
    id: `b${taskIndex}g${copyIndex}`,
    taskIndex,
    copyIndex,
    task, // the same task, drawn twice
    won,
    score: won ? 10 : 0,
    truncated: false,
    steps: steps.map(([observation, valid]) => ({
      prompt: observation,
      observation,
      response: "",
      action: valid ? "go" : "",
      valid,
      reward: 0,
    })),
  });
  return [
    t(0, 0, true, [["s0", true], ["s1", false], ["s2", true]]),
    t(0, 1, false, [["s0", true], ["s3", true]]),
    t(1, 0, true, [["s0", true], ["s1", true]]),
    t(1, 1, false, [["s0", false], ["s1", true], ["s4", false]]),
  ];
}

Deno.test("a batch that draws one task twice has two groups, and GiGPO matches the reference code on it", () => {
  // Reference: the authors' gigpo/core_gigpo.py `compute_gigpo_outcome_advantage` at 2cf2fad in
  // PyTorch 1.13 (float32), uid per rollout group, p = 0.1 subtracted from the episode score and
  // from the discounted step return (ray_trainer.py `apply_invalid_action_penalty`), γ = 0.95.
  const reference = {
    mean_std: {
      grpo: [
        0.7363821864128113,
        0.7180641293525696,
        0.7363821864128113,
        -1.0954142808914185,
        -1.0954142808914185,
        1.0954148769378662,
        1.0954148769378662,
        -0.7363219261169434,
        -0.7181858420372009,
        -0.7363219261169434,
      ],
      gigpo: [
        1.4434888362884521,
        0.7180641293525696,
        0.7363821864128113,
        -1.802520990371704,
        -1.0954142808914185,
        1.8025215864181519,
        1.8025215864181519,
        -1.4434285163879395,
        -1.4252924919128418,
        -0.7363219261169434,
      ],
    },
    mean: {
      grpo: [
        4.019999980926514,
        3.919999599456787,
        4.019999980926514,
        -5.980000019073486,
        -5.980000019073486,
        6.039999961853027,
        6.039999961853027,
        -4.059999942779541,
        -3.9599997997283936,
        -4.059999942779541,
      ],
      gigpo: [
        8.532499313354492,
        3.919999599456787,
        4.019999980926514,
        -10.492500305175781,
        -5.980000019073486,
        10.84000015258789,
        11.039999961853027,
        -8.859999656677246,
        -8.960000038146973,
        -4.059999942779541,
      ],
    },
  };
  for (const norm of ["mean_std", "mean"] as const) {
    for (const estimator of ["grpo", "gigpo"] as const) {
      const samples = buildSamples(drawnTwice(), {
        rewardSource: "success",
        invalidPenalty: 0.1,
        estimator,
        norm,
        gamma: 0.95,
      });
      assert.deepEqual(samples.map((s) => s.taskIndex), [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
      assert.ok(samples.every((s) => s.taskId === task.id), "one task id for both groups");
      assertClose(samples.map((s) => s.advantage), reference[norm][estimator], 1e-5);
    }
  }
  // Merged into one group by task id, group 0's won turns would score against group 1's too.
  const merged = grpoAdvantages(
    buildSamples(drawnTwice(), {
      rewardSource: "success",
      invalidPenalty: 0.1,
      estimator: "grpo",
      norm: "mean",
    }).map((s) => ({ ...s, taskIndex: 0 })),
    { norm: "mean" },
  );
  assert.ok(Math.abs(merged[0] - reference.mean.grpo[0]) > 0.05);
});

import assert from "node:assert/strict";
import type { Task, Trajectory } from "../../../workers/envs/types.ts";
import {
  estimateEtaSeconds,
  metricSeries,
  PhaseTimer,
  rescoreMetrics,
  stepMetrics,
  teacherGaps,
  tokenGapsOf,
  zeroPhases,
} from "../../../workers/seed/metrics.ts";
import { SeedOptionError } from "../../../workers/seed/errors.ts";

const task: Task = {
  envId: "toy",
  id: "toy/train/1",
  split: "train",
  seed: 1,
  family: "toy",
  instruction: "win",
  options: {},
};

function trajectory(won: boolean, score: number, valid: boolean[]): Trajectory {
  return {
    task,
    won,
    score,
    steps: valid.map((v) => ({ observation: "", response: "", action: "", valid: v, reward: 0 })),
  };
}

/** A fake clock in milliseconds that tests move by hand. */
function fakeClock() {
  let ms = 0;
  return { now: () => ms, advance: (by: number) => ms += by };
}

Deno.test("the phase timer adds up repeated runs of a phase", async () => {
  const clock = fakeClock();
  const timer = new PhaseTimer(clock.now);
  timer.start("rollout");
  clock.advance(1500);
  assert.equal(timer.stop("rollout"), 1.5);
  const result = await timer.time("rollout", () => {
    clock.advance(500);
    return 42;
  });
  assert.equal(result, 42);
  await assert.rejects(
    timer.time("update", () => {
      clock.advance(250);
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.deepEqual(timer.seconds(), { ...zeroPhases(), rollout: 2, update: 0.25 });
  assert.equal(timer.total(), 2.25);
});

Deno.test("the phase timer refuses to start a running phase or stop a stopped one", () => {
  const timer = new PhaseTimer(fakeClock().now);
  timer.start("analyze");
  assert.throws(() => timer.start("analyze"), SeedOptionError);
  timer.stop("analyze");
  assert.throws(() => timer.stop("analyze"), SeedOptionError);
});

Deno.test("step metrics aggregate success, reward, turns, parse rate and throughput", () => {
  const seconds = { ...zeroPhases(), rollout: 3, analyze: 1, update: 4 };
  const m = stepMetrics({
    trajectories: [
      trajectory(true, 9.5, [true, true]),
      trajectory(false, -0.3, [true, false, false]),
      trajectory(false, 0, [true]),
      trajectory(true, 10, [true, true]),
    ],
    rewardSource: "success",
    analyzed: 4,
    parsed: 3,
    skillsAdded: 2,
    tokensGenerated: 600,
    tokensTrained: 200,
    seconds,
  });
  assert.equal(m.success_rate, 0.5);
  assert.equal(m.mean_reward, 5);
  assert.equal(m.mean_score, (9.5 - 0.3 + 0 + 10) / 4);
  assert.equal(m.mean_turns, 2);
  assert.equal(m.invalid_action_rate, 2 / 8);
  assert.equal(m.analyzer_parse_rate, 0.75);
  assert.equal(m.skills_added, 2);
  assert.equal(m.step_seconds, 8);
  assert.equal(m.tokens_per_second, 100);
  const series = metricSeries(m);
  assert.equal(series.seconds_update, 4);
  assert.equal(series.analyzer_parse_rate, 0.75);
  assert.equal(series.success_rate, 0.5);
});

Deno.test("the parse rate is null when nothing was analysed and is left out of the series", () => {
  const m = stepMetrics({
    trajectories: [],
    rewardSource: "score",
    analyzed: 0,
    parsed: 0,
    skillsAdded: 0,
    tokensGenerated: 0,
    tokensTrained: 0,
    seconds: zeroPhases(),
  });
  assert.equal(m.analyzer_parse_rate, null);
  assert.equal(m.success_rate, 0);
  assert.equal(m.tokens_per_second, 0);
  assert.ok(!("analyzer_parse_rate" in metricSeries(m)));
});

Deno.test("more parsed than analysed analyses are rejected", () => {
  assert.throws(
    () =>
      stepMetrics({
        trajectories: [],
        rewardSource: "success",
        analyzed: 1,
        parsed: 2,
        skillsAdded: 0,
        tokensGenerated: 0,
        tokensTrained: 0,
        seconds: zeroPhases(),
      }),
    SeedOptionError,
  );
});

Deno.test("the ETA multiplies the recent mean step time by the remaining steps", () => {
  assert.equal(
    estimateEtaSeconds({
      completedSteps: 4,
      totalSteps: 10,
      stepSeconds: [100, 10, 20, 30],
      window: 3,
    }),
    20 * 6,
  );
  assert.equal(estimateEtaSeconds({ completedSteps: 0, totalSteps: 10, stepSeconds: [] }), null);
  assert.equal(estimateEtaSeconds({ completedSteps: 10, totalSteps: 10, stepSeconds: [] }), 0);
  assert.throws(
    () => estimateEtaSeconds({ completedSteps: 11, totalSteps: 10, stepSeconds: [] }),
    SeedOptionError,
  );
});

Deno.test("teacher gaps are ℓ_T − ℓ_old per token, in float32, and null where no teacher pass ran", () => {
  const old = [
    new Float32Array([-1, -0.5]),
    new Float32Array([-2]),
    new Float32Array([-0.1, -0.2]),
  ];
  const teacher = [new Float32Array([-0.25, -0.5]), null, new Float32Array([-0.3, 0])];
  const gaps = teacherGaps(teacher, old);
  assert.deepEqual(gaps[0], new Float32Array([0.75, 0]));
  assert.equal(gaps[1], null);
  // −0.3 − (−0.1) rounded to float32 (the score graph's dtype), not the float64 −0.2
  assert.deepEqual(
    gaps[2],
    new Float32Array([Math.fround(Math.fround(-0.3) - Math.fround(-0.1)), Math.fround(0.2)]),
  );
  assert.throws(() => teacherGaps([null], []), RangeError);
  assert.throws(() => teacherGaps([new Float32Array(2)], [new Float32Array(3)]), /same tokens/);
});

Deno.test("re-score metrics count teacher turns and average Δ over teacher tokens and |A| over turns", () => {
  const samples = [{ advantage: 1.5 }, { advantage: -0.5 }, { advantage: 0 }];
  const gaps = [new Float32Array([0.5, -0.25]), null, new Float32Array([1])];
  assert.deepEqual(rescoreMetrics({ samples, gaps, teacherSeconds: 0.4 }), {
    samples: 3,
    teacher_samples: 2,
    teacher_gap_mean: (0.5 - 0.25 + 1) / 3,
    teacher_pass_seconds: 0.4,
    advantage_abs_mean: 2 / 3,
  });
  // GRPO: no teacher pass, so no teacher_gap_mean at all (not a 0 that would read as "no gap")
  const grpo = rescoreMetrics({ samples: [], gaps: [], teacherSeconds: 0 });
  assert.deepEqual(grpo, {
    samples: 0,
    teacher_samples: 0,
    teacher_pass_seconds: 0,
    advantage_abs_mean: 0,
  });
});

Deno.test("token gaps of the dump keep each teacher turn's ids and gaps and skip the others", () => {
  const samples = [
    { trajectoryId: "step-1/a", turn: 0 },
    { trajectoryId: "step-1/a", turn: 1 },
    { trajectoryId: "step-1/b", turn: 0 },
  ];
  const g0 = new Float32Array([0.5]);
  const g2 = new Float32Array([-1, 2]);
  assert.deepEqual(tokenGapsOf(samples, [g0, null, g2], [[7], [8], [9, 10]]), [
    { trajectoryId: "step-1/a", turn: 0, responseIds: [7], gaps: g0 },
    { trajectoryId: "step-1/b", turn: 0, responseIds: [9, 10], gaps: g2 },
  ]);
});

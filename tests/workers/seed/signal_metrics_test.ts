import assert from "node:assert/strict";
import {
  getEnvironment,
  type SkillAnalysis,
  toAsyncEnvironment,
  type Trajectory,
} from "../../../workers/envs/mod.ts";
import { HouseholdEpisode, householdScenario } from "../../../workers/envs/household/mod.ts";
import { analyzeHousehold } from "../../../workers/envs/household/analyzer.ts";
import {
  allFailGroupShare,
  pearson,
  signalMetrics,
  skillQualityMetrics,
  stepSkillMetrics,
  teacherGapMetrics,
  zeroAdvantageGroupShare,
} from "../../../workers/seed/signal_metrics.ts";

const close = (a: number | undefined, b: number) =>
  assert.ok(a !== undefined && Math.abs(a - b) < 1e-9, `${a} ≠ ${b}`);

/** Two rollout groups: 0 (one won, one lost sample), 1 (all advantages 0). */
const SAMPLES = [
  { taskIndex: 0, won: true, advantage: 1 },
  { taskIndex: 0, won: false, advantage: -1 },
  { taskIndex: 1, won: false, advantage: 0 },
  { taskIndex: 1, won: true, advantage: 0 },
];
const GAPS = [[0.2, 0.4], [-0.1], null, [0.5, 0.5, 0.5, 0.5]];

Deno.test("Δ of won and lost trajectories is a mean over their tokens, not over samples", () => {
  const m = teacherGapMetrics(SAMPLES, GAPS);
  close(m.teacher_gap_won_mean, (0.2 + 0.4 + 4 * 0.5) / 6); // 0.4333…; per sample it would be 0.4
  close(m.teacher_gap_lost_mean, -0.1); // the sample without a teacher signal is not a 0
});

Deno.test("ℓ_old over won teacher tokens bounds Δ on them from above", () => {
  const old = [[-0.3, -0.5], [-2], [-9, -9], [-0.6, -0.6, -0.6, -0.6]]; // consistent: Δ ≤ −ℓ_old
  const m = teacherGapMetrics(SAMPLES, GAPS, old);
  // Won samples with a teacher: 0 and 3 (sample 2 has none, sample 1 was lost).
  close(m.old_logprob_won_mean, (-0.3 - 0.5 - 2.4) / 6);
  assert.ok(m.teacher_gap_won_mean <= -m.old_logprob_won_mean); // Δ ≤ −ℓ_old as ℓ_T ≤ 0
  assert.equal("old_logprob_won_mean" in teacherGapMetrics(SAMPLES, GAPS), false);
  assert.throws(() => teacherGapMetrics(SAMPLES, GAPS, old.slice(1)), /oldLogProbs must have/);
});

Deno.test("corr(Δ, A) pairs each teacher sample's mean Δ with its advantage", () => {
  // Pairs (0.3, 1), (−0.1, −1), (0.5, 0): r = 0.4 / √(0.18667 · 2), computed by hand.
  close(teacherGapMetrics(SAMPLES, GAPS).teacher_gap_advantage_corr, 0.6546536707079771);
  close(pearson([1, 2, 3], [6, 4, 2]), -1);
});

Deno.test("undefined signal metrics are left out, never NaN or a made-up 0", () => {
  const constantA = teacherGapMetrics(SAMPLES.slice(2), GAPS.slice(2));
  assert.equal("teacher_gap_advantage_corr" in constantA, false); // one teacher sample
  assert.equal("teacher_gap_lost_mean" in constantA, false); // the lost one has no teacher
  close(constantA.teacher_gap_won_mean, 0.5);
  const noTeacher = teacherGapMetrics(SAMPLES, [null, null, null, null]);
  assert.deepEqual(noTeacher, { zero_advantage_group_share: 0.5, all_fail_group_share: 0 });
  assert.deepEqual(teacherGapMetrics([], []), {});
  assert.equal(pearson([1, 1, 1], [1, 2, 3]), undefined);
  assert.throws(() => teacherGapMetrics(SAMPLES, GAPS.slice(1)), /one entry per sample/);
});

Deno.test("the all-zero-advantage share counts rollout groups, not samples", () => {
  close(zeroAdvantageGroupShare(SAMPLES), 0.5);
  const three = [...SAMPLES, { taskIndex: 2, won: false, advantage: 0 }];
  close(zeroAdvantageGroupShare(three), 2 / 3);
  close(zeroAdvantageGroupShare([{ taskIndex: 0, won: true, advantage: 1e-9 }]), 1);
  assert.equal(zeroAdvantageGroupShare([]), undefined);
});

/** A sokoban trajectory of the first train task: `actions` played for real. */
function played(id: string, actions: string[]): Trajectory & { id: string } {
  const env = getEnvironment("sokoban");
  const task = env.sampleTasks("train", 1, 3)[0];
  const episode = env.createEpisode(task);
  episode.reset();
  const steps = actions.map((action) => {
    const r = episode.step(action);
    return { observation: "", response: action, action, valid: r.valid, reward: r.reward };
  });
  return { id, task, steps, won: false, score: 0 };
}

Deno.test("skill quality: shares of well-formed and truthful parsed skills, judged per trajectory", async () => {
  const sokoban = getEnvironment("sokoban");
  const trajectories = [
    played("t0", ["left", "left"]),
    played("t1", ["up", "down", "up", "down", "up", "down"]),
    played("t2", ["right"]),
    played("t3", ["down"]),
  ];
  const truth = sokoban.referenceAnalysis(trajectories[0]).episode_skill;
  const other = "Answer with exactly one of up, down, left or right inside the action tags.";
  assert.notEqual(truth, other);
  const analyses = new Map<string, SkillAnalysis | null>([
    ["t0", { episode_summary: "", episode_skill: truth }],
    ["t1", { episode_summary: "", episode_skill: other }],
    ["t2", {
      episode_summary: "",
      episode_skill: "Never push a push a: a or or wall a a no target",
    }],
    ["t3", null], // did not parse: not judged
  ]);
  const env = toAsyncEnvironment(sokoban);
  const m = await skillQualityMetrics(env, trajectories, analyses);
  assert.equal(m.skills_judged, 3);
  close(m.skill_well_formed_rate, 2 / 3);
  close(m.skill_truthful_rate, 1 / 3);
  // Sokoban's truthful skills are the reference's: the two shares agree.
  close(m.skill_reference_match_rate, 1 / 3);
  // None of the four is won: the truthful share of lost skills is the overall one, no won share.
  close(m.skill_truthful_lost_rate, 1 / 3);
  assert.equal("skill_truthful_won_rate" in m, false);
  assert.deepEqual(await skillQualityMetrics({}, trajectories, analyses), {});
  assert.deepEqual(await skillQualityMetrics(env, trajectories, new Map()), {});
  const all = await signalMetrics({ env, samples: SAMPLES, gaps: GAPS, trajectories, analyses });
  // No sample was scored under a step skill: a real 0, no step mean.
  assert.deepEqual(all, { ...teacherGapMetrics(SAMPLES, GAPS), step_skill_samples: 0, ...m });
});

Deno.test("skill quality: a household skill true of its loss but not the reference's counts as truthful, not as a match", async () => {
  const household = getEnvironment("household");
  // Two cloths in two receptacles (task 2), never found in 30 looks.
  const task = household.sampleTasks("train", 1, 2, { families: ["pick_and_place"] })[0];
  const steps = Array.from({ length: household.defaultMaxTurns }, () => ({
    observation: "",
    response: "look",
    action: "look",
    valid: true,
    reward: 0,
  }));
  const lost = { id: "h0", task, steps, won: false, score: 0 };
  // The replay analysis' skill names the mistake; the reference's is the usual places.
  const episode = new HouseholdEpisode(task, householdScenario(task), household.defaultMaxTurns);
  const mistake = analyzeHousehold(lost, episode).analysis.episode_skill;
  const reference = household.referenceAnalysis(lost).episode_skill;
  const swapped = mistake.replace(
    /which was in (\S+ \d+ in \S+ \d+) and (\S+ \d+ in \S+ \d+):/,
    "which was in $2 and $1:",
  );
  assert.notEqual(swapped, mistake);
  const m = await skillQualityMetrics(
    toAsyncEnvironment(household),
    [lost, { ...lost, id: "h1" }, { ...lost, id: "h2" }],
    new Map([
      ["h0", { episode_summary: "", episode_skill: reference }],
      ["h1", { episode_summary: "", episode_skill: swapped }],
      ["h2", { episode_summary: "", episode_skill: mistake }],
    ]),
  );
  close(m.skill_truthful_rate, 1);
  close(m.skill_reference_match_rate, 1 / 3);
});

Deno.test("all-fail groups are counted by outcome, also where a penalty spreads their advantages", () => {
  const samples = [
    // Group 0: both lost, advantages spread by an invalid-action penalty (not all zero).
    { taskIndex: 0, won: false, advantage: 0.7 },
    { taskIndex: 0, won: false, advantage: -0.7 },
    // Group 1: one of three won.
    { taskIndex: 1, won: false, advantage: -0.5 },
    { taskIndex: 1, won: true, advantage: 1 },
    { taskIndex: 1, won: false, advantage: -0.5 },
    // Group 2: all lost with equal scores (advantages 0).
    { taskIndex: 2, won: false, advantage: 0 },
    { taskIndex: 2, won: false, advantage: 0 },
  ];
  close(allFailGroupShare(samples), 2 / 3);
  close(zeroAdvantageGroupShare(samples), 1 / 3); // group 0 is all-fail yet has a signal
  close(teacherGapMetrics(samples, samples.map(() => null)).all_fail_group_share, 2 / 3);
  assert.equal(allFailGroupShare([]), undefined);
});

Deno.test("step-skill metrics count the samples scored under a step skill and average Δ over their tokens", () => {
  const gaps = [Float32Array.of(-1, -3), Float32Array.of(0.5), null, Float32Array.of(2)];
  assert.deepEqual(stepSkillMetrics(gaps, [true, false, false, true]), {
    step_skill_samples: 2,
    teacher_gap_step_mean: (-1 - 3 + 2) / 3,
  });
  // A teacher pass without step skills: a real 0 and no mean; no teacher pass at all: nothing.
  assert.deepEqual(stepSkillMetrics(gaps, [false, false, false, false]), { step_skill_samples: 0 });
  assert.deepEqual(stepSkillMetrics([null, null], [true, true]), {});
  assert.throws(() => stepSkillMetrics(gaps, [true]), RangeError);
});

Deno.test("advantages that are all float noise around 0 give no correlation", () => {
  // Equal scores in every group: (s − mean)/(0 + 1e-6) leaves rounding noise, not a signal.
  const samples = [1e-11, -2e-11, 3e-12].map((advantage) => ({
    taskIndex: 0,
    won: false,
    advantage,
  }));
  const gaps = [Float32Array.of(-1), Float32Array.of(0.5), Float32Array.of(2)];
  assert.equal("teacher_gap_advantage_corr" in teacherGapMetrics(samples, gaps), false);
  const real = samples.map((s, i) => ({ ...s, advantage: [1, -1, 0.5][i] }));
  assert.ok("teacher_gap_advantage_corr" in teacherGapMetrics(real, gaps));
});

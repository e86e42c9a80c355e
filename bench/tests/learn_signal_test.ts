/**
 * bench/_learn_signal.ts on hand-made step metrics: which metrics become rows, the CSV columns,
 * and the target lines (share of steps meeting each per-step target, last-step skill quality).
 */
import assert from "node:assert/strict";
import { signalCsv, signalRows, signalSummary } from "../_learn_signal.ts";

/** Step metrics of one SEED run: Δ won / corr / parse per step 1…3 (step 0 = eval only). */
function run(seed: number, won: number[], corr: number[]) {
  const metrics = new Map<number, Record<string, number>>([[0, {
    "eval/test_seen/success_rate": 0.5,
  }]]);
  won.forEach((w, i) =>
    metrics.set(i + 1, {
      teacher_gap_won_mean: w,
      teacher_gap_advantage_corr: corr[i],
      analyzer_parse_rate: 1,
      skill_well_formed_rate: 1,
      skill_truthful_rate: 0.5 + 0.1 * seed,
      skill_truthful_won_rate: 0.9,
      skill_reference_match_rate: 0.25,
      loss: 3,
    })
  );
  return signalRows({ env: "sokoban", arm: "seed", method: "seed", seed }, metrics);
}

Deno.test("signal rows skip step 0 and keep only the signal metrics", () => {
  const rows = run(1, [0.2, 0.05], [0.3, -0.1]);
  assert.deepEqual(rows.map((r) => r.step), [1, 2]);
  assert.equal(rows[0].values.teacher_gap_won_mean, 0.2);
  assert.equal((rows[0].values as Record<string, number>).loss, undefined);
  const csv = signalCsv(rows).trim().split("\n");
  assert.equal(
    csv[0],
    "env,arm,method,seed,step,teacher_gap_won_mean,teacher_gap_lost_mean,old_logprob_won_mean," +
      "teacher_gap_advantage_corr," +
      "zero_advantage_group_share,analyzer_parse_rate,skill_well_formed_rate,skill_truthful_rate," +
      "skill_truthful_won_rate,skill_truthful_lost_rate,all_fail_group_share," +
      "step_skill_samples,teacher_gap_step_mean,skill_reference_match_rate",
  );
  assert.equal(
    csv[2],
    "sokoban,seed,seed,1,2,0.0500,,,-0.1000,,1.0000,1.0000,0.6000,0.9000,,,,,0.2500",
  );
});

Deno.test("the signal summary counts the steps that meet each target and averages the last step", () => {
  const rows = [...run(1, [0.2, 0.05], [0.3, -0.1]), ...run(2, [0.1, 0.3], [0.2, 0.4])];
  const lines = signalSummary(rows);
  assert.equal(lines.length, 2);
  // Seed means of Δ won: 0.125 and 0.2 → 0.1625 over seeds.
  assert.match(lines[0], /teacher_gap_won_mean 0\.163 ±/);
  assert.match(lines[1], /Δ won ≥ 0\.1 at 3\/4 steps; corr\(Δ, A\) > 0 at 3\/4 steps/);
  assert.match(lines[1], /parse ≥ 0\.99 at 4\/4 steps/);
  // Last step: truthful 0.6 (seed 1) and 0.7 (seed 2).
  assert.match(
    lines[1],
    /step 2 \(mean over 2 seed\(s\)\): well-formed 1\.00, truthful 0\.65 \(won 0\.90, lost —\), reference match 0\.25/,
  );
});

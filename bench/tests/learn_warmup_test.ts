/**
 * bench/_learn_warmup.ts, bench/_learn_report.ts `runReport` and bench/_learn_plot.ts
 * `learnMermaid` on hand-made metrics: what bench:learn reports about the warm-ups, rebuilds from
 * `metrics.jsonl` (`--report`) and draws for a README.
 */
import assert from "node:assert/strict";
import { warmupCsv, warmupRow, warmupTable } from "../_learn_warmup.ts";
import { runReport, summarize } from "../_learn_report.ts";
import { learnMermaid } from "../_learn_plot.ts";

Deno.test("a warm-up row keeps the reported step-0 metrics and drops others and non-finite ones", () => {
  const row = warmupRow("sokoban-demo", 21, {
    warmup_policy_optimizer_steps: 336,
    warmup_policy_check_success: 0.5,
    warmup_skill_check_delta_lost: NaN,
    "eval/test_seen/success_rate": 0.4,
  });
  assert.deepEqual(row, {
    env: "sokoban-demo",
    seed: 21,
    values: { warmup_policy_optimizer_steps: 336, warmup_policy_check_success: 0.5 },
  });
  const csv = warmupCsv([row]).split("\n");
  assert.equal(csv[1].split(",").slice(0, 4).join(","), "sokoban-demo,21,336.0000,0.5000");
});

Deno.test("the warm-up table counts a seed as reading skills only with Δ below −0.05 and no loss of success", () => {
  const check = (delta: number, without: number, withSkill: number, check: number) => ({
    warmup_policy_check_success: check,
    warmup_skill_check_success: without,
    warmup_skill_check_success_with_skill: withSkill,
    warmup_skill_check_delta_lost: delta,
  });
  const lines = warmupTable([
    warmupRow("sokoban-demo", 1, check(-0.3, 0.4, 0.5, 0.5)), // reads
    warmupRow("sokoban-demo", 2, check(-0.01, 0.4, 0.5, 0.625)), // Δ too small
    warmupRow("sokoban-demo", 3, check(-0.3, 0.5, 0.4, 0.5625)), // the skill costs success
  ]);
  assert.match(lines.find((l) => l.includes("| 1 |"))!, /\| yes \|$/);
  assert.match(lines.find((l) => l.includes("| 2 |"))!, /\| no \|$/);
  assert.match(lines.find((l) => l.includes("| 3 |"))!, /\| no \|$/);
  assert.equal(
    lines.at(-1),
    "sokoban-demo warm-ups: last held-out check 50%–63% over 3 seed(s); reads skills on 1 of 3",
  );
});

Deno.test("runReport makes one row per step and split and averages the updates' seconds", () => {
  const metrics = new Map<number, Record<string, number>>([
    [0, { "eval/test_seen/success_rate": 0.25, "eval/test_seen/score": 1 }],
    [1, { step_seconds: 10, seconds_rollout: 6, seconds_update: 4, analyzer_parse_rate: 1 }],
    [2, {
      step_seconds: 14,
      seconds_rollout: 8,
      seconds_update: 6,
      seconds_eval: 30,
      teacher_pass_seconds: 2,
      analyzer_parse_rate: 0.5,
      "eval/test_seen/success_rate": 0.5,
      "eval/test_seen/score": 2,
      "eval/test_unseen/success_rate": 0.375,
      "eval/test_unseen/score": 1.5,
    }],
  ]);
  const { rows, timing } = runReport(
    { env: "e", arm: "seed", method: "seed", seed: 3, samplesPerStep: 64, episodes: 200 },
    metrics,
  );
  assert.deepEqual(rows.map((r) => [r.step, r.samples, r.split, r.success_rate, r.episodes]), [
    [0, 0, "test_seen", 0.25, 200],
    [2, 128, "test_seen", 0.5, 200],
    [2, 128, "test_unseen", 0.375, 200],
  ]);
  assert.equal(timing.secondsPerUpdate, 12);
  // Two updates: rollout (6 + 8) / 2, update (4 + 6) / 2, the teacher pass 2 / 2; eval left out.
  assert.deepEqual(timing.phaseSeconds, { rollout: 7, update: 5, teacher_pass: 1 });
  assert.equal(timing.parseRate, 0.75);
});

Deno.test("learnMermaid draws one xychart per split with one line per arm in percent", () => {
  const row = (arm: string, seed: number, step: number, v: number) => ({
    env: "sokoban-demo",
    arm,
    method: arm,
    seed,
    step,
    samples: 64 * step,
    split: "test_seen",
    success_rate: v,
    score: v,
    episodes: 200,
  });
  const s = summarize(
    [
      row("grpo", 1, 0, 0.5),
      row("grpo", 1, 8, 0.5),
      row("grpo", 2, 0, 0.5),
      row("grpo", 2, 8, 0.6),
      row("seed", 1, 0, 0.5),
      row("seed", 1, 8, 0.6),
      row("seed", 2, 0, 0.5),
      row("seed", 2, 8, 0.7),
    ],
    [],
    "grpo",
  );
  const lines = learnMermaid(s.means, 2);
  assert.equal(lines[0], "```mermaid");
  assert.ok(lines.includes("xychart-beta"));
  assert.ok(lines.includes('  x-axis "training samples" [0, 512]'));
  assert.ok(lines.includes("  line [50.0, 55.0]"), "grpo: mean of 0.5 and 0.6 at step 8");
  assert.ok(lines.includes("  line [50.0, 65.0]"), "seed: mean of 0.6 and 0.7 at step 8");
  // grpo at step 8, two seeds: t(0.975, 1) · sd / √2 = 12.706 · 0.0707 / 1.414 = 63.5 points.
  assert.match(
    lines.find((l) => l.startsWith("sokoban-demo · test_seen, ±"))!,
    /grpo ±0\.0 \/ ±63\.5/,
  );
});

/**
 * bench/_learn_report.ts on hand-made per-seed rows: means over seeds, the paired difference,
 * samples-to-reach on the mean curve, timing, and the CSV rows written from them.
 */
import assert from "node:assert/strict";
import {
  diffCsv,
  phaseTable,
  seedCsv,
  type SeedRow,
  summarize,
  summaryTable,
} from "../_learn_report.ts";

/** Rows of one env and split: success by arm → seed → [step 0, step 2] (B × G = 16). */
function rows(success: Record<string, Record<number, [number, number]>>): SeedRow[] {
  const out: SeedRow[] = [];
  for (const [arm, bySeed] of Object.entries(success)) {
    for (const [seed, values] of Object.entries(bySeed)) {
      values.forEach((v, i) =>
        out.push({
          env: "sokoban",
          arm,
          method: arm.startsWith("seed") ? "seed" : arm,
          seed: Number(seed),
          step: 2 * i,
          samples: 32 * i,
          split: "test_seen",
          success_rate: v,
          score: v * 10,
          episodes: 8,
        })
      );
    }
  }
  return out;
}

const data = rows({
  grpo: { 1: [0.25, 0.5], 2: [0.25, 0.25], 3: [0, 0.375] },
  seed: { 1: [0.25, 0.75], 2: [0.25, 0.5], 3: [0, 0.625] },
});

Deno.test("summarize gives the mean over seeds per arm, step and split", () => {
  const s = summarize(data, []);
  const at = (method: string, step: number) =>
    s.means.find((m) => m.arm === method && m.step === step)!;
  assert.equal(s.means.length, 4);
  assert.ok(Math.abs(at("grpo", 2).success.mean - 0.375) < 1e-12); // (0.5 + 0.25 + 0.375) / 3
  assert.ok(Math.abs(at("seed", 2).success.mean - 0.625) < 1e-12); // (0.75 + 0.5 + 0.625) / 3
  assert.equal(at("seed", 2).success.n, 3);
  assert.equal(at("seed", 2).samples, 32);
  assert.ok(Math.abs(at("seed", 2).score - 6.25) < 1e-12);
});

Deno.test("summarize pairs SEED − GRPO by seed", () => {
  const s = summarize(data, []);
  const last = s.diffs.find((d) => d.step === 2)!;
  // Every seed gains exactly 0.25: mean 0.25, no spread, so the interval is [0.25, 0.25].
  assert.equal(last.diff.n, 3);
  assert.ok(Math.abs(last.diff.mean - 0.25) < 1e-12);
  assert.ok(Math.abs(last.diff.low - 0.25) < 1e-12 && Math.abs(last.diff.high - 0.25) < 1e-12);
  // Unpaired, the spread between seeds (0.25 to 0.5 for GRPO alone) would not cancel.
  assert.ok(s.means.find((m) => m.arm === "grpo" && m.step === 2)!.success.half > 0.2);
});

Deno.test("summarize interpolates the samples SEED needs to reach GRPO's final success", () => {
  const s = summarize(data, []);
  // GRPO final mean 0.375 at 32 samples; SEED's mean curve (0, 1/6) → (32, 0.625):
  // 32 · (0.375 − 1/6) / (0.625 − 1/6) = 32 · (5/24) / (11/24) = 160/11 = 14.545…
  assert.equal(s.reach.length, 1);
  assert.equal(s.reach[0].baselineSamples, 32);
  assert.ok(Math.abs(s.reach[0].armSamples! - 160 / 11) < 1e-9);
  // Swapped roles, GRPO's best is below SEED's final: "not reached" (null).
  const swapped = data.map((r) => ({ ...r, arm: r.arm === "seed" ? "grpo" : "seed" }));
  assert.equal(summarize(swapped, []).reach[0].armSamples, null);
  const line = summaryTable(summarize(swapped, [])).find((l) => l.includes("final"));
  assert.equal(
    line,
    "sokoban test_seen: seed does not reach grpo's final 62.5% (mean curve, interpolated) within 32 samples",
  );
});

Deno.test("summarize averages seconds per update and parse rates over seeds", () => {
  const s = summarize([], [
    { env: "sokoban", arm: "grpo", seed: 1, secondsPerUpdate: 10, parseRate: null },
    { env: "sokoban", arm: "grpo", seed: 2, secondsPerUpdate: 12, parseRate: null },
    { env: "sokoban", arm: "seed", seed: 1, secondsPerUpdate: 13, parseRate: 0.5 },
    { env: "sokoban", arm: "seed", seed: 2, secondsPerUpdate: 15, parseRate: 1 },
  ]);
  const grpo = s.timing.find((t) => t.arm === "grpo")!;
  const seed = s.timing.find((t) => t.arm === "seed")!;
  assert.equal(grpo.secondsPerUpdate.mean, 11);
  assert.equal(grpo.parseRate, null);
  assert.equal(seed.secondsPerUpdate.mean, 14);
  assert.equal(seed.parseRate, 0.75);
});

Deno.test("summarize averages each phase's seconds over seeds", () => {
  const s = summarize(
    [],
    [
      { env: "e", arm: "seed", seed: 1, secondsPerUpdate: 9, phaseSeconds: { a: 4, b: 5 } },
      { env: "e", arm: "seed", seed: 2, secondsPerUpdate: 13, phaseSeconds: { a: 6, b: 7 } },
    ].map((t) => ({ ...t, parseRate: null })),
  );
  assert.deepEqual(s.timing[0].phaseSeconds, { a: 5, b: 6 });
});

Deno.test("phaseTable puts SEED's own work under its phase and compares inside the SEED run", () => {
  const grpo = { rollout: 5, rescore: 10, update: 15, teacher_pass: 0.001 };
  const seed = { rollout: 5, analyze: 6, rescore: 14, teacher_pass: 4, update: 20 };
  const lines = phaseTable(grpo, seed, "sokoban");
  assert.ok(lines.includes("| sokoban | rescore | 10.00 | 14.00 | 4.00 | 1.40 |"));
  assert.ok(lines.includes("| sokoban | rescore: teacher pass | 0.00 | 4.00 | 4.00 | n/a |"));
  assert.ok(lines.includes("| sokoban | analyze | 0.00 | 6.00 | 6.00 | n/a |"));
  // Totals over phases only (parts are inside them): 30 and 5 + 6 + 14 + 20 = 45.
  assert.ok(lines.includes("| sokoban | total | 30.00 | 45.00 | 15.00 | 1.50 |"));
  // Own work 6 + 4 = 10 of 45: 45 / 35 = 1.29.
  assert.equal(
    lines.at(-1),
    "sokoban: SEED's own work (analyze + teacher pass) 10.00 s of 45.00 s per " +
      "update; inside the SEED run, SEED ÷ (the same updates without it) 1.29",
  );
});

Deno.test("seedCsv writes per-seed Wilson rows then mean rows with the t-interval", () => {
  const s = summarize(data, []);
  const lines = seedCsv(data, s.means).trim().split("\n");
  assert.equal(lines.length, 1 + data.length + s.means.length);
  assert.equal(
    lines[0],
    "env,arm,method,seed,step,samples,split,success_rate,score,n,ci_low,ci_high,ci_kind",
  );
  // 4 of 8 won: Wilson 95% [0.2152, 0.7848].
  assert.equal(
    lines.find((l) => l.startsWith("sokoban,grpo,grpo,1,2,")),
    "sokoban,grpo,grpo,1,2,32,test_seen,0.5,5,8,0.2152,0.7848,wilson_binomial",
  );
  // SEED at step 2 over seeds: mean 0.625, s = 0.125, half = 4.30265 · 0.125 / √3 = 0.3105,
  // so [0.3145, 0.9355].
  assert.equal(
    lines.find((l) => l.startsWith("sokoban,seed,seed,mean,2,")),
    "sokoban,seed,seed,mean,2,32,test_seen,0.6250,6.2500,3,0.3145,0.9355,t_over_seeds",
  );
  assert.equal(
    diffCsv(s.diffs).trim().split("\n")[2],
    "sokoban,seed,grpo,2,32,test_seen,3,0.2500,0.2500,0.2500",
  );
});

/** Three seeds of five arms at step 2 (step 0 equal: the shared warm-up). */
const fiveArms = rows({
  grpo: { 1: [0.25, 0.5], 2: [0.25, 0.25], 3: [0, 0.375] },
  gigpo: { 1: [0.25, 0.5], 2: [0.25, 0.375], 3: [0, 0.375] },
  seed: { 1: [0.25, 0.75], 2: [0.25, 0.5], 3: [0, 0.625] },
  "seed-gigpo": { 1: [0.25, 0.25], 2: [0.25, 0.5], 3: [0, 0.5] },
  "seed-oracle": { 1: [0.25, 1], 2: [0.25, 0.75], 3: [0, 0.5] },
});

Deno.test("summarize pairs every arm with the named baseline by seed, with a t-interval", () => {
  const s = summarize(fiveArms, [], "grpo");
  assert.deepEqual(s.arms, ["grpo", "gigpo", "seed", "seed-gigpo", "seed-oracle"]);
  const at = (arm: string) => s.diffs.find((d) => d.arm === arm && d.step === 2)!.diff;
  assert.equal(s.diffs.filter((d) => d.step === 2).length, 4);
  assert.ok(s.diffs.every((d) => d.baseline === "grpo" && d.arm !== "grpo"));
  // seed-oracle − grpo per seed: 0.5, 0.5, 0.125 → mean 0.375, sd √(0.140625 / 3 · …):
  // deviations 0.125, 0.125, −0.25 → Σ² = 0.09375, sd = √(0.09375 / 2) = 0.216506…,
  // half = t(0.975, 2) · sd / √3 = 4.302653 · 0.216506 / 1.732051 = 0.537832…
  const oracle = at("seed-oracle");
  assert.equal(oracle.n, 3);
  assert.ok(Math.abs(oracle.mean - 0.375) < 1e-12);
  assert.ok(Math.abs(oracle.sd - Math.sqrt(0.09375 / 2)) < 1e-12);
  assert.ok(Math.abs(oracle.half - 0.537832) < 1e-5, String(oracle.half));
  assert.ok(Math.abs(oracle.low - (0.375 - oracle.half)) < 1e-12);
  // gigpo − grpo: 0, 0.125, 0 → mean 0.041667; seed-gigpo − grpo: −0.25, 0.25, 0.125 → 0.041667.
  assert.ok(Math.abs(at("gigpo").mean - 0.125 / 3) < 1e-12);
  assert.ok(Math.abs(at("seed-gigpo").mean - 0.125 / 3) < 1e-12);
  // Another baseline: differences from seed, and grpo is then an arm like any other.
  const fromSeed = summarize(fiveArms, [], "seed");
  const grpo = fromSeed.diffs.find((d) => d.arm === "grpo" && d.step === 2)!.diff;
  assert.ok(Math.abs(grpo.mean + 0.25) < 1e-12);
  assert.ok(fromSeed.diffs.every((d) => d.arm !== "seed"));
  // Samples to reach the baseline's final 0.375 (mean curve from 1/6 at 0 to the arm's final):
  // gigpo 0.416667 → 32 · (0.375 − 1/6) / (0.416667 − 1/6) = 26.67.
  const reach = s.reach.find((r) => r.arm === "gigpo")!;
  assert.ok(Math.abs(reach.armSamples! - 32 * (5 / 24) / (1 / 4)) < 1e-9);
});

Deno.test("the summary table has one column per arm and one paired difference per other arm", () => {
  const lines = summaryTable(summarize(fiveArms, [], "grpo"));
  assert.equal(
    lines[2],
    "| env | split | step | samples | grpo | gigpo | seed | seed-gigpo | seed-oracle | " +
      "gigpo − grpo [95% interval] | seed − grpo [95% interval] | " +
      "seed-gigpo − grpo [95% interval] | seed-oracle − grpo [95% interval] |",
  );
  const step2 = lines.find((l) => l.startsWith("| sokoban | test_seen | 2 |"))!;
  assert.match(step2, /\| 37\.5% ±/); // grpo's mean
  assert.match(step2, /\| 37\.5 \[-16\.3, 91\.3\] \|$/); // seed-oracle − grpo
  const csv = diffCsv(summarize(fiveArms, [], "grpo").diffs).trim().split("\n");
  assert.equal(csv[0], "env,arm,baseline,step,samples,split,n_seeds,diff,ci_low,ci_high");
  assert.ok(csv.includes("sokoban,seed-oracle,grpo,2,32,test_seen,3,0.3750,-0.1628,0.9128"));
});

/**
 * bench/_learn_stats.ts against hand-computed values (t quantiles from a printed t table; the
 * intervals worked out by hand from the formulas in the module doc).
 */
import assert from "node:assert/strict";
import {
  mean,
  pairedDifference,
  samplesToReach,
  studentTQuantile,
  tInterval,
  wilsonInterval,
} from "../_learn_stats.ts";

/** Fails unless |actual − expected| ≤ tolerance. */
function assertAlmostEquals(actual: number, expected: number, tolerance: number) {
  assert.ok(
    Math.abs(actual - expected) <= tolerance,
    `expected ${expected} ± ${tolerance}, got ${actual}`,
  );
}

Deno.test("mean is the arithmetic mean and NaN for no values", () => {
  assert.equal(mean([1, 2, 3, 4]), 2.5);
  assert.ok(Number.isNaN(mean([])));
});

Deno.test("studentTQuantile matches the t table", () => {
  assertAlmostEquals(studentTQuantile(0.975, 1), 12.7062047, 1e-6);
  assertAlmostEquals(studentTQuantile(0.975, 2), 4.30265273, 1e-7);
  assertAlmostEquals(studentTQuantile(0.975, 4), 2.77644511, 1e-7);
  assertAlmostEquals(studentTQuantile(0.975, 30), 2.04227246, 1e-7);
  // df = 1 is the Cauchy distribution: its 0.75 quantile is tan(π/4) = 1.
  assertAlmostEquals(studentTQuantile(0.75, 1), 1, 1e-8);
  assert.throws(() => studentTQuantile(0.4, 3), /p must be in \(0.5, 1\)/);
});

Deno.test("tInterval over three seeds uses t with 2 degrees of freedom", () => {
  // mean 0.4; s = √((0.04 + 0 + 0.04) / 2) = 0.2; half = 4.30265 · 0.2 / √3 = 0.496828.
  const r = tInterval([0.2, 0.4, 0.6]);
  assert.equal(r.n, 3);
  assertAlmostEquals(r.mean, 0.4, 1e-12);
  assertAlmostEquals(r.sd, 0.2, 1e-12);
  assertAlmostEquals(r.half, 0.496828, 1e-6);
  assertAlmostEquals(r.low, 0.4 - 0.496828, 1e-6);
  assertAlmostEquals(r.high, 0.4 + 0.496828, 1e-6);
});

Deno.test("tInterval of one seed has a mean but no interval", () => {
  const r = tInterval([0.25]);
  assert.equal(r.mean, 0.25);
  assert.ok(Number.isNaN(r.half) && Number.isNaN(r.low) && Number.isNaN(r.high));
});

Deno.test("pairedDifference pairs by seed and drops unpaired seeds", () => {
  const seedRates = new Map([[1, 0.5], [2, 0.3], [3, 0.4], [4, 0.9]]);
  const grpoRates = new Map([[1, 0.25], [2, 0.25], [3, 0.1]]);
  // Differences 0.25, 0.05, 0.3 (seed 4 has no pair): mean 0.2,
  // s = √((0.05² + 0.15² + 0.1²) / 2) = √0.0175 = 0.132288; half = 4.30265 · s / √3 = 0.328621.
  const d = pairedDifference(seedRates, grpoRates);
  assert.equal(d.n, 3);
  assertAlmostEquals(d.mean, 0.2, 1e-12);
  assertAlmostEquals(d.sd, 0.132288, 1e-6);
  assertAlmostEquals(d.half, 0.328621, 1e-6);
  // Unpaired means would differ: (0.5 + 0.3 + 0.4 + 0.9) / 4 − 0.6 / 3 = 0.525 − 0.2 = 0.325.
  assertAlmostEquals(mean([...seedRates.values()]) - mean([...grpoRates.values()]), 0.325, 1e-12);
});

Deno.test("wilsonInterval matches the Wilson score formula", () => {
  // 0 of 10: [0, (z²/n) / (1 + z²/n)] = [0, 0.384146 / 1.384146] = [0, 0.277533].
  const [lo0, hi0] = wilsonInterval(0, 10);
  assertAlmostEquals(lo0, 0, 1e-9);
  assertAlmostEquals(hi0, 0.2775328, 1e-6);
  const [lo5, hi5] = wilsonInterval(5, 10);
  assertAlmostEquals(lo5, 0.2365931, 1e-6);
  assertAlmostEquals(hi5, 0.7634069, 1e-6);
  const [lo3, hi3] = wilsonInterval(3, 32);
  assertAlmostEquals(lo3, 0.0324016, 1e-6);
  assertAlmostEquals(hi3, 0.2421815, 1e-6);
  assert.ok(wilsonInterval(0, 0).every(Number.isNaN));
});

Deno.test("samplesToReach interpolates between evaluations and reports not reached", () => {
  const curve = [{ samples: 0, value: 0.1 }, { samples: 128, value: 0.4 }, {
    samples: 64,
    value: 0.2,
  }];
  // Between (64, 0.2) and (128, 0.4): 64 + (0.3 − 0.2) / (0.4 − 0.2) · 64 = 96.
  assertAlmostEquals(samplesToReach(curve, 0.3)!, 96, 1e-9);
  assert.equal(samplesToReach(curve, 0.4), 128);
  assert.equal(samplesToReach(curve, 0.1), 0);
  assert.equal(samplesToReach(curve, 0.05), 0);
  assert.equal(samplesToReach(curve, 0.5), null);
  // The first crossing counts, even when the curve falls back below the target later.
  const bumpy = [{ samples: 0, value: 0.1 }, { samples: 64, value: 0.35 }, {
    samples: 128,
    value: 0.2,
  }];
  assertAlmostEquals(samplesToReach(bumpy, 0.3)!, 51.2, 1e-9);
  assert.equal(samplesToReach([], 0.3), null);
});

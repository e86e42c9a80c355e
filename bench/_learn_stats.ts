/**
 * Aggregation for `deno task bench:learn` over seeds (pure functions, no I/O): the mean over
 * seeds with a Student-t interval, the paired difference of two methods run from the same
 * warm-up, a per-seed binomial (Wilson score) interval, and the samples a learning curve needs to
 * reach a target (linear interpolation between evaluations).
 *
 * The t quantile is found by bisection on the t CDF, F(t) = 1 − ½·I_{ν/(ν+t²)}(ν/2, ½) for t ≥ 0,
 * with the regularized incomplete beta I by its continued fraction (Press et al., Numerical
 * Recipes, 3rd ed., §6.4, eq. 6.4.9 and 6.14.11) and ln Γ by the Lanczos series (§6.1).
 */

/** A mean with its two-sided interval; `half` is NaN when it is undefined (n < 2). */
export interface Interval {
  /** Values aggregated (seeds, or pairs of seeds). */
  n: number;
  mean: number;
  /** Sample standard deviation (n − 1 in the denominator); NaN when n < 2. */
  sd: number;
  /** Half-width t_{(1+level)/2, n−1} · sd / √n; NaN when n < 2. */
  half: number;
  low: number;
  high: number;
}

/** Arithmetic mean of `xs`; NaN for an empty list. */
export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 coefficients; ~15 significant digits). */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  x -= 1;
  let a = c[0];
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += c[i] / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Continued fraction of the incomplete beta (modified Lentz; Numerical Recipes §6.4). */
function betaContinuedFraction(a: number, b: number, x: number): number {
  const tiny = 1e-300;
  let c = 1, d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-15) break;
  }
  return h;
}

/** Regularized incomplete beta I_x(a, b) for 0 ≤ x ≤ 1, a, b > 0. */
function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(
    logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x),
  );
  return x < (a + 1) / (a + b + 2)
    ? (front * betaContinuedFraction(a, b, x)) / a
    : 1 - (front * betaContinuedFraction(b, a, 1 - x)) / b;
}

/** P(T ≤ t) for Student's t with `df` > 0 degrees of freedom. */
export function studentTCdf(t: number, df: number): number {
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/**
 * The p-quantile of Student's t with `df` degrees of freedom (0.5 < p < 1), e.g.
 * `studentTQuantile(0.975, 2)` = 4.3027. Bisection to 1e-10. Throws a RangeError outside that
 * domain.
 */
export function studentTQuantile(p: number, df: number): number {
  if (!(p > 0.5 && p < 1) || !(df > 0)) {
    throw new RangeError(
      `Cannot compute a t quantile as p must be in (0.5, 1) and df > 0: current values are p=${p}, df=${df}`,
    );
  }
  let lo = 0, hi = 1;
  while (studentTCdf(hi, df) < p) hi *= 2;
  while (hi - lo > 1e-10) {
    const mid = (lo + hi) / 2;
    if (studentTCdf(mid, df) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/**
 * Mean of `xs` with the two-sided Student-t interval at `level` (default 0.95):
 * mean ± t_{(1+level)/2, n−1} · s/√n, s the sample standard deviation. With n < 2 the interval
 * is undefined: `sd`, `half`, `low` and `high` are NaN.
 */
export function tInterval(xs: readonly number[], level = 0.95): Interval {
  const n = xs.length, m = mean(xs);
  if (n < 2) return { n, mean: m, sd: NaN, half: NaN, low: NaN, high: NaN };
  const sd = Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (n - 1));
  const half = studentTQuantile((1 + level) / 2, n - 1) * sd / Math.sqrt(n);
  return { n, mean: m, sd, half, low: m - half, high: m + half };
}

/**
 * The paired difference a − b over the keys (seeds) present in both maps, with its t-interval
 * (`tInterval` of the per-key differences). Pairing by seed removes the between-warm-up
 * variation both methods share.
 */
export function pairedDifference(
  a: ReadonlyMap<number, number>,
  b: ReadonlyMap<number, number>,
  level = 0.95,
): Interval {
  const diffs = [...a].filter(([k]) => b.has(k)).map(([k, v]) => v - b.get(k)!);
  return tInterval(diffs, level);
}

/** The standard normal CDF Φ(z) (erfc by Numerical Recipes' Chebyshev fit, |error| < 1.2e-7). */
function normalCdf(z: number): number {
  const x = Math.abs(z) / Math.SQRT2, t = 1 / (1 + 0.5 * x);
  const erfc = t * Math.exp(
    -x * x - 1.26551223 +
      t * (1.00002368 +
          t * (0.37409196 +
              t * (0.09678418 +
                  t * (-0.18628806 +
                      t * (0.27886807 +
                          t *
                            (-1.13520398 +
                              t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
  );
  return z >= 0 ? 1 - erfc / 2 : erfc / 2;
}

/**
 * Wilson score interval of a binomial proportion: `successes` of `n` trials (Wilson 1927,
 * "Probable inference…", JASA 22; (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)).
 * Returns [low, high]; [NaN, NaN] when n = 0.
 */
export function wilsonInterval(successes: number, n: number, level = 0.95): [number, number] {
  if (n <= 0) return [NaN, NaN];
  let lo = 0, hi = 10;
  const p = (1 + level) / 2;
  while (hi - lo > 1e-10) {
    const mid = (lo + hi) / 2;
    if (normalCdf(mid) < p) lo = mid;
    else hi = mid;
  }
  const z = (lo + hi) / 2, phat = successes / n, z2n = (z * z) / n;
  const centre = phat + z2n / 2;
  const spread = z * Math.sqrt((phat * (1 - phat)) / n + z2n / (4 * n));
  return [
    Math.max(0, (centre - spread) / (1 + z2n)),
    Math.min(1, (centre + spread) / (1 + z2n)),
  ];
}

/** One point of a learning curve: episodes sampled so far and the success rate there. */
export interface CurvePoint {
  samples: number;
  value: number;
}

/**
 * Samples the curve needs to first reach `target`: the samples of the first point at or above
 * it, linearly interpolated from the point before (a curve at or above the target at its first
 * point needs that point's samples). Returns null when no point reaches it ("not reached").
 * Points are taken in order of `samples`.
 */
export function samplesToReach(curve: readonly CurvePoint[], target: number): number | null {
  const pts = [...curve].sort((a, b) => a.samples - b.samples);
  const eps = 1e-12;
  for (let i = 0; i < pts.length; i++) {
    if (pts[i].value < target - eps) continue;
    if (i === 0) return pts[0].samples;
    const a = pts[i - 1], b = pts[i];
    return a.samples + ((target - a.value) / (b.value - a.value)) * (b.samples - a.samples);
  }
  return null;
}

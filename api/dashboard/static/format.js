/** Small formatters for the dashboard (text only). */

/**
 * Seconds as `1h02m`, `3m10s`, `42s`.
 * @param {number | null | undefined} s
 */
export function duration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "—";
  s = Math.max(0, Math.round(s));
  if (s >= 3600) {
    return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  }
  if (s >= 60) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${s}s`;
}

/** @param {number} n bytes */
export function bytes(n) {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}

/** @param {string | null | undefined} iso */
export function time(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return d.toLocaleString(undefined, { hour12: false });
}

/**
 * A rate in [0, 1] (a success rate) as a percentage with one decimal, `81.3%`: the one format of
 * rates on the dashboard; `—` for none.
 * @param {number | null | undefined} x in [0, 1]
 */
export function percent(x) {
  return x === null || x === undefined || !Number.isFinite(x) ? "—" : `${(x * 100).toFixed(1)}%`;
}

/**
 * A difference of two rates, or a rate's interval half-width, in percentage points with the
 * decimal {@link percent} gives the rates (`10.0`, `-2.5`), never `-0.0`; `—` for none.
 * @param {number | null | undefined} x a difference of rates in [−1, 1]
 */
export function percentPoints(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "—";
  const text = (x * 100).toFixed(1);
  return Number(text) === 0 ? "0.0" : text;
}

/**
 * A number as short text: `digits` decimals from 1 up (`12.346`), `digits` significant digits
 * below 1 (`-0.00035`, `0.123`, `1.2e-7`), never `-0`.
 * @param {number | null | undefined} x
 * @param {number} [digits]
 */
export function num(x, digits = 3) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "—";
  const v = Math.abs(x) >= 1 ? +x.toFixed(digits) : +x.toPrecision(digits);
  return v === 0 ? "0" : String(v);
}

/**
 * Axis tick labels: every split with the decimals its spacing needs (splits 0.0025 apart get 4:
 * `-0.005`, `-0.0025`, `0`), so neighbours never print alike, and never `-0`.
 * @param {number[]} splits ascending
 * @returns {string[]}
 */
export function tickLabels(splits) {
  let step = Infinity;
  for (let i = 1; i < splits.length; i++) {
    const d = Math.abs(splits[i] - splits[i - 1]);
    if (d > 0 && d < step) step = d;
  }
  let decimals = 0;
  if (Number.isFinite(step)) {
    // 2.5e-3 → mantissa decimals 1, exponent −3 → 4 decimals.
    const [mantissa, exponent] = (+step.toPrecision(6)).toExponential().split("e");
    decimals = Math.min(20, Math.max(0, (mantissa.split(".")[1]?.length ?? 0) - Number(exponent)));
  }
  return splits.map((v) => {
    if (!Number.isFinite(v)) return "";
    const text = v.toFixed(decimals);
    return Number(text) === 0 ? "0" : text;
  });
}

/**
 * Half-width of the 95% normal-approximation interval of a success rate over `episodes`
 * episodes, as a fraction: 1.96·√(p(1−p)/n) with p clamped to [1/n, 1 − 1/n] (the same rule as
 * api/demo_summary.ts `successInterval`, there in percentage points).
 * @param {number} rate in [0, 1]
 * @param {number} episodes
 */
export function successHalfWidth(rate, episodes) {
  if (!(episodes >= 1)) return 0;
  const p = Math.min(Math.max(rate, 1 / episodes), 1 - 1 / episodes);
  return 1.96 * Math.sqrt((p * (1 - p)) / episodes);
}

/** Job states from which a job still moves. */
export const ACTIVE_STATUSES = ["queued", "running", "cancelling"];

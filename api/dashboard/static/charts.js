/**
 * The job page's learning curves, drawn with uPlot (npm `uplot`, served from the API process at
 * /dashboard/vendor/). One chart per group of metric series from `GET /v1/jobs/{id}/metrics`;
 * x is the step. Series recorded at some steps only (evaluations) skip the others and are joined
 * across them. Each chart's element carries `data-points`: the points drawn per series (JSON),
 * read back from the chart's own data.
 */
import { h } from "./dom.js";
import { successHalfWidth } from "./format.js";

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b"];

/**
 * `#rrggbb` at opacity `a`.
 * @param {string} hex
 * @param {number} a
 */
function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, ${a})`;
}

/**
 * @typedef {{label: string, values: (number | null)[], band?: {lower: (number|null)[], upper: (number|null)[]}}} Series
 * @typedef {{id: string, title: string, series: Series[], range?: [number, number]}} ChartSpec
 */

/**
 * The chart groups of a job's metrics (`{names, points}` of the metrics route). `episodes` is the
 * evaluation size per split (spec `eval.episodes`): success rates get a 95% band.
 * @param {{names: string[], points: {step: number, values: Record<string, number>}[]}} metrics
 * @param {number | undefined} episodes
 * @returns {{steps: number[], charts: ChartSpec[]}}
 */
export function chartSpecs(metrics, episodes) {
  const steps = metrics.points.map((p) => p.step);
  const col = (/** @type {string} */ name) =>
    metrics.points.map((p) => (typeof p.values[name] === "number" ? p.values[name] : null));
  const has = (/** @type {string} */ name) => metrics.names.includes(name);
  const pick = (/** @type {[string, string][]} */ pairs) =>
    pairs.filter(([name]) => has(name)).map(([name, label]) => ({ label, values: col(name) }));

  const splits = metrics.names
    .map((n) => n.match(/^eval\/([^/]+)\/success_rate$/)?.[1])
    .filter((s) => s !== undefined);
  const success = [
    ...pick([["success_rate", "train rollouts"]]),
    ...splits.map((split) => {
      const values = col(`eval/${split}/success_rate`);
      const hw = values.map((
        v,
      ) => (v === null || !episodes ? null : successHalfWidth(v, episodes)));
      return {
        label: `eval ${split}`,
        values,
        band: episodes
          ? {
            lower: values.map((v, i) => (v === null ? null : Math.max(0, v - hw[i]))),
            upper: values.map((v, i) => (v === null ? null : Math.min(1, v + hw[i]))),
          }
          : undefined,
      };
    }),
  ];
  const quality = metrics.names.filter((n) => /^skill_.*(rate|quality|score)$/.test(n));
  const phases = metrics.names.filter((n) => /^seconds_/.test(n));
  /** @type {ChartSpec[]} */
  const charts = [
    { id: "success", title: "Success rate (eval: ±95% interval)", series: success, range: [0, 1] },
    {
      id: "reward",
      title: "Reward",
      series: pick([["mean_reward", "mean reward"], ["mean_score", "mean score"]]),
    },
    {
      id: "losses",
      title: "Losses",
      series: pick([["pg_loss", "pg"], ["opd_loss", "opd"], ["kl_loss", "kl"]]),
    },
    {
      id: "teacher-gap",
      title: "Teacher gap Δ (nats)",
      series: pick([["teacher_gap_mean", "Δ mean (all re-scored tokens)"], [
        "delta_mean",
        "Δ mean (update)",
      ]]),
    },
    {
      id: "analyzer",
      title: "Analyzer parse rate and skill quality",
      series: [
        ...pick([["analyzer_parse_rate", "parse rate"]]),
        ...quality.map((n) => ({ label: n, values: col(n) })),
      ],
      range: [0, 1],
    },
    {
      id: "phases",
      title: "Seconds per phase",
      series: phases.map((n) => ({ label: n.slice("seconds_".length), values: col(n) })),
    },
  ];
  return {
    steps,
    charts: charts.filter((c) => c.series.some((s) => s.values.some((v) => v !== null))),
  };
}

/**
 * Draws `spec` into a new figure element (uPlot) and returns it.
 * @param {number[]} steps
 * @param {ChartSpec} spec
 * @param {number} width px
 */
export function drawChart(steps, spec, width) {
  const figure = h(
    "figure",
    { class: "chart", dataset: { chart: spec.id } },
    h("figcaption", null, spec.title),
  );
  /** @type {(number | null)[][]} */
  const data = [steps];
  /** @type {any[]} */
  const series = [{ label: "step" }];
  /** @type {any[]} */
  const bands = [];
  spec.series.forEach((s, k) => {
    const color = COLORS[k % COLORS.length];
    data.push(s.values);
    series.push({
      label: s.label,
      stroke: color,
      width: 2,
      spanGaps: true,
      points: { show: true, size: 6 },
    });
    if (s.band) {
      const main = series.length - 1;
      data.push(s.band.upper, s.band.lower);
      series.push(
        {
          label: `${s.label} hi`,
          stroke: alpha(color, 0.3),
          width: 1,
          spanGaps: true,
          points: { show: false },
        },
        {
          label: `${s.label} lo`,
          stroke: alpha(color, 0.3),
          width: 1,
          spanGaps: true,
          points: { show: false },
        },
      );
      bands.push({ series: [main + 1, main + 2], fill: alpha(color, 0.15) });
    }
  });
  const opts = {
    width,
    height: 220,
    series,
    bands,
    scales: { x: { time: false }, ...(spec.range ? { y: { range: spec.range } } : {}) },
    // Whole steps only on the x axis.
    axes: [{ label: "step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, {}],
    legend: { live: true },
  };
  // @ts-ignore: uPlot is the global of /dashboard/vendor/uPlot.iife.min.js
  const chart = new uPlot(opts, data, figure);
  /** @type {Record<string, number>} */
  const points = {};
  spec.series.forEach((s) => {
    const k = chart.series.findIndex((/** @type {any} */ x) => x.label === s.label);
    points[s.label] = chart.data[k].filter((/** @type {unknown} */ v) =>
      v !== null && v !== undefined
    ).length;
  });
  figure.dataset.points = JSON.stringify(points);
  return figure;
}

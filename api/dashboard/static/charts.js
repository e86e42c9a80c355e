/**
 * The job page's learning curves, drawn with uPlot (npm `uplot`, served from the API process at
 * /dashboard/vendor/). One chart per group of metric series from `GET /v1/jobs/{id}/metrics`;
 * x is the step. Series recorded at some steps only (evaluations) skip the others and are joined
 * across them. Each chart's element carries `data-points`: the points drawn per series (JSON),
 * read back from the chart's own data; `data-y-label` the y axis title and `data-y-ticks` the tick
 * labels last drawn (JSON). The y axis is as wide as its longest tick label (negative labels are
 * never clipped); each legend shows the series' last value until the pointer picks a step.
 */
import { h } from "./dom.js";
import { num, successHalfWidth, tickLabels } from "./format.js";

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
 * @typedef {{label: string, values: (number | null)[], band?: {lower: (number|null)[], upper:
 *   (number|null)[]}}} Series
 * @typedef {{id: string, title: string, yLabel: string, series: Series[], range?: [number,
 *   number]}} ChartSpec
 */

/** The y axis title of rates in [0, 1]. */
export const FRACTION = "fraction (0–1)";

/**
 * The y axis title of a metric (name and unit), for one-metric charts (compare view).
 * @param {string} metric a metric name as recorded (`eval/test_seen/success_rate`,
 *   `seconds_rollout`)
 */
export function metricAxisLabel(metric) {
  if (/(^|\/|_)(success_rate|parse_rate|rate|quality)$/.test(metric)) return FRACTION;
  if (/^seconds_/.test(metric)) return "seconds";
  if (/_loss$/.test(metric)) return "loss (token mean)";
  if (/teacher_gap|delta|entropy/.test(metric)) return "nats/token";
  if (/reward|score/.test(metric)) return "reward (env units)";
  return metric;
}

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
    {
      id: "success",
      title: "Success rate (eval: ±95% interval)",
      yLabel: "success rate (0–1)",
      series: success,
      range: [0, 1],
    },
    {
      id: "reward",
      title: "Reward",
      yLabel: "reward (env units)",
      series: pick([["mean_reward", "mean reward"], ["mean_score", "mean score"]]),
    },
    {
      id: "losses",
      title: "Losses",
      yLabel: "loss (token mean)",
      series: pick([["pg_loss", "pg"], ["opd_loss", "opd"], ["kl_loss", "kl"]]),
    },
    {
      id: "teacher-gap",
      title: "Teacher gap Δ (nats)",
      yLabel: "Δ (nats/token)",
      series: pick([["teacher_gap_mean", "Δ mean (all re-scored tokens)"], [
        "delta_mean",
        "Δ mean (update)",
      ]]),
    },
    {
      id: "analyzer",
      title: "Analyzer parse rate and skill quality",
      yLabel: FRACTION,
      series: [
        ...pick([["analyzer_parse_rate", "parse rate"]]),
        ...quality.map((n) => ({ label: n, values: col(n) })),
      ],
      range: [0, 1],
    },
    {
      id: "phases",
      title: "Seconds per phase",
      yLabel: "seconds",
      series: phases.map((n) => ({ label: n.slice("seconds_".length), values: col(n) })),
    },
  ];
  return {
    steps,
    charts: charts.filter((c) => c.series.some((s) => s.values.some((v) => v !== null))),
  };
}

/**
 * The width in CSS px of a y axis: tick length, gap and the widest of its tick labels, measured in
 * the axis font (uPlot's fixed default of 50 px clips the minus of `-0.005`).
 * @param {any} u the uPlot instance
 * @param {string[] | null} values the tick labels
 * @param {number} axisIdx
 * @param {number} cycleNum
 */
function yAxisSize(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size;
  let widest = 0;
  u.ctx.font = axis.font[0];
  for (const v of values ?? []) widest = Math.max(widest, u.ctx.measureText(String(v)).width);
  return Math.ceil(axis.ticks.size + axis.gap + widest / devicePixelRatio) + 4;
}

/**
 * Draws `spec` into a new figure element (uPlot) and returns it. The uPlot instance is the
 * figure's `uplot` property (for tests).
 * @param {number[]} steps
 * @param {ChartSpec} spec
 * @param {number} width px
 */
export function drawChart(steps, spec, width) {
  const figure = h(
    "figure",
    { class: "chart", dataset: { chart: spec.id, yLabel: spec.yLabel } },
    h("figcaption", null, spec.title),
  );
  /** @type {(number | null)[][]} */
  const data = [steps];
  /**
   * Legend text: the value at the step the pointer picks; without a pointer the series' last one.
   * @param {(number | null)[]} values
   */
  const legendValue = (values) => {
    const last = values.findLast((v) => v !== null && v !== undefined);
    return (
      /** @type {any} */ _u,
      /** @type {number | null} */ v,
      /** @type {number} */ _s,
      /** @type {number | null} */ idx,
    ) => idx === null || idx === undefined ? num(last) : num(v);
  };
  /** @type {any[]} */
  const series = [{ label: "step", value: legendValue(steps) }];
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
      value: legendValue(s.values),
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
          value: legendValue(s.band.upper),
        },
        {
          label: `${s.label} lo`,
          stroke: alpha(color, 0.3),
          width: 1,
          spanGaps: true,
          points: { show: false },
          value: legendValue(s.band.lower),
        },
      );
      bands.push({ series: [main + 1, main + 2], fill: alpha(color, 0.15) });
    }
  });
  const opts = {
    width,
    height: 260,
    series,
    bands,
    scales: { x: { time: false }, ...(spec.range ? { y: { range: spec.range } } : {}) },
    axes: [
      // Whole steps only on the x axis.
      {
        label: "step",
        incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
        values: (/** @type {any} */ _u, /** @type {number[]} */ splits) => tickLabels(splits),
      },
      {
        label: spec.yLabel,
        size: yAxisSize,
        values: (/** @type {any} */ _u, /** @type {number[]} */ splits) => {
          const labels = tickLabels(splits);
          figure.dataset.yTicks = JSON.stringify(labels);
          return labels;
        },
      },
    ],
    legend: { live: true },
  };
  // @ts-ignore: uPlot is the global of /dashboard/vendor/uPlot.iife.min.js
  const chart = new uPlot(opts, data, figure);
  /** @type {any} */ (figure).uplot = chart;
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

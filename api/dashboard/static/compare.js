/**
 * Several jobs' curves on one chart (`#/compare?jobs=A,B,…&metric=NAME`, reached from the job list
 * by selecting jobs): one metric, chosen from the union of the jobs' metric names, one line per job
 * (named by the job's name, else its id's first 8 characters), over the union of their steps.
 */
import { api } from "./api.js";
import { drawChart, FRACTION, metricAxisLabel } from "./charts.js";
import { h, replace } from "./dom.js";
import { labelsOf, resultText, statusBadge } from "./jobs.js";

const ID = /^[0-9a-f-]{36}$/;
/** Most jobs on one chart (beyond that the lines and legend stop being readable). */
const MAX_JOBS = 12;

/**
 * The metric shown first: an evaluation split's success rate, else the training success rate,
 * else the first name.
 * @param {string[]} names sorted
 */
export function defaultMetric(names) {
  return names.find((n) => /^eval\/[^/]+\/success_rate$/.test(n)) ??
    names.find((n) => n === "success_rate") ?? names[0];
}

/**
 * One chart series per job, aligned on the union of their steps (null where a job has no value).
 * @param {{label: string, points: {step: number, values: Record<string, number>}[]}[]} runs
 * @param {string} metric
 * @returns {{steps: number[], series: {label: string, values: (number | null)[]}[]}}
 */
export function alignRuns(runs, metric) {
  const steps = [
    ...new Set(
      runs.flatMap((r) =>
        r.points.filter((p) => typeof p.values[metric] === "number").map((p) => p.step)
      ),
    ),
  ].sort((a, b) => a - b);
  const series = runs.map((r) => {
    /** @type {Map<number, number>} */
    const at = new Map();
    // A step recorded twice (a retried attempt) keeps its last value, as the metrics route does.
    for (const p of r.points) {
      if (typeof p.values[metric] === "number") at.set(p.step, p.values[metric]);
    }
    return { label: r.label, values: steps.map((s) => at.get(s) ?? null) };
  });
  return { steps, series };
}

/**
 * @param {HTMLElement} root
 * @param {{params: URLSearchParams}} ctx
 */
export async function compareView(root, { params }) {
  const ids = [...new Set((params.get("jobs") ?? "").split(",").filter((x) => ID.test(x)))];
  if (ids.length === 0) {
    return replace(
      root,
      h("h1", null, "Compare jobs"),
      h("p", { class: "muted" }, "Select two or more jobs in the job list, then Compare selected."),
      h("a", { href: "#/jobs" }, "Jobs"),
    );
  }
  if (ids.length > MAX_JOBS) {
    throw new Error(`Cannot compare ${ids.length} jobs as at most ${MAX_JOBS} fit on one chart`);
  }
  const runs = await Promise.all(ids.map(async (id) => {
    const [job, metrics] = await Promise.all([
      api(`/v1/jobs/${id}`),
      api(`/v1/jobs/${id}/metrics`),
    ]);
    const { name } = labelsOf(job);
    // Two jobs of one name stay apart in the legend.
    return { job, label: name ? `${name} (${id.slice(0, 8)})` : id.slice(0, 8), ...metrics };
  }));
  const names = [...new Set(runs.flatMap((r) => r.names))].sort();
  const asked = params.get("metric");
  const metric = asked && names.includes(asked) ? asked : defaultMetric(names);
  const select = h(
    "select",
    {
      id: "compare-metric",
      onchange: () => {
        const p = new URLSearchParams({ jobs: ids.join(","), metric: select.value });
        location.hash = `#/compare?${p}`;
      },
    },
    names.map((n) => h("option", { value: n, selected: n === metric }, n)),
  );
  const chart = h("section", { class: "charts", id: "compare-chart" });
  replace(
    root,
    h(
      "div",
      { class: "toolbar" },
      h("h1", null, "Compare jobs"),
      h("label", null, "Metric ", select),
    ),
    chart,
    h("h2", null, "Jobs"),
    h(
      "table",
      { class: "jobs", id: "compare-jobs" },
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          ["Job", "Status", "Method", "Model", "Environment", "Result"].map((t) =>
            h("th", null, t)
          ),
        ),
      ),
      h(
        "tbody",
        null,
        runs.map((r) =>
          h(
            "tr",
            { dataset: { job: r.job.id } },
            h("td", null, h("a", { href: `#/jobs/${r.job.id}`, title: r.job.id }, r.label)),
            h("td", null, statusBadge(r.job.status)),
            h("td", null, r.job.method),
            h("td", { class: "model" }, String(r.job.spec?.model?.base ?? "")),
            h("td", null, String(r.job.spec?.env?.id ?? "")),
            h("td", { class: "result" }, resultText(r.job)),
          )
        ),
      ),
    ),
  );
  if (!metric) return replace(chart, h("p", { class: "muted" }, "No metrics yet."));
  const { steps, series } = alignRuns(runs, metric);
  const yLabel = metricAxisLabel(metric);
  // Rates on their whole scale (uPlot would stretch an all-zero series to 0–100).
  const range = yLabel === FRACTION ? /** @type {[number, number]} */ ([0, 1]) : undefined;
  const width = Math.max(320, Math.min(1100, (chart.clientWidth || 1100) - 24));
  replace(
    chart,
    drawChart(
      steps,
      { id: "compare", title: metric, yLabel, series, range },
      width,
    ),
  );
}

/**
 * What `seed status` and `seed list` print for a person (api/client/cli.ts): the job with a few
 * key metrics rounded, one a line; the job list as a table with a header row.
 */
import {
  cancelledInQueue,
  cancelledInQueueText,
  etaLeft,
  queuedAgainText,
  renderBar,
  stageCount,
  stageDetail,
  warmupStep,
} from "./progress.ts";

/** A job as `GET /v1/jobs/{id}` answers it (the fields the CLI reads). */
export type Job = {
  id: string;
  /** A job's label, where the server records one. */
  name?: string | null;
  /** String → string labels given at submit. */
  metadata?: Record<string, string>;
  /** The latest evaluation: its step and success rate per split (null before the first). */
  result?: { step: number; success_rate: Record<string, number> } | null;
  status: string;
  attempt: number;
  max_attempts: number;
  method: string;
  created_at: string;
  /** When its first run started; null before it (a queued job with one is queued again). */
  started_at?: string | null;
  finished_at?: string | null;
  error: string | null;
  progress:
    | { stage?: string; step?: number; total_steps?: number; eta_s?: number }
      & Record<string, unknown>
    | null;
  latest_metrics: Record<string, number> | null;
  spec?: { model?: { base?: string } };
};

/**
 * The metrics `status` shows (the rest are in `seed metrics ID`), in this order: success rates of
 * training rollouts and of each evaluation split, then reward, loss, KL and the skill library.
 */
const KEY_METRICS = [
  /^success_rate$/,
  /^eval\/[^/]+\/success_rate$/,
  /^eval\/[^/]+\/score$/,
  /^reward(_mean)?$/,
  /^loss$/,
  /^kl$/,
  /^skill_library_size$/,
];

/**
 * A metric value for a person: integers as they are, others to 3 significant digits (1 decimal
 * from 100 on), so `0.3750000001` reads `0.375` and `-0.00035` stays `-0.00035`.
 */
export function formatMetric(value: number): string {
  if (Number.isInteger(value) || !Number.isFinite(value)) return String(value);
  if (Math.abs(value) >= 100) return value.toFixed(1);
  return String(Number(value.toPrecision(3)));
}

/** A metric as `status` and `list` show it: success rates as whole percentages. */
function metricText(name: string, value: number): string {
  return /success_rate$/.test(name) ? `${Math.round(value * 100)}%` : formatMetric(value);
}

/** The key metrics of `metrics` (see {@link KEY_METRICS}), at most `max`, in that order. */
function keyMetrics(metrics: Record<string, number>, max = 8): [string, number][] {
  const out: [string, number][] = [];
  for (const pattern of KEY_METRICS) {
    for (const name of Object.keys(metrics).filter((n) => pattern.test(n)).sort()) {
      if (out.length < max) out.push([name, metrics[name]]);
    }
  }
  return out;
}

/** `status`: the job, its model and progress, and its key metrics one a line. */
export function describe(job: Job): string {
  const lines = [`job       ${job.id}`];
  if (job.name) lines.push(`name      ${job.name}`);
  const labels = Object.entries(job.metadata ?? {});
  if (labels.length > 0) {
    lines.push(`metadata  ${labels.map(([k, v]) => `${k}=${v}`).join(", ")}`);
  }
  lines.push(
    // `attempt` counts from 0 (the run in progress, or next for a queued job).
    `status    ${job.status} (${cancelledInQueue(job) ? "in the queue for " : ""}run ${
      job.attempt + 1
    } of at most ${job.max_attempts})`,
    `method    ${job.method}`,
  );
  if (job.spec?.model?.base) lines.push(`model     ${job.spec.model.base}`);
  if (job.progress) lines.push(`progress  ${bar(job)}`);
  if (job.error) lines.push(`error     ${job.error}`);
  if (job.result) lines.push(`result    ${evalText(job.result)}`);
  const metrics = job.latest_metrics ?? {};
  const shown = keyMetrics(metrics);
  const step = metrics.step;
  if (shown.length > 0) {
    lines.push(`metrics${step === undefined ? "" : ` at step ${step}`}:`);
    const width = Math.max(...shown.map(([n]) => n.length));
    for (const [name, value] of shown) {
      lines.push(`  ${name.padEnd(width)}  ${metricText(name, value)}`);
    }
  }
  const rest = Object.keys(metrics).length - shown.length - (step === undefined ? 0 : 1);
  if (rest > 0) lines.push(`(${rest} more metrics: seed metrics ${job.id}; all fields: --json)`);
  return lines.join("\n") + "\n";
}

/** A latest evaluation: `test_seen 81%, test_unseen 79% (step 10)`. */
function evalText(result: NonNullable<Job["result"]>): string {
  const rates = Object.entries(result.success_rate).sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([split, rate]) => `${split} ${Math.round(rate * 100)}%`);
  return `${rates.join(", ")} (step ${result.step})`;
}

/** Whether a job's `status` is final (succeeded, failed or cancelled): it will change no more. */
export function isFinal(status: string): boolean {
  return ["succeeded", "failed", "cancelled"].includes(status);
}

/**
 * What a job came to, for `list`: its error when it failed; for a finished job its latest
 * evaluation; else (still training, or never evaluated) its latest success rate.
 */
function result(job: Job): string {
  if (job.error) return job.error.length > 60 ? `${job.error.slice(0, 59)}…` : job.error;
  if (job.result && isFinal(job.status)) return evalText(job.result);
  const [first] = keyMetrics(job.latest_metrics ?? {}, 1);
  if (!first) return "-";
  return `${first[0]} ${metricText(first[0], first[1])}`;
}

/**
 * `list`'s table: a header row, then one job a line (name and model `-` where none). STEP is the
 * job's updates (`3/10`), or in a warm-up stage `warm-up 120/560` ({@link warmupStep}), the count
 * `status`'s bar shows there; for a job back in the queue after a run started, the run it waits
 * for (`queued again: run 2 of at most 3`, {@link queuedAgainText}), not the last run's count, and
 * for one cancelled there `cancelled while queued again: run 2 of at most 3`
 * ({@link cancelledInQueueText}).
 */
export function listTable(jobs: Job[]): string {
  const rows = [["ID", "NAME", "MODEL", "METHOD", "STATUS", "STEP", "CREATED (UTC)", "RESULT"]];
  for (const j of jobs) {
    const step = j.progress?.step;
    const total = j.progress?.total_steps;
    rows.push([
      j.id,
      j.name ?? "-",
      j.spec?.model?.base ?? "-",
      j.method,
      j.status,
      queuedAgainText(j) ?? cancelledInQueueText(j) ?? warmupStep(j.progress) ??
        (step === undefined ? "-" : total ? `${step}/${total}` : String(step)),
      j.created_at.slice(0, 19).replace("T", " "),
      result(j),
    ]);
  }
  return table(rows);
}

/** `GET /v1/jobs/{id}/metrics` as it answers (the fields the CLI reads). */
export type MetricsPage = {
  names: string[];
  points: { step: number; values: Record<string, number> }[];
};

/**
 * `metrics`'s table: a header row, then each metric's latest value (from the last step that
 * recorded it) one a line, by name, rounded as `status` rounds ({@link formatMetric}); "" when the
 * job has recorded none.
 */
export function metricsTable(page: MetricsPage): string {
  const latest = new Map<string, [number, number]>();
  for (const p of page.points) {
    for (const [name, value] of Object.entries(p.values)) {
      if (name !== "step") latest.set(name, [p.step, value]); // the STEP column says it
    }
  }
  if (latest.size === 0) return "";
  const rows = [["METRIC", "STEP", "VALUE"]];
  for (const name of [...latest.keys()].sort()) {
    const [step, value] = latest.get(name)!;
    rows.push([name, String(step), formatMetric(value)]);
  }
  return table(rows);
}

/** Rows as columns padded to their widest cell (the last column unpadded). */
export function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) =>
    r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join("  ").trimEnd()
  ).join("\n") + "\n";
}

/**
 * The job's progress bar (progress.ts): its updates (`3/10`), or within a warm-up stage that
 * stage's own count (`SFT step 336/1120`, {@link stageCount}) with the rest of its detail; the ETA
 * only while the job runs. A job back in the queue after a run started gets no bar but the run it
 * waits for, `queued again: run 2 of at most 3` ({@link queuedAgainText}, the dashboard's
 * words): its `progress` is still the last run's; one cancelled there says so
 * (`cancelled while queued again: run 2 of at most 3`, {@link cancelledInQueueText}).
 *
 * With `eta`, the ETA counts down: `eta_s` less the time from `eta.readAtMs` (when this progress
 * was first read: progress.ts `etaAnchor`) to `eta.nowMs`, never below 0 ({@link etaLeft}), as the
 * dashboard's and the demo's do between the worker's progress writes; without it, `eta_s` as
 * written (`status` reads the job once).
 */
export function bar(job: Job, eta?: { readAtMs: number; nowMs: number }): string {
  const again = queuedAgainText(job) ?? cancelledInQueueText(job);
  if (again !== null) return again;
  const within = stageCount(job.progress);
  const etaS = job.status === "running" ? job.progress?.eta_s : undefined;
  return renderBar({
    status: job.status,
    stage: job.progress?.stage,
    step: within?.done ?? job.progress?.step,
    totalSteps: within?.total ?? job.progress?.total_steps,
    label: within?.label,
    etaS: etaS !== undefined && eta ? etaLeft(etaS, eta.readAtMs, eta.nowMs) : etaS,
    detail: within ? within.rest : stageDetail(job.progress),
  });
}

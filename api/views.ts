/**
 * Row → wire conversions (snake_case, ISO times). Internal object keys (S3 keys, tenant ids,
 * worker ids) never leave the server.
 */
import type { Checkpoint, Job, JobEvent, JobMetricsRow, SkillLibrary } from "../jobs/mod.ts";
import { metadataInOrder } from "../jobs/mod.ts";
import type { JobView } from "./schemas.ts";
import type { WireEvent } from "./sse.ts";
import type { EvalResult } from "./queries.ts";

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

const PROGRESS_KEYS: Record<string, string> = { totalSteps: "total_steps", etaS: "eta_s" };

/**
 * Job row → {@link JobView}; progress keys `totalSteps`/`etaS` become `total_steps`/`eta_s`.
 * `result` is the job's latest evaluation (queries.ts `latestEvalResults`), null when none.
 */
export function jobView(job: Job, result: EvalResult | null = null): JobView {
  let progress: JobView["progress"] = null;
  if (job.progress) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(job.progress)) out[PROGRESS_KEYS[k] ?? k] = v;
    progress = out as JobView["progress"];
  }
  return {
    id: job.id,
    status: job.status,
    method: job.method,
    attempt: job.attempt,
    max_attempts: job.maxAttempts,
    priority: job.priority,
    device: job.device,
    progress,
    latest_metrics: job.latestMetrics ?? null,
    error: job.error,
    name: job.name,
    metadata: metadataInOrder(job.metadata, job.metadataKeys),
    model: String((job.spec as { model?: { base?: unknown } }).model?.base ?? ""),
    result,
    created_at: job.createdAt.toISOString(),
    queued_at: job.queuedAt.toISOString(),
    started_at: iso(job.startedAt),
    finished_at: iso(job.finishedAt),
    spec: job.spec as Record<string, unknown>,
    submitted_spec: job.submittedSpec,
  };
}

/** Event row → wire event (also the SSE `data:`). */
export function eventView(e: JobEvent): WireEvent {
  return {
    id: e.id,
    type: e.type,
    attempt: e.attempt,
    data: e.data,
    created_at: e.createdAt.toISOString(),
  };
}

/** Metrics rows → `{names, points}`; names are the sorted union over all steps. */
export function metricsView(rows: JobMetricsRow[]) {
  const names = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r.values)) names.add(k);
  return {
    names: [...names].sort(),
    points: rows.map((r) => ({
      step: r.step,
      attempt: r.attempt,
      created_at: r.createdAt.toISOString(),
      values: r.values,
    })),
  };
}

/** Checkpoint row → wire checkpoint (file names, sizes and hashes; no object keys). */
export function checkpointView(c: Checkpoint) {
  return {
    step: c.step,
    attempt: c.attempt,
    bytes: c.bytes,
    created_at: c.createdAt.toISOString(),
    files: c.files.map((f) => ({ name: f.name, bytes: f.bytes, sha256: f.sha256 })),
  };
}

/** Skill library row + parsed contents → wire skills view. */
export function skillsView(row: SkillLibrary, library: unknown) {
  return {
    step: row.step,
    attempt: row.attempt,
    skill_count: row.skillCount,
    sha256: row.sha256,
    created_at: row.createdAt.toISOString(),
    library,
  };
}

/**
 * Live progress of the demo's job: follows `GET /v1/jobs/{id}/events` (SSE, resumable with
 * `Last-Event-ID`), re-reads the job and its metrics as events arrive, and shows one line —
 * `[#####---] 3/8  rollout  success 38%  skills 12  ETA 2m10s` — redrawn in place on a terminal,
 * printed as plain lines (on change, and at most every `plainEveryMs` otherwise) when not. A job
 * back in the queue after a run started reads `queued again: run 2 of at most 3` (or, cancelled
 * there, `cancelled while queued again: …`) in place of the last run's bar, and a new run shows
 * nothing of the last one's count, stage or ETA before its own first progress.
 * Notable events (status changes, first sight of each stage, evaluations) are printed above it.
 */
import type { SeedClient, SseMessage } from "../client/mod.ts";
import {
  cancelledInQueueText,
  etaAnchor,
  etaLeft,
  eventLine,
  formatDuration,
  percent,
  PlainProgress,
  queuedAgainText,
  renderBar,
  type StageCount,
  stageCount,
} from "../client/mod.ts";

export { eventLine, percent };

/** The job as `GET /v1/jobs/{id}` returns it (the fields the demo reads). */
export interface JobWire {
  id: string;
  status: string;
  attempt: number;
  max_attempts: number;
  /** When a worker first started the job (ISO time), null before: a job queued again has one. */
  started_at?: string | null;
  error: string | null;
  progress: {
    stage?: string;
    step?: number;
    total_steps?: number;
    eta_s?: number;
    /** Warm-up stages: turns or optimizer steps done and planned (`stageCount` reads them). */
    done?: number;
    total?: number;
    [key: string]: unknown;
  } | null;
  latest_metrics: Record<string, number> | null;
  /** The job's spec with defaults filled in (GET /v1/jobs/{id} answers it). */
  spec?: { eval?: { temperature?: number; episodes?: number } };
}

/** `GET /v1/jobs/{id}/metrics` (JSON). */
export interface MetricsWire {
  names: string[];
  points: { step: number; attempt: number; values: Record<string, number> }[];
}

/** What the progress line shows. */
export interface ProgressState {
  status: string;
  /**
   * A job back in the queue after a run of it started, or cancelled there, in the words of `seed
   * status` (`queued again: run 2 of at most 3`, `cancelled while queued again: …`): shown in
   * place of the bar, as the job's progress is the last run's (or `{stage: "queued"}`).
   */
  queuedText?: string;
  stage?: string;
  step?: number;
  totalSteps?: number;
  /**
   * Server's ETA (s) and when the progress that carries it was first read (ms since epoch), for a
   * local countdown; `etaKey` is that progress as JSON, so that a new write of it (the next stage,
   * even with the same `eta_s`) starts the count again (stage_progress.js `etaAnchor`).
   */
  etaS?: number;
  etaReadAtMs?: number;
  etaKey?: string;
  /** Training-rollout success rate of the latest step, in [0, 1]. */
  successRate?: number;
  /** Distinct skills found so far. */
  skills?: number;
  /**
   * Within a warm-up stage: its own count (`stageCount` of the job's progress: SFT steps or turns
   * done and planned), which the bar shows in place of the updates.
   */
  stageCount?: StageCount;
}

/** Skills found so far: the latest `skill_library_size` when recorded, else Σ `skills_added`. */
export function skillsFound(metrics: MetricsWire): number | undefined {
  const withTotal = metrics.points.filter((p) => typeof p.values.skill_library_size === "number");
  if (withTotal.length > 0) return withTotal[withTotal.length - 1].values.skill_library_size;
  const added = metrics.points.filter((p) => typeof p.values.skills_added === "number");
  if (added.length === 0) return undefined;
  return added.reduce((sum, p) => sum + p.values.skills_added, 0);
}

/** The progress line for `state` at time `nowMs` (ETA counts down between server updates). */
export function progressLine(state: ProgressState, nowMs: number = Date.now()): string {
  if (state.queuedText !== undefined) return state.queuedText;
  let etaS = state.etaS;
  if (etaS !== undefined && state.etaReadAtMs !== undefined && state.status === "running") {
    etaS = etaLeft(etaS, state.etaReadAtMs, nowMs);
  }
  const within = state.stageCount;
  const bar = renderBar({
    status: state.status === "running" ? undefined : state.status,
    stage: state.stage,
    step: within?.done ?? state.step,
    totalSteps: within?.total ?? state.totalSteps,
    label: within?.label,
  });
  const parts = [bar, within?.rest];
  if (state.successRate !== undefined) parts.push(`success ${percent(state.successRate)}`);
  if (state.skills !== undefined) parts.push(`skills ${state.skills}`);
  if (etaS !== undefined && state.status === "running") parts.push(`ETA ${formatDuration(etaS)}`);
  return parts.filter((p) => p).join("  ") || state.status;
}

/**
 * Brings `state` up to `job` as read at `nowMs` (ms since epoch), all but its skills (read from
 * the job's metrics): status, stage, counts, success rate, and the ETA with the start of its count,
 * which a new progress write restarts ({@link ProgressState.etaKey}) and a re-read keeps. A job
 * queued again (or cancelled there) holds the last run's progress and a new run's claim clears it:
 * neither is this run's, so nothing of the last run's count, stage or ETA stays.
 */
export function readJob(state: ProgressState, job: JobWire, nowMs: number): void {
  state.status = job.status;
  const wire = { ...job, started_at: job.started_at ?? null };
  state.queuedText = queuedAgainText(wire) ?? cancelledInQueueText(wire) ?? undefined;
  const p = state.queuedText === undefined ? job.progress : null;
  if (p === null) {
    state.stage =
      state.step =
      state.totalSteps =
      state.etaS =
      state.etaReadAtMs =
      state.etaKey =
        undefined;
  }
  state.stage = p?.stage ?? state.stage;
  state.step = p?.step ?? state.step;
  state.totalSteps = p?.total_steps ?? state.totalSteps;
  state.stageCount = stageCount(p) ?? undefined;
  if (p?.eta_s !== undefined) {
    const last = state.etaKey === undefined || state.etaReadAtMs === undefined
      ? undefined
      : { key: state.etaKey, atMs: state.etaReadAtMs };
    const anchor = etaAnchor(last, p, nowMs);
    state.etaS = p.eta_s;
    state.etaReadAtMs = anchor.atMs;
    state.etaKey = anchor.key;
  }
  const rate = job.latest_metrics?.success_rate;
  if (typeof rate === "number") state.successRate = rate;
}

/**
 * True for a `stage` event of the current stage and a `status` event of the current status
 * without an error: the progress line shows those.
 */
function progressShows(msg: SseMessage, state: ProgressState): boolean {
  let data: Record<string, unknown> | undefined;
  try {
    data = JSON.parse(msg.data)?.data;
  } catch {
    return false;
  }
  if (msg.event === "stage") return data?.stage === state.stage;
  return msg.event === "status" && data?.status === state.status && !data?.error;
}

/** Where progress goes. */
export interface ProgressIo {
  /** True when output is a terminal (redraw one line in place). */
  tty: boolean;
  /** Terminal width: a redrawn line is cut to fit, as a wrapped one could not be redrawn. */
  columns?: number;
  write(text: string): void;
}

/** Options of {@link followJob}. */
export interface FollowOptions {
  io: ProgressIo;
  /** Stops following (the job keeps running). */
  signal?: AbortSignal;
  /**
   * Plain mode: print an unchanged line again after this long (default 13 000 ms; see
   * PlainProgress).
   */
  plainEveryMs?: number;
  /**
   * Re-read the job this often between events (default 3 000 ms): a warm-up stage reports its SFT
   * steps through the job's progress only, with no event for minutes.
   */
  pollMs?: number;
}

/**
 * Follows job `jobId` until its event stream ends (the job is terminal) and returns the final
 * job. Throws the client's `ApiError` on 4xx, or the stream's error after its retries.
 */
export async function followJob(
  client: SeedClient,
  jobId: string,
  options: FollowOptions,
): Promise<JobWire> {
  const { io } = options;
  const path = `/v1/jobs/${encodeURIComponent(jobId)}`;
  const state: ProgressState = { status: "queued" };
  let lastStep: number | undefined;
  let lastStatus: string | undefined;
  let shown = "";
  // A terminal redraws whenever the line changes; plain output prints a line when the status or
  // step changes and otherwise at least every `plainEveryMs` (PlainProgress), even within a stage.
  const plain = new PlainProgress(options.plainEveryMs);
  const draw = (force = false) => {
    const line = progressLine(state);
    if (io.tty) {
      const fit = io.columns && line.length >= io.columns ? line.slice(0, io.columns - 1) : line;
      if (line !== shown || force) io.write(`\r\x1b[2K${fit}`);
      shown = line;
      return;
    }
    // A warm-up stage prints a line per tenth of its SFT steps, besides the periodic one.
    const within = state.stageCount;
    const tenth = within ? Math.floor((10 * within.done) / within.total) : "";
    const out = plain.next(
      { line, key: `${state.status} ${state.step} ${state.stage} ${tenth}`, stage: state.stage },
      Date.now(),
    );
    if (out !== null) io.write(`${out}\n`);
  };
  const refresh = async (): Promise<JobWire> => {
    const job = await client.json<JobWire>(path);
    readJob(state, job, Date.now());
    // A step's metrics (its skill library size) land after its progress, so they are read again
    // when the step or the status changes (the last step's, when the job ends).
    if (state.step !== lastStep || job.status !== lastStatus) {
      lastStep = state.step;
      lastStatus = job.status;
      const metrics = await client.json<MetricsWire>(`${path}/metrics`);
      state.skills = skillsFound(metrics) ?? state.skills;
    }
    return job;
  };
  let job = await refresh();
  draw(true);
  const timer = setInterval(() => draw(), 1000);
  let polling = false;
  const poll = setInterval(() => {
    if (polling) return;
    polling = true;
    refresh().then(() => draw(), () => {}).finally(() => polling = false);
  }, options.pollMs ?? 3000);
  const seenStages = new Set<string>();
  try {
    for await (const msg of client.follow(jobId, { signal: options.signal })) {
      job = await refresh().catch(() => job);
      // Off a terminal the progress line prints at each status and stage change: an event line
      // for the current status or stage would show it twice (earlier ones, replayed, still print).
      let line = eventLine(msg, seenStages);
      if (!io.tty && progressShows(msg, state)) line = null;
      if (line !== null) {
        io.write(io.tty ? `\r\x1b[2K${line}\n` : `${line}\n`);
        if (io.tty) shown = "";
      }
      draw(line !== null);
    }
  } finally {
    clearInterval(timer);
    clearInterval(poll);
  }
  job = await refresh();
  if (io.tty) {
    draw(true);
    io.write("\n");
  } else draw();
  return job;
}

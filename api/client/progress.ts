/**
 * One-line progress bar for terminals: `[########------------] 8/20  rollout  ETA 1m05s` (a job),
 * `[###---------] SFT step 336/1120  warmup_policy  loss 0.412` (a job in a warm-up stage: the
 * stage's own count, see {@link stageCount}), `[####----] 1.2 GiB/3.4 GiB  uploading
 * model.safetensors  ETA 2m10s` (a model upload).
 */

// The warm-up's count and a job queued again (or cancelled there) in words, and the ETA counted
// down between progress writes: one plain-JavaScript copy that the dashboard loads as served.
export {
  cancelledInQueue,
  cancelledInQueueText,
  etaAnchor,
  etaLeft,
  queuedAgain,
  queuedAgainText,
  stageCount,
  stageDetail,
  warmupStep,
} from "../dashboard/static/stage_progress.js";
export type { EtaAnchor, StageCount } from "../dashboard/static/stage_progress.js";

/** Formats seconds as `1h02m`, `3m05s` or `42s`. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600) {
    return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`;
  }
  if (s >= 60) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${s}s`;
}

/** Formats a byte count in binary units: `512 B`, `1.5 KiB`, `29.6 MiB`, `3.2 GiB`. */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = Math.max(0, bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${Math.round(value)} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** What the bar shows; every field optional. */
export interface BarState {
  status?: string;
  stage?: string;
  /** Work done: steps of a job, or bytes of an upload (with `unit: "bytes"`). */
  step?: number;
  totalSteps?: number;
  /** How `step`/`totalSteps` read: plain counts (default) or bytes (`1.2 GiB/3.4 GiB`). */
  unit?: "steps" | "bytes";
  etaS?: number;
  /** How the count reads in place of `step/totalSteps` (`SFT step 8/16`). */
  label?: string;
  /** Where a long stage is (`stageDetail`), shown after the stage. */
  detail?: string;
}

/** Renders the bar (no trailing newline), `width` characters of bar (default 24). */
export function renderBar(state: BarState, width = 24): string {
  const parts: string[] = [];
  if (state.totalSteps && state.totalSteps > 0 && state.step !== undefined) {
    const frac = Math.min(1, Math.max(0, state.step / state.totalSteps));
    const filled = Math.round(frac * width);
    const count = state.label ??
      (state.unit === "bytes"
        ? `${formatBytes(state.step)}/${formatBytes(state.totalSteps)}`
        : `${state.step}/${state.totalSteps}`);
    parts.push(`[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${count}`);
  } else if (state.step !== undefined) {
    parts.push(state.unit === "bytes" ? formatBytes(state.step) : `step ${state.step}`);
  }
  if (state.status) parts.push(state.status);
  if (state.stage) parts.push(state.stage);
  if (state.detail) parts.push(state.detail);
  if (state.etaS !== undefined) parts.push(`ETA ${formatDuration(state.etaS)}`);
  return parts.join("  ");
}

/** What {@link PlainProgress.next} is given at each tick. */
export interface PlainTick {
  /** The progress line as it reads now. */
  line: string;
  /** What counts as news (e.g. status and step): a new key prints at once. */
  key: string;
  /** The current stage, for the time spent in it. */
  stage?: string;
  /**
   * When the current stage started (ms since the epoch), as the server recorded it (the stage
   * event's `created_at`); without it the time counts from when this progress first saw the stage.
   */
  stageSinceMs?: number;
}

/**
 * Progress for output that is not a terminal (CI logs, `| tee`), where a line cannot be redrawn:
 * prints a line when the key changes (status, step) and otherwise again every `everyMs`, with the
 * time spent in the current stage — so a long stage (the warm-up takes minutes) still shows that
 * the job is alive. With a caller that ticks at least every 2 s, the default 13 s gives a line at
 * least every 15 s.
 */
export class PlainProgress {
  #key: string | undefined;
  #shownAtMs = 0;
  #stage: string | undefined;
  #stageSinceMs = 0;

  constructor(readonly everyMs = 13_000) {}

  /** The line to print at `nowMs` (ms), or null when nothing is due. */
  next(tick: PlainTick, nowMs: number): string | null {
    if (tick.stage !== this.#stage) {
      this.#stage = tick.stage;
      this.#stageSinceMs = nowMs;
    }
    if (tick.stageSinceMs !== undefined) this.#stageSinceMs = Math.min(tick.stageSinceMs, nowMs);
    if (tick.key === this.#key && nowMs - this.#shownAtMs < this.everyMs) return null;
    this.#key = tick.key;
    this.#shownAtMs = nowMs;
    const inStage = (nowMs - this.#stageSinceMs) / 1000;
    return tick.stage && inStage >= 1
      ? `${tick.line}  (${formatDuration(inStage)} in ${tick.stage})`
      : tick.line;
  }
}

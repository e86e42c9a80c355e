/**
 * One-line progress bar for terminals: `[########------------] 8/20  rollout  ETA 1m05s`.
 */

/** Formats seconds as `1h02m`, `3m05s` or `42s`. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600) {
    return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`;
  }
  if (s >= 60) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${s}s`;
}

/** What the bar shows; every field optional. */
export interface BarState {
  status?: string;
  stage?: string;
  step?: number;
  totalSteps?: number;
  etaS?: number;
}

/** Renders the bar (no trailing newline), `width` characters of bar (default 24). */
export function renderBar(state: BarState, width = 24): string {
  const parts: string[] = [];
  if (state.totalSteps && state.totalSteps > 0 && state.step !== undefined) {
    const frac = Math.min(1, Math.max(0, state.step / state.totalSteps));
    const filled = Math.round(frac * width);
    parts.push(
      `[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${state.step}/${state.totalSteps}`,
    );
  } else if (state.step !== undefined) parts.push(`step ${state.step}`);
  if (state.status) parts.push(state.status);
  if (state.stage) parts.push(state.stage);
  if (state.etaS !== undefined) parts.push(`ETA ${formatDuration(state.etaS)}`);
  return parts.join("  ");
}

/**
 * A running job's ETA that counts down between its progress writes, on the job list and the job
 * page: {@link etaClock} remembers when the page first saw each job's progress, {@link etaCell}
 * shows `eta_s` less the time since (stage_progress.js `etaLeft`), and {@link countEtasDown}
 * redraws every such ETA under a view about once a second while the page is visible. A new
 * progress value starts the count again from its own `eta_s`.
 */
import { h } from "./dom.js";
import { duration } from "./format.js";
import { etaAnchor, etaLeft } from "./stage_progress.js";

/**
 * When the page first saw each job's current progress (ms since the epoch), the start of its ETA's
 * count (the job JSON carries no time of its progress; stage_progress.js `etaAnchor`). A job whose
 * `progress` is unchanged (a re-read, a list update for another job) keeps its time; a changed one
 * starts at `nowMs`.
 * @returns {(job: {id: string, progress?: unknown}, nowMs: number) => number}
 */
export function etaClock() {
  /** @type {Map<string, import("./stage_progress.js").EtaAnchor>} */
  const seen = new Map();
  return (job, nowMs) => {
    const anchor = etaAnchor(seen.get(job.id), job.progress, nowMs);
    seen.set(job.id, anchor);
    return anchor.atMs;
  };
}

/**
 * A running job's ETA (`3m10s`) as a `span.eta` that {@link countEtasDown} redraws; null for a job
 * not running or without `eta_s`.
 * @param {any} job a job as the API answers it
 * @param {number} readAtMs when its progress was first seen ({@link etaClock})
 * @param {number} [nowMs]
 * @returns {HTMLElement | null}
 */
export function etaCell(job, readAtMs, nowMs = Date.now()) {
  const etaS = job.progress?.eta_s;
  if (job.status !== "running" || typeof etaS !== "number") return null;
  return h(
    "span",
    { class: "eta", dataset: { etaS: String(etaS), readAtMs: String(readAtMs) } },
    duration(etaLeft(etaS, readAtMs, nowMs)),
  );
}

/**
 * Redraws every {@link etaCell} under `root` once a second while the page is visible (a hidden tab
 * skips the work), until `signal` aborts (the view is left).
 * @param {ParentNode} root
 * @param {AbortSignal} signal
 */
export function countEtasDown(root, signal) {
  const tick = setInterval(() => {
    if (document.visibilityState !== "visible") return;
    const nowMs = Date.now();
    for (const el of root.querySelectorAll("span.eta")) {
      const { etaS, readAtMs } = /** @type {HTMLElement} */ (el).dataset;
      el.textContent = duration(etaLeft(Number(etaS), Number(readAtMs), nowMs));
    }
  }, 1000);
  signal.addEventListener("abort", () => clearInterval(tick));
}

/**
 * The ETA of a job's RL updates from the wall time of the updates this run has finished, each
 * counted whole: the update's phases, its evaluation and checkpoint when due, and its commit. It
 * is known from the end of the first update on (the worker's generic clock, workers/worker/eta.ts,
 * waits for a second one), so a job in its RL updates shows an ETA from update 2.
 */
import { estimateEtaSeconds } from "../metrics.ts";

/** Updates averaged at least (metrics.ts `estimateEtaSeconds`' default window). */
const MIN_WINDOW = 5;

/**
 * A run's clock of its updates: {@link start} and {@link finish} bracket each update, and
 * {@link etaS} is the time left, in seconds.
 */
export class UpdateEta {
  readonly #seconds: number[] = [];
  readonly #window: number;
  #current: { step: number; startedMs: number } | undefined;
  #finished = 0;

  /**
   * @param evalEvery the spec's `eval_every`: the updates averaged span at least one evaluation
   *   period (and at least 5), so an update with an evaluation weighs in at its share.
   */
  constructor(evalEvery: number) {
    this.#window = Math.max(MIN_WINDOW, evalEvery);
  }

  /** Update `step` (1-based) starts at `nowMs` (ms). */
  start(step: number, nowMs: number): void {
    this.#current = { step, startedMs: nowMs };
  }

  /** The update started last ends at `nowMs` (ms), its evaluation, checkpoint and commit done. */
  finish(nowMs: number): void {
    if (!this.#current) return;
    this.#seconds.push((nowMs - this.#current.startedMs) / 1000);
    this.#finished = this.#current.step;
    this.#current = undefined;
  }

  /**
   * Seconds left of `totalSteps` updates at `nowMs` (ms): the mean of the last updates' seconds
   * (metrics.ts `estimateEtaSeconds`) times the updates left, less the time the update under way
   * has run (never below the updates after it); undefined until this run has finished an update.
   */
  etaS(totalSteps: number, nowMs: number): number | undefined {
    const done = this.#current ? this.#current.step - 1 : this.#finished;
    if (done >= totalSteps) return 0;
    const full = estimateEtaSeconds({
      completedSteps: done,
      totalSteps,
      stepSeconds: this.#seconds,
      window: this.#window,
    });
    if (full === null) return undefined;
    const perUpdate = full / (totalSteps - done);
    const running = this.#current ? (nowMs - this.#current.startedMs) / 1000 : 0;
    return Math.round(Math.max(full - perUpdate, full - running));
  }
}

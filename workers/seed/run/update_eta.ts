/**
 * The ETA of a job's RL updates: the updates left at the mean wall time of the updates this run
 * has finished (each counted whole, its checkpoint and commit included, its evaluation taken out),
 * plus the evaluations left at the wall time of the last evaluation this run measured. Every
 * evaluation runs the same splits and episodes, so the step-0 evaluation times the final one of a
 * job whose `eval_every` exceeds its `steps`, which no update before it evaluates; evaluations are
 * counted apart, not averaged into the updates, so the last update's ETA holds its evaluation.
 *
 * It is known from the end of the first update on (the worker's generic clock,
 * workers/worker/eta.ts, waits for a second one), so a job in its RL updates shows an ETA from
 * update 2. A zero-step job has no update to time: it shows no ETA until its step-0 evaluation (its
 * last) has run. A resumed run that has not evaluated yet has no evaluation time (its step-0
 * evaluation ran in an earlier run) and counts its evaluations at 0 s until its first one.
 */
import { estimateEtaSeconds } from "../metrics.ts";

/** Updates averaged at least (metrics.ts `estimateEtaSeconds`' default window). */
const MIN_WINDOW = 5;

/**
 * A run's clock of its updates: {@link start} and {@link finish} bracket each update,
 * {@link evaluated} times each evaluation (step 0's and the updates'), and {@link etaS} is the time
 * left, in seconds.
 */
export class UpdateEta {
  readonly #seconds: number[] = [];
  readonly #window: number;
  readonly #evalEvery: number;
  #current: { step: number; startedMs: number; evalS: number } | undefined;
  #finished = 0;
  #evalS: number | undefined;

  /**
   * @param evalEvery the spec's `eval_every` (0: no evaluation but the final one): which updates
   *   evaluate (every `eval_every`-th and the last); the updates averaged span at least one
   *   evaluation period (and at least 5), so a checkpoint every few updates weighs in at its share.
   */
  constructor(evalEvery: number) {
    this.#evalEvery = evalEvery;
    this.#window = Math.max(MIN_WINDOW, evalEvery);
  }

  /** Update `step` (1-based) starts at `nowMs` (ms). */
  start(step: number, nowMs: number): void {
    this.#current = { step, startedMs: nowMs, evalS: 0 };
  }

  /**
   * An evaluation took `seconds` (s): the time of each evaluation left from now on, and, within an
   * update, taken out of that update's time.
   */
  evaluated(seconds: number): void {
    this.#evalS = seconds;
    if (this.#current) this.#current.evalS += seconds;
  }

  /** The update started last ends at `nowMs` (ms), its evaluation, checkpoint and commit done. */
  finish(nowMs: number): void {
    if (!this.#current) return;
    this.#seconds.push((nowMs - this.#current.startedMs) / 1000 - this.#current.evalS);
    this.#finished = this.#current.step;
    this.#current = undefined;
  }

  /**
   * Seconds left of `totalSteps` updates at `nowMs` (ms): the mean of the last updates' seconds
   * without their evaluations (metrics.ts `estimateEtaSeconds`) times the updates left, plus the
   * last evaluation's seconds times the evaluations left, less the time the update under way has
   * run (never below what the updates after it need); undefined until this run has finished an
   * update (a zero-step job: until it has evaluated), 0 after the last.
   */
  etaS(totalSteps: number, nowMs: number): number | undefined {
    const done = this.#current ? this.#current.step - 1 : this.#finished;
    if (done >= totalSteps) return totalSteps === 0 && this.#evalS === undefined ? undefined : 0;
    const updates = estimateEtaSeconds({
      completedSteps: done,
      totalSteps,
      stepSeconds: this.#seconds,
      window: this.#window,
    });
    if (updates === null) return undefined;
    const perUpdate = updates / (totalSteps - done);
    const evalS = this.#evalS ?? 0;
    const full = updates + evalS * this.#evaluations(done, totalSteps);
    const after = perUpdate * (totalSteps - done - 1) +
      evalS * this.#evaluations(done + 1, totalSteps);
    const running = this.#current ? (nowMs - this.#current.startedMs) / 1000 : 0;
    return Math.round(Math.max(after, full - running));
  }

  /**
   * The evaluations of updates `from + 1` to `total` (handler.ts: every `eval_every`-th, the last).
   */
  #evaluations(from: number, total: number): number {
    if (from >= total) return 0;
    const every = this.#evalEvery;
    if (every <= 0) return 1;
    const periodic = Math.floor(total / every) - Math.floor(from / every);
    return periodic + (total % every === 0 ? 0 : 1);
  }
}

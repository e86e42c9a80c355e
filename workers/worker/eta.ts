/**
 * A job's ETA from the pace of its updates. The clock starts when the step counter first moves
 * past the value the run started at (the end of the first update), so the warm-up, a resumed
 * run's loading and the first evaluation — minutes that are not repeated per update — do not
 * inflate every later update's share; evaluations and checkpoints after it are averaged in.
 */
export class StepEta {
  #firstStep: number | undefined;
  #anchor: { step: number; ms: number } | undefined;

  /**
   * Seconds left after `step` of `totalSteps`, as of `nowMs` (ms since the epoch): 0 once the run
   * has moved to the last step, undefined until one full update has been timed (so also in a run
   * that starts at its last step: a zero-step job's warm-up and evaluation, which it cannot time).
   */
  observe(step: number, totalSteps: number, nowMs: number): number | undefined {
    this.#firstStep ??= step;
    if (step >= totalSteps) return step > this.#firstStep ? 0 : undefined;
    if (step <= this.#firstStep) return undefined;
    this.#anchor ??= { step, ms: nowMs };
    const done = step - this.#anchor.step;
    if (done <= 0) return undefined;
    const perStepS = (nowMs - this.#anchor.ms) / 1000 / done;
    return Math.round(perStepS * (totalSteps - step));
  }
}

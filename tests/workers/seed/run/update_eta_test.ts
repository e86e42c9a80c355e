import assert from "node:assert/strict";
import { UpdateEta } from "../../../../workers/seed/run/update_eta.ts";

Deno.test("the ETA is known from the end of the first update and counts down within the next", () => {
  const eta = new UpdateEta(10);
  // Update 1 of 4 runs from 100 s to 130 s (its evaluation and checkpoint included): no ETA yet.
  eta.start(1, 100_000);
  assert.equal(eta.etaS(4, 110_000), undefined);
  eta.finish(130_000);
  // 3 updates left × 30 s.
  assert.equal(eta.etaS(4, 130_000), 90);
  eta.start(2, 130_000);
  assert.equal(eta.etaS(4, 130_000), 90);
  // 12 s into update 2: its 18 s left and 2 × 30 s after it.
  assert.equal(eta.etaS(4, 142_000), 78);
  // An update that overruns leaves at least the updates after it.
  assert.equal(eta.etaS(4, 190_000), 60);
  eta.finish(150_000);
  // The mean of 30 s and 20 s, 2 updates left.
  assert.equal(eta.etaS(4, 150_000), 50);
  eta.start(4, 150_000);
  eta.finish(170_000);
  assert.equal(eta.etaS(4, 170_000), 0);
});

Deno.test("a resumed run counts from its own first update, and the mean spans an evaluation period", () => {
  const eta = new UpdateEta(6);
  eta.start(9, 0);
  assert.equal(eta.etaS(20, 5_000), undefined);
  // Updates 9–14 at 10 s each; update 12 also evaluates for 30 s (40 s in all).
  for (const [i, seconds] of [10, 10, 10, 40, 10, 10].entries()) {
    eta.start(9 + i, i * 1_000_000);
    if (seconds === 40) eta.evaluated(30);
    eta.finish(i * 1_000_000 + seconds * 1000);
  }
  // 6 updates left × 10 s, and the evaluations of updates 18 and 20 (the last) × 30 s.
  assert.equal(eta.etaS(20, 6_000_000), 120);
});

Deno.test("the final evaluation counts at the step-0 evaluation's time when no update before it evaluates", () => {
  // eval_every 10 > steps 3: only update 3 evaluates, after the step-0 evaluation (60 s).
  const eta = new UpdateEta(10);
  eta.evaluated(60);
  eta.start(1, 0);
  eta.finish(10_000);
  // 2 updates × 10 s and the final evaluation.
  assert.equal(eta.etaS(3, 10_000), 80);
  eta.start(2, 10_000);
  eta.finish(20_000);
  eta.start(3, 20_000);
  assert.equal(eta.etaS(3, 20_000), 70);
  // 20 s into the final evaluation, which started when the update's 10 s were done.
  assert.equal(eta.etaS(3, 50_000), 40);
  // It took 70 s; the checkpoint after it: nothing left.
  eta.evaluated(70);
  assert.equal(eta.etaS(3, 100_000), 0);
  eta.finish(101_000);
  // The update's own time is 11 s (its evaluation taken out).
  assert.equal(eta.etaS(3, 101_000), 0);
});

Deno.test("the last update's evaluation is counted whole, not at an evaluation period's share", () => {
  // eval_every 2, steps 4: updates 2 and 4 evaluate (20 s each); updates take 10 s.
  const eta = new UpdateEta(2);
  eta.evaluated(20);
  for (const step of [1, 2, 3]) {
    eta.start(step, step * 100_000);
    if (step === 2) eta.evaluated(20);
    eta.finish(step * 100_000 + (step === 2 ? 30_000 : 10_000));
  }
  eta.start(4, 400_000);
  // Update 4's 10 s and its evaluation's 20 s (the mean of 10, 30 and 10 s said 17 s).
  assert.equal(eta.etaS(4, 400_000), 30);
  assert.equal(eta.etaS(4, 415_000), 15);
});

Deno.test("a zero-step job has no ETA until its step-0 evaluation has run", () => {
  const eta = new UpdateEta(10);
  assert.equal(eta.etaS(0, 0), undefined);
  eta.evaluated(45);
  assert.equal(eta.etaS(0, 45_000), 0);
});

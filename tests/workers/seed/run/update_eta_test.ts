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
  // Updates 9–14 (every 6th evaluates: 40 s, the others 10 s).
  for (const [i, seconds] of [10, 10, 10, 40, 10, 10].entries()) {
    eta.start(9 + i, i * 1_000_000);
    eta.finish(i * 1_000_000 + seconds * 1000);
  }
  // 6 updates left × the mean of all six (15 s), not of the last five (16 s).
  assert.equal(eta.etaS(20, 6_000_000), 90);
});

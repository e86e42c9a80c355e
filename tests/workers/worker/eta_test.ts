import assert from "node:assert/strict";
import { StepEta } from "../../../workers/worker/eta.ts";

Deno.test("the ETA counts updates from the end of the first one, not the warm-up before it", () => {
  const eta = new StepEta();
  // Warm-up and the step-0 evaluation: 600 s at step 0, no ETA yet.
  assert.equal(eta.observe(0, 16, 0), undefined);
  assert.equal(eta.observe(0, 16, 600_000), undefined);
  // Update 1 ends at 620 s: the clock starts there.
  assert.equal(eta.observe(1, 16, 620_000), undefined);
  // Update 2 took 20 s: 14 left × 20 s (the old rule, 640 s / 2 steps × 14, said 4,480 s).
  assert.equal(eta.observe(2, 16, 640_000), 280);
  assert.equal(eta.observe(4, 16, 680_000), 240);
  assert.equal(eta.observe(16, 16, 900_000), 0);
});

Deno.test("a resumed run starts its clock at its own first update", () => {
  const eta = new StepEta();
  assert.equal(eta.observe(8, 16, 0), undefined);
  assert.equal(eta.observe(9, 16, 50_000), undefined);
  assert.equal(eta.observe(10, 16, 60_000), 60);
});

Deno.test("a run that starts at its last step (a zero-step job) has no ETA, not 0", () => {
  const eta = new StepEta();
  // Warm-up and the step-0 evaluation: the run cannot time them.
  assert.equal(eta.observe(0, 0, 0), undefined);
  assert.equal(eta.observe(0, 0, 600_000), undefined);
});

import assert from "node:assert/strict";
import { type LossTokens, pgToken, seedLoss, sigmoid } from "../../../workers/seed/losses.ts";
import { SeedOptionError } from "../../../workers/seed/errors.ts";

function close(actual: number, expected: number, tol = 1e-12) {
  assert.ok(Math.abs(actual - expected) <= tol, `${actual} is not within ${tol} of ${expected}`);
}

const clip = { ratio: 0.2, dual: 3 };

Deno.test("the pg loss follows the unclipped branch inside the trust region", () => {
  const t = pgToken(Math.log(1.1), 0, 1, clip);
  close(t.value, -1.1);
  close(t.grad, -1.1);
  assert.equal(t.clipped, false);
  const neg = pgToken(Math.log(2), 0, -1, clip); // r = 2, A < 0: 2 > 1.2 and below the cap 3
  close(neg.value, 2);
  close(neg.grad, 2);
});

Deno.test("the pg loss is clipped (no gradient) outside the trust region", () => {
  const up = pgToken(0.5, 0, 1, clip); // r = 1.65 > 1.2 with A > 0
  close(up.value, -1.2);
  assert.equal(up.grad, 0);
  assert.equal(up.clipped, true);
  const down = pgToken(Math.log(0.5), 0, -1, clip); // r = 0.5 < 0.8 with A < 0
  close(down.value, 0.8);
  assert.equal(down.grad, 0);
});

Deno.test("the dual clip caps the loss of negative advantages at −c·A", () => {
  const t = pgToken(2, 0, -1, clip); // r = e² ≈ 7.39 would give 7.39
  close(t.value, 3);
  assert.equal(t.grad, 0);
  assert.equal(t.clipped, true);
});

const tokens: LossTokens = {
  logp: [-1.0, -0.5, -2.0, -9.0],
  logpOld: [-1.1, -0.5, -1.0, 0],
  logpTeacher: [-0.8, -0.9, 0, 0],
  logpRef: [-1.2, -0.4, -2.5, 0],
  advantages: [1, 1, -0.5, 0],
  entropy: [0.7, 0.9, 1.1, 5],
  mask: [1, 1, 1, 0],
  teacherMask: [1, 1, 0, 0],
};

Deno.test("the SEED loss and its gradient match a PyTorch autograd reference", () => {
  // Reference: the same formulas in PyTorch 1.13 (float64), gate detached, loss.backward().
  const r = seedLoss(tokens);
  close(r.loss, -0.5683628788544093);
  close(r.pg, -0.5683903060252159);
  close(r.opd, 0.049265273458576966);
  close(r.kl, 0.04347744362208764);
  close(r.entropy, 0.9);
  close(r.gateMean, 0.42513075032606124);
  close(r.teacherGapMean, -0.1);
  close(r.clipFraction, 1 / 3);
  const expected = [-0.3714413680952925, -0.33427991767036275, 0.0013115644676245553, 0];
  expected.forEach((g, i) => close(r.gradLogp[i], g));
});

Deno.test("the gradient without distillation matches finite differences", () => {
  const h = 1e-6;
  const options = { opdCoef: 0 };
  const base = seedLoss(tokens, options);
  for (let i = 0; i < 3; i++) {
    const plus = [...tokens.logp as number[]];
    const minus = [...tokens.logp as number[]];
    plus[i] += h;
    minus[i] -= h;
    const numeric = (seedLoss({ ...tokens, logp: plus }, options).loss -
      seedLoss({ ...tokens, logp: minus }, options).loss) / (2 * h);
    close(base.gradLogp[i], numeric, 1e-8);
  }
});

Deno.test("the gate weighs the distillation gradient by σ(β·Δ) over teacher tokens", () => {
  const r = seedLoss(tokens, { opdCoef: 1, klCoef: 0, entropyCoef: 0 });
  const noOpd = seedLoss(tokens, { opdCoef: 0, klCoef: 0, entropyCoef: 0 });
  close(r.gradLogp[0] - noOpd.gradLogp[0], -sigmoid(5 * 0.2) / 2);
  close(r.gradLogp[1] - noOpd.gradLogp[1], -sigmoid(5 * -0.4) / 2);
  close(r.gradLogp[2] - noOpd.gradLogp[2], 0);
});

Deno.test("without teacher tokens the distillation terms are zero, not NaN", () => {
  const r = seedLoss({ ...tokens, teacherMask: [0, 0, 0, 0] });
  assert.equal(r.opd, 0);
  assert.equal(r.gateMean, 0);
  assert.ok(Number.isFinite(r.loss));
  const empty = seedLoss({ ...tokens, mask: [0, 0, 0, 0] });
  assert.equal(empty.loss, 0);
});

Deno.test("arrays of different lengths are rejected", () => {
  assert.throws(() => seedLoss({ ...tokens, entropy: [1] }), SeedOptionError);
});

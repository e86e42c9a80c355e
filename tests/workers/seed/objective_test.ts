import assert from "node:assert/strict";
import { createSession, gradients, Graph, tensor } from "../../../workers/engine/mod.ts";
import { parameterSpecs, Policy, stepMeans } from "../../../workers/model/mod.ts";
import {
  SEED_COEFFICIENTS,
  SEED_OBJECTIVE,
  SEED_OUTPUTS,
  SEED_TOKEN_INPUTS,
  type SeedCoefficients,
  seedCoefficients,
  seedInputs,
  type SeedSample,
} from "../../../workers/seed/objective.ts";
import { runPlan } from "../../../workers/seed/run_plan.ts";
import { parseJobSpec } from "../../../jobs/mod.ts";
import { lcg } from "../engine/_gradcheck.ts";
import { randomParameters, TINY_LLAMA } from "../model/_tiny.ts";
import { oracle, type OracleTokens, sigmoid, SPEC_COEFFICIENTS } from "./_objective_oracle.ts";
import { tinySpec } from "./_jobs.ts";

// Nine tokens: A>0 clipped above (t0), A>0 below the trust region, unclipped (t1), A<0 clipped
// below (t2), A<0 dual-clipped (t3), inside the trust region (t4), a masked-out token (t5), a
// token without teacher signal (t6), a token 30 nats below ℓref (t7, KL gap bound) and one 3.5
// nats below (t8, k3 ≈ 29.6 > the token bound 10).
const TOK: { [K in keyof OracleTokens]: number[] } = {
  logp: [-1.0, -2.0, -2.0, 0.0, -1.4, -9, -1.2, -3, -2],
  entropy: [0.7, 1.1, 0.3, 0.9, 1.5, 4, 0.8, 1.0, 0.6],
  mask: [1, 1, 1, 1, 1, 0, 1, 1, 1],
  advantages: [1, 1, -1, -1, -0.5, 5, 0.3, 0, -0.2],
  old_logprobs: [-1.5, -1.5, -1.5, -1.5, -1.5, 0, -1.2, -3, -2],
  teacher_logprobs: [-0.5, -2.5, -1.0, -0.2, -3.0, 0, 0, -2.0, -2.6],
  ref_logprobs: [-1.2, -1.9, -2.5, -0.3, -1.0, 0, -1.0, 27, 1.5],
  opd_mask: [1, 1, 1, 1, 1, 1, 0, 1, 0],
};
/** The JobSpec defaults, with λ_opd and the KL weight raised so both terms show. */
const COEF: SeedCoefficients = { ...SPEC_COEFFICIENTS, opd_coef: 0.3, kl_coef: 0.02 };

/** The SEED objective's graph on `t` in float64: every output by name and d loss / d ℓθ. */
async function byGraph(t: OracleTokens, c: SeedCoefficients) {
  const g = new Graph("seed", "float64");
  const n = t.mask.length;
  const logp = g.input("logp", [n], { requiresGrad: true });
  const inputs = Object.fromEntries([
    ...SEED_TOKEN_INPUTS.map((k) => [k, g.input(k, [n])]),
    ...[...SEED_COEFFICIENTS, "response_tokens", "teacher_tokens"].map((k) => [k, g.input(k, [])]),
  ]);
  const out = SEED_OBJECTIVE.build(g, {
    logp,
    entropy: g.input("entropy", [n]),
    mask: g.input("mask", [n]),
  }, inputs);
  for (const k of Object.keys(SEED_OUTPUTS)) g.output(out[k as keyof typeof out], `out.${k}`);
  g.output(gradients(g, out.loss, [logp])[0], "dlogp");
  const s = await createSession(g.toModel());
  let tokens = 0, teacher = 0;
  for (let i = 0; i < n; i++) if (t.mask[i]) (tokens++, t.opd_mask[i] && teacher++);
  const scalars = {
    ...c,
    response_tokens: Math.max(1, tokens),
    teacher_tokens: Math.max(1, teacher),
  };
  const r = await s.run(Object.fromEntries([
    ...Object.entries(t).map(([k, v]) => [k, tensor("float64", Float64Array.from(v), [n])]),
    ...Object.entries(scalars).map(([k, v]) => [k, tensor("float64", Float64Array.of(v), [])]),
  ]));
  await s.release();
  const terms: Record<string, number> = {};
  for (const k of Object.keys(SEED_OUTPUTS)) terms[k] = Number(r[`out.${k}`].data[0]);
  return { terms, dlogp: Array.from(r.dlogp.data as Float64Array) };
}

function assertMatchesOracle(
  t: OracleTokens,
  c: SeedCoefficients,
  got: Awaited<ReturnType<typeof byGraph>>,
) {
  const want = oracle(t, c);
  for (const k of Object.keys(SEED_OUTPUTS) as (keyof typeof SEED_OUTPUTS)[]) {
    assert.ok(
      Math.abs(got.terms[k] - want[k]) < 1e-12,
      `${k}: graph ${got.terms[k]} vs oracle ${want[k]}`,
    );
  }
  got.dlogp.forEach((d, i) =>
    assert.ok(
      Math.abs(d - want.gradLogp[i]) < 1e-12,
      `d loss/d ℓθ[${i}]: graph ${d} vs oracle ${want.gradLogp[i]}`,
    )
  );
  return want;
}

Deno.test("the SEED graph's terms and d loss/d ℓθ equal the hand oracle across clips, the gate, masks and the KL bounds", async () => {
  const want = assertMatchesOracle(TOK, COEF, await byGraph(TOK, COEF));
  // The data covers what it claims to: 8 response tokens, 6 of them with a teacher signal.
  assert.equal(want.clip_frac, 2 / 8, "t0 and t2 take the ε-clipped branch");
  assert.equal(want.dual_clip_frac, 1 / 8, "t3 is capped by the dual clip");
  assert.equal(want.gradLogp[5], 0, "the masked token has no gradient");
  assert.equal(
    want.gradLogp[7],
    COEF.opd_coef * -sigmoid(5 * 1) / 6,
    "t7: no KL gradient past the gap bound",
  );
  // t8: k3 = e^3.5 − 4.5 ≈ 28.6 is capped at 10 and has no KL gradient either; what is left is
  // the unclipped pg term −r·A/N with r = 1 (no teacher signal).
  assert.ok(Math.abs(want.gradLogp[8] - 0.2 / 8) < 1e-15);
  assert.ok(
    Math.abs(want.kl_loss * 8 - 20 - sumK3([0, 1, 2, 3, 4, 6])) < 1e-12,
    "t7 and t8 add 10 each",
  );
});

/** Σ of unbounded k3 over `idx`. */
function sumK3(idx: number[]) {
  return idx.reduce((n, i) => {
    const x = TOK.ref_logprobs[i] - TOK.logp[i];
    return n + Math.exp(x) - x - 1;
  }, 0);
}

Deno.test("L_opd is a token mean over the tokens with a teacher signal, not over all response tokens", async () => {
  const { terms } = await byGraph(TOK, COEF);
  let sum = 0, n = 0;
  for (let i = 0; i < 9; i++) {
    if (!TOK.mask[i] || !TOK.opd_mask[i]) continue;
    const gap = TOK.teacher_logprobs[i] - TOK.logp[i];
    (sum += sigmoid(5 * gap) * gap), n++;
  }
  assert.equal(n, 6);
  assert.ok(Math.abs(terms.opd_loss - sum / 6) < 1e-12, `${terms.opd_loss} vs ${sum / 6}`);
  assert.ok(Math.abs(terms.opd_loss - sum / 8) > 1e-3, "not the mean over all 8 response tokens");
});

Deno.test("the SEED graph matches a PyTorch autograd reference", async () => {
  // PyTorch 1.13 float64, gate detached, loss.backward(); L_opd over teacher tokens; every
  // token inside the KL bounds. Coefficients are the JobSpec defaults.
  const t: OracleTokens = {
    logp: [-1.0, -0.5, -2.0, -9.0],
    old_logprobs: [-1.1, -0.5, -1.0, 0],
    teacher_logprobs: [-0.8, -0.9, 0, 0],
    ref_logprobs: [-1.2, -0.4, -2.5, 0],
    advantages: [1, 1, -0.5, 0],
    entropy: [0.7, 0.9, 1.1, 5],
    mask: [1, 1, 1, 0],
    opd_mask: [1, 1, 0, 0],
  };
  const spec = parseJobSpec(tinySpec({}));
  const c = seedCoefficients(spec, runPlan(spec));
  const want = { clip_ratio: 0.2, dual_clip: 3, gate_beta: 5, opd_coef: 0.01, kl_coef: 0.01 };
  for (const [k, v] of Object.entries({ ...want, entropy_coef: 0.001 })) {
    assert.equal(c[k as keyof typeof c], v, k);
  }
  const { terms, dlogp } = await byGraph(t, c);
  const close = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-12, `${a} vs ${b}`);
  close(terms.loss, -0.5683628788544093);
  close(terms.pg_loss, -0.5683903060252159);
  close(terms.opd_loss, 0.049265273458576966);
  close(terms.kl_loss, 0.04347744362208764);
  close(terms.entropy, 0.9);
  close(terms.gate_mean, 0.42513075032606124);
  close(terms.delta_mean, -0.1);
  close(terms.clip_frac, 1 / 3);
  [-0.3714413680952925, -0.33427991767036275, 0.0013115644676245553, 0].forEach((g, i) =>
    close(dlogp[i], g)
  );
});

Deno.test("GRPO is the SEED graph with opd_coef 0: the loss drops exactly the λ·L_opd term", async () => {
  const seed = await byGraph(TOK, COEF);
  const grpo = await byGraph(TOK, { ...COEF, opd_coef: 0 });
  assertMatchesOracle(TOK, { ...COEF, opd_coef: 0 }, grpo);
  assert.ok(
    Math.abs(grpo.terms.loss - (seed.terms.loss - COEF.opd_coef * seed.terms.opd_loss)) < 1e-12,
  );
});

Deno.test("the distillation term alone pushes ℓθ up toward ℓT with gradient −λ·g/N_T per teacher token", async () => {
  const t = { ...TOK, advantages: TOK.advantages.map(() => 0) };
  const c = { ...COEF, kl_coef: 0, entropy_coef: 0, opd_coef: 0.5 };
  const got = await byGraph(t, c);
  assertMatchesOracle(t, c, got);
  for (let i = 0; i < 9; i++) {
    const g = sigmoid(5 * (TOK.teacher_logprobs[i] - TOK.logp[i]));
    const want = TOK.mask[i] && TOK.opd_mask[i] ? -0.5 * g / 6 : 0;
    assert.ok(Math.abs(got.dlogp[i] - want) < 1e-12, `token ${i}: ${got.dlogp[i]} vs ${want}`);
    if (want !== 0) assert.ok(got.dlogp[i] < 0, "descent raises ℓθ");
  }
});

Deno.test("without teacher tokens the distillation outputs are 0, not NaN", async () => {
  const t = { ...TOK, opd_mask: TOK.opd_mask.map(() => 0) };
  const got = await byGraph(t, COEF);
  assertMatchesOracle(t, COEF, got);
  assert.equal(got.terms.opd_loss, 0);
  assert.equal(got.terms.gate_mean, 0);
  assert.ok(Number.isFinite(got.terms.loss));
});

Deno.test("the SEED objective declares the terms its loss adds up as loss terms, the rest as statistics", () => {
  const kinds = Object.fromEntries(Object.entries(SEED_OUTPUTS).map(([k, o]) => [k, o.kind]));
  assert.deepEqual(kinds, {
    loss: "loss",
    pg_loss: "loss",
    opd_loss: "loss",
    kl_loss: "loss",
    // The loss adds −entropy_coef·H: the mean entropy itself is a figure, as in verl.
    entropy: "statistic",
    clip_frac: "statistic",
    dual_clip_frac: "statistic",
    gate_mean: "statistic",
    delta_mean: "statistic",
  });
});

Deno.test("a step without teacher tokens reports opd_loss 0 and leaves the teacher statistics out", async () => {
  const t = { ...TOK, opd_mask: TOK.opd_mask.map(() => 0) };
  const got = await byGraph(t, COEF);
  // The step as one train call: the trainer's sums are output·count, its counts the true ones.
  const counts = { response_tokens: 8, teacher_tokens: 0 };
  const sums = Object.fromEntries(
    Object.entries(SEED_OUTPUTS).map(([k, o]) => [k, got.terms[k] * counts[o.over]]),
  );
  const means = stepMeans(SEED_OUTPUTS, sums, counts);
  assert.deepEqual(Object.keys(means).sort(), [
    "clip_frac",
    "dual_clip_frac",
    "entropy",
    "kl_loss",
    "loss",
    "opd_loss",
    "pg_loss",
  ]);
  assert.equal(means.opd_loss, 0);
  for (const k of ["loss", "pg_loss", "kl_loss", "entropy", "clip_frac"] as const) {
    assert.ok(Math.abs(means[k]! - got.terms[k]) < 1e-12, `${k}: ${means[k]} vs ${got.terms[k]}`);
  }
  assert.ok(means.pg_loss !== 0 && means.kl_loss! > 0, "the response-token terms are real means");
});

function seedSamples(): SeedSample[] {
  const rnd = lcg(5);
  const ids: [number[], number[]][] = [
    [[1, 5, 9, 3], [7, 7, 2]],
    [[1, 4], [8, 10, 6, 5, 5, 3, 2, 9, 9, 1, 4, 4, 6]],
    [[1, 3, 3, 3, 3, 3, 3, 3], [2]],
    [[1], [9, 8]],
    [[1, 6, 2], [4, 4, 5, 7]],
  ];
  return ids.map(([prompt, response], i) => ({
    prompt,
    response,
    inputs: seedInputs({
      advantages: i % 2 === 0 ? 1.2 : -0.7,
      old_logprobs: Float32Array.from(response, () => -2.4 + rnd() - 0.5),
      ref_logprobs: Float32Array.from(response, () => -2.4 + rnd() - 0.5),
      teacher_logprobs: i === 1 || i === 4 ? null : Float32Array.from(response, () => -3 * rnd()),
    }),
  }));
}

Deno.test("a mini-batch split over several calls gives the loss, every output and the gradients of one call", async () => {
  const params = randomParameters(TINY_LLAMA, 2);
  const whole = new Policy(TINY_LLAMA, params, { maxTokensPerCall: 1 << 16 });
  const split = new Policy(TINY_LLAMA, params, { maxTokensPerCall: 16 });
  const a = await whole.trainStep(SEED_OBJECTIVE, seedSamples(), COEF);
  const b = await split.trainStep(SEED_OBJECTIVE, seedSamples(), COEF);
  assert.ok(split.sessions.size > whole.sessions.size, "the split step ran in several buckets");
  assert.deepEqual(a.counts, { response_tokens: 3 + 13 + 1 + 2 + 4, teacher_tokens: 3 + 1 + 2 });
  for (const k of Object.keys(SEED_OUTPUTS) as (keyof typeof SEED_OUTPUTS)[]) {
    assert.ok(
      Math.abs(a.outputs[k] - b.outputs[k]) < 1e-5,
      `${k}: ${a.outputs[k]} vs ${b.outputs[k]}`,
    );
  }
  for (const s of parameterSpecs(TINY_LLAMA)) {
    const ga = a.grads.get(s.name)!, gb = b.grads.get(s.name)!;
    const scale = Math.max(1e-3, ...Array.from(ga, Math.abs));
    const diff = ga.reduce((m, x, i) => Math.max(m, Math.abs(x - gb[i])), 0);
    assert.ok(diff / scale < 1e-4, s.name);
  }
  // The step's outputs are the oracle's on the policy's own ℓθ and H (float32 tolerance).
  const scored = await whole.score(seedSamples());
  const flat = (f: (s: SeedSample, i: number) => ArrayLike<number> | number) =>
    seedSamples().flatMap((s, i) => {
      const v = f(s, i);
      return typeof v === "number" ? s.response.map(() => v) : Array.from(v);
    });
  const tokens: OracleTokens = {
    logp: flat((_, i) => scored.logprobs[i]),
    entropy: flat((_, i) => scored.entropy[i]),
    mask: flat(() => 1),
    ...Object.fromEntries(SEED_TOKEN_INPUTS.map((k) => [k, flat((s) => s.inputs[k])])),
  } as unknown as OracleTokens;
  const want = oracle(tokens, COEF);
  for (const k of Object.keys(SEED_OUTPUTS) as (keyof typeof SEED_OUTPUTS)[]) {
    assert.ok(
      Math.abs(b.outputs[k] - want[k]) < 1e-4,
      `${k}: split ${b.outputs[k]} vs oracle ${want[k]}`,
    );
  }
  await whole.release();
  await split.release();
});

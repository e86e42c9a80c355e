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
// token without teacher signal (t6), a token 30 nats below ℓref (t7, past the exp cap of 20) and
// one 3.5 nats below (t8, k3 ≈ 29.6 > the clamp 10).
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

/** Per-token divisors (n,) of the counts, as the policy feeds them (model objective.ts). */
type Divisors = { response_tokens: number[]; teacher_tokens: number[] };

/**
 * The SEED objective's graph on `t` in float64: every output by name and d loss / d ℓθ. The
 * counts are scalars over all of `t`, or per-token `divisors` when given.
 */
async function byGraph(t: OracleTokens, c: SeedCoefficients, divisors?: Divisors) {
  const g = new Graph("seed", "float64");
  const n = t.mask.length;
  const logp = g.input("logp", [n], { requiresGrad: true });
  const counts = ["response_tokens", "teacher_tokens"];
  const inputs = Object.fromEntries([
    ...SEED_TOKEN_INPUTS.map((k) => [k, g.input(k, [n])]),
    ...SEED_COEFFICIENTS.map((k) => [k, g.input(k, [])]),
    ...counts.map((k) => [k, g.input(k, divisors ? [n] : [])]),
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
    ...(divisors ? {} : {
      response_tokens: Math.max(1, tokens),
      teacher_tokens: Math.max(1, teacher),
    }),
  };
  const r = await s.run(Object.fromEntries([
    ...Object.entries({ ...t, ...divisors }).map((
      [k, v],
    ) => [k, tensor("float64", Float64Array.from(v), [n])]),
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
    "t7: no KL gradient past the clamp",
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
  // token inside the KL bounds. Coefficients are the JobSpec defaults with an entropy bonus of
  // 0.001 (the reference was computed with it; the default is 0).
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
  const spec = parseJobSpec(
    tinySpec({ optim: { mini_batch_size: 8, lr: 1e-3, entropy_coef: 1e-3 } }),
  );
  const c = seedCoefficients(spec, runPlan(spec));
  const want = {
    clip_ratio_low: 0.2,
    clip_ratio_high: 0.2,
    dual_clip: 3,
    gate_beta: 5,
    opd_coef: 0.01,
    kl_coef: 0.01,
  };
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

/**
 * Six samples (turns) in three micro-batches of two, of 4, 7 and 2 response tokens; teacher
 * signal on samples 0, 4 and 5 (none in the middle micro-batch). Flat over samples × tokens.
 */
const MICRO = (() => {
  const lengths = [3, 1, 4, 3, 1, 1];
  const teacher = [1, 0, 0, 0, 1, 1];
  const adv = [1.0, -0.7, 0.4, -1.2, 2.0, -0.3];
  const rows: { [K in keyof OracleTokens]: number[][] } = {
    logp: [[-1.0, -2.0, -0.3], [-0.2], [-1.4, -2.6, -0.8, -3.1], [-0.5, -1.9, -2.2], [-0.05], [
      -4.0,
    ]],
    old_logprobs: [[-1.5, -1.6, -0.4], [-0.9], [-1.3, -2.6, -1.2, -2.0], [-0.4, -2.3, -2.2], [
      -0.6,
    ], [-4.4]],
    ref_logprobs: [[-1.2, -2.2, -0.1], [-0.5], [-1.0, -2.9, -0.9, -2.5], [-0.3, 1.0, -2.0], [
      -0.1,
    ], [-3.0]],
    teacher_logprobs: [[-0.5, -2.5, -0.2], [0], [0, 0, 0, 0], [0, 0, 0], [-0.3], [-2.0]],
    entropy: [[0.7, 1.1, 0.3], [0.9], [1.5, 0.8, 1.0, 0.6], [0.4, 1.2, 0.9], [0.2], [2.1]],
    mask: lengths.map((n) => new Array(n).fill(1)),
    advantages: lengths.map((n, i) => new Array(n).fill(adv[i])),
    opd_mask: lengths.map((n, i) => new Array(n).fill(teacher[i])),
  };
  const flat = Object.fromEntries(
    Object.entries(rows).map(([k, v]) => [k, v.flat()]),
  ) as unknown as OracleTokens;
  const micro = [[0, 1], [2, 3], [4, 5]];
  const slice = (batch: number[]) =>
    Object.fromEntries(
      Object.entries(rows).map(([k, v]) => [k, batch.flatMap((i) => v[i])]),
    ) as unknown as OracleTokens;
  return { lengths, teacher, flat, micro, slice };
})();
/**
 * Coefficients of the micro-batch case: ε_high ≠ ε_low, λ_opd and the KL weight raised, and an
 * entropy bonus of 0.001 (the PyTorch reference below was computed with it).
 */
const MICRO_COEF: SeedCoefficients = {
  ...SPEC_COEFFICIENTS,
  entropy_coef: 0.001,
  clip_ratio_low: 0.2,
  clip_ratio_high: 0.28,
  opd_coef: 0.3,
  kl_coef: 0.02,
};

Deno.test("with micro-batches of 4, 7 and 2 tokens the loss is the mean of their token-mean losses, as the reference code's gradient accumulation", async () => {
  // Each token's divisor is M·N_m (M = 3 micro-batches; N_m its micro-batch's response or
  // teacher tokens, at least 1): what Policy.trainStep feeds for these micro-batches.
  const { lengths, teacher, micro } = MICRO;
  const divisors: Divisors = { response_tokens: [], teacher_tokens: [] };
  for (const batch of micro) {
    const n = batch.reduce((k, i) => k + lengths[i], 0);
    const nt = batch.reduce((k, i) => k + lengths[i] * teacher[i], 0);
    for (const i of batch) {
      for (let k = 0; k < lengths[i]; k++) {
        divisors.response_tokens.push(3 * n);
        divisors.teacher_tokens.push(3 * Math.max(1, nt));
      }
    }
  }
  assert.deepEqual([...new Set(divisors.response_tokens)], [12, 21, 6]);
  assert.deepEqual([...new Set(divisors.teacher_tokens)], [9, 3, 6]);
  const got = await byGraph(MICRO.flat, MICRO_COEF, divisors);
  // The hand oracle on each micro-batch, averaged.
  const parts = micro.map((b) => oracle(MICRO.slice(b), MICRO_COEF));
  const mean = (f: (r: (typeof parts)[number]) => number) =>
    parts.reduce((n, r) => n + f(r), 0) / 3;
  for (const k of ["loss", "pg_loss", "opd_loss", "kl_loss", "entropy"] as const) {
    assert.ok(Math.abs(got.terms[k] - mean((r) => r[k])) < 1e-12, `${k}`);
  }
  const gradByHand = micro.flatMap((_, m) => Array.from(parts[m].gradLogp, (d) => d / 3));
  got.dlogp.forEach((d, i) => assert.ok(Math.abs(d - gradByHand[i]) < 1e-12, `token ${i}`));
  // The authors' code (verl dp_actor.py update_policy at 2cf2fad: per micro-batch
  // compute_policy_loss, agg_loss of the entropy, compute_opd_loss and low_var_kl, all
  // "token-mean", loss / gradient_accumulation, backward) in PyTorch 1.13 float64, ℓθ a leaf.
  // Its masked_mean divides by N + 1e-8, hence the 1e-8 tolerance.
  const torch = {
    loss: -0.23718166421122455,
    micro: [-0.36307882861844015, 0.41007988958280805, -0.7585460535980415],
    grad: [
      [-0.030502611819161383, -0.05808649427815128, -0.11321522517630413],
      [0.11790087727322272],
      [-0.017703402887433675, -0.018800779230933855, 9.063103031247029e-05, -0.007123371870159088],
      [0.051494135473101145, 0.08524712545771954, 0.05693199729184936],
      [-0.010972438301405629],
      [0.018865898586305697],
    ].flat(),
    whole: 0.07840088791566877,
  };
  assert.ok(Math.abs(got.terms.loss - torch.loss) < 1e-8, `${got.terms.loss} vs ${torch.loss}`);
  parts.forEach((r, m) => assert.ok(Math.abs(r.loss - torch.micro[m]) < 1e-8, `micro ${m}`));
  got.dlogp.forEach((d, i) => assert.ok(Math.abs(d - torch.grad[i]) < 1e-8, `token ${i}`));
  // One token mean over the whole mini-batch (`token_mean`) is another loss.
  const whole = await byGraph(MICRO.flat, MICRO_COEF);
  assert.ok(Math.abs(whole.terms.loss - torch.whole) < 1e-8);
  assert.ok(Math.abs(whole.terms.loss - got.terms.loss) > 0.3);
  // The middle micro-batch has no teacher token: it adds 0 to L_opd's mean over micro-batches.
  assert.ok(Math.abs(got.terms.opd_loss - (parts[0].opd_loss + parts[2].opd_loss) / 3) < 1e-12);
});

Deno.test("a train step's micro-batches give the mean of separate steps, however the policy packs its calls", async () => {
  const params = randomParameters(TINY_LLAMA, 4);
  const samples = seedSamples();
  const micro = [[0, 1], [2], [3, 4]];
  const whole = new Policy(TINY_LLAMA, params, { maxTokensPerCall: 1 << 16 });
  const split = new Policy(TINY_LLAMA, params, { maxTokensPerCall: 16 });
  const a = await whole.trainStep(SEED_OBJECTIVE, samples, COEF, { microBatches: micro });
  const b = await split.trainStep(SEED_OBJECTIVE, samples, COEF, { microBatches: micro });
  const parts = await Promise.all(
    micro.map((m) => whole.trainStep(SEED_OBJECTIVE, m.map((i) => samples[i]), COEF)),
  );
  assert.deepEqual(a.counts, { response_tokens: 3 + 13 + 1 + 2 + 4, teacher_tokens: 3 + 1 + 2 });
  for (const k of Object.keys(SEED_OUTPUTS) as (keyof typeof SEED_OUTPUTS)[]) {
    const mean = parts.reduce((n, p) => n + p.outputs[k], 0) / 3;
    assert.ok(Math.abs(a.outputs[k] - mean) < 1e-5, `${k}: ${a.outputs[k]} vs ${mean}`);
    assert.ok(Math.abs(b.outputs[k] - mean) < 1e-5, `${k} (split): ${b.outputs[k]} vs ${mean}`);
  }
  for (const s of parameterSpecs(TINY_LLAMA)) {
    const ga = a.grads.get(s.name)!, gb = b.grads.get(s.name)!;
    const mean = ga.map((_, i) => parts.reduce((n, p) => n + p.grads.get(s.name)![i], 0) / 3);
    const scale = Math.max(1e-3, ...Array.from(mean, Math.abs));
    const diff = (g: Float32Array) => g.reduce((m, x, i) => Math.max(m, Math.abs(x - mean[i])), 0);
    assert.ok(diff(ga) / scale < 1e-4 && diff(gb) / scale < 1e-4, s.name);
  }
  // One micro-batch of all samples is the default: a token mean over the step.
  const one = await whole.trainStep(SEED_OBJECTIVE, samples, COEF, {
    microBatches: [[0, 1, 2, 3, 4]],
  });
  const plain = await whole.trainStep(SEED_OBJECTIVE, samples, COEF);
  assert.ok(Math.abs(one.outputs.loss - plain.outputs.loss) < 1e-6);
  assert.ok(Math.abs(one.outputs.loss - a.outputs.loss) > 1e-3, "micro-batching changes the loss");
  await assert.rejects(
    () => whole.trainStep(SEED_OBJECTIVE, samples, COEF, { microBatches: [[0, 1], [1, 2, 3, 4]] }),
    /micro-batch 1 must hold sample indices in \[0, 5\), each in one micro-batch: current value is 1/,
  );
  await assert.rejects(
    () => whole.trainStep(SEED_OBJECTIVE, samples, COEF, { microBatches: [[0, 1], [2, 3]] }),
    /1 of 5 are in none/,
  );
  await whole.release();
  await split.release();
});

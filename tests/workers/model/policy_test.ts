import assert from "node:assert/strict";
import { type DecoderConfig, parameterSpecs } from "../../../workers/model/config.ts";
import { AdamW, clipGradNorm } from "../../../workers/model/optim.ts";
import { Policy, PolicyError } from "../../../workers/model/policy.ts";
import { TOKEN_NLL } from "../../../workers/model/objective.ts";
import {
  SEED_OBJECTIVE,
  type SeedCoefficients,
  seedInputs,
  type SeedSample,
} from "../../../workers/seed/objective.ts";
import type { Sample } from "../../../workers/model/batch.ts";
import { lcg } from "../engine/_gradcheck.ts";
import { SPEC_COEFFICIENTS } from "../seed/_objective_oracle.ts";
import { randomParameters, TINY_LLAMA, TINY_QWEN } from "./_tiny.ts";
import { CountingSessions } from "./_sessions.ts";
import { LORA_MODULES, type LoraConfig, loraParameterSpecs } from "../../../workers/model/lora.ts";

const maxAbsDiff = (a: Float32Array, b: Float32Array) =>
  a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

const TARGET: Sample = { prompt: [1, 5, 9, 3], response: [7, 7, 2] };
const OTHERS: Sample[] = [
  { prompt: [1, 4], response: [8, 10, 6, 5, 5, 3, 2, 9, 9, 1, 4, 4, 6] },
  { prompt: [1, 3, 3, 3, 3, 3, 3, 3], response: [2] },
  { prompt: [1], response: [9, 8] },
];

for (const c of [TINY_LLAMA, TINY_QWEN]) {
  Deno.test(`a sequence's log-probs do not depend on its batch or bucket (${c.architecture})`, async () => {
    const policy = new Policy(c, randomParameters(c, 2));
    const alone = await policy.score([TARGET]);
    const mixed = await policy.score([OTHERS[0], TARGET, OTHERS[1], OTHERS[2]]);
    assert.ok(maxAbsDiff(alone.logprobs[0], mixed.logprobs[1]) < 1e-5);
    assert.ok(maxAbsDiff(alone.entropy[0], mixed.entropy[1]) < 1e-5);
    assert.equal(mixed.logprobs[0].length, OTHERS[0].response.length);
    await policy.release();
  });
}

/**
 * Samples whose prompts share prefixes: a group of three sharing 6 tokens (then diverging), a
 * pair whose shorter prompt is the longer one's prefix (shared prefix capped at 4 = its length
 * − 1), a one-token prompt (nothing to share) and a sample in no group.
 */
function prefixedSamples(vocab: number): { samples: Sample[]; groups: number[][] } {
  const rnd = lcg(11);
  const ids = (n: number) => Array.from({ length: n }, () => 1 + Math.floor(rnd() * (vocab - 1)));
  const shared = ids(6), pair = ids(5);
  const samples: Sample[] = [
    { prompt: [...shared, ...ids(3)], response: ids(4) },
    { prompt: [...shared, ...ids(7)], response: ids(2) },
    { prompt: [...pair], response: ids(3) },
    { prompt: [...shared, ...ids(1)], response: ids(5) },
    { prompt: [...pair, ...ids(4)], response: ids(1) },
    { prompt: ids(1), response: ids(3) },
    { prompt: ids(9), response: ids(2) },
  ];
  return { samples, groups: [[0, 1, 3], [2, 4], [5]] };
}

for (const c of [TINY_LLAMA, TINY_QWEN]) {
  Deno.test(`scoring with shared prompt prefixes gives score's log-probs and entropies (${c.architecture})`, async () => {
    const { samples, groups } = prefixedSamples(c.vocab_size);
    // 16 tokens per train call (48 per forward call) forces several prefill and suffix calls;
    // a 1-byte cache budget one round per group.
    for (const maxTokensPerCall of [16, 1 << 12]) {
      const policy = new Policy(c, randomParameters(c, 3), { maxTokensPerCall });
      const whole = await policy.score(samples);
      for (const cacheBytes of [undefined, 1]) {
        const shared = await policy.scoreSharedPrefixes(samples, groups, { cacheBytes });
        samples.forEach((s, i) => {
          const at = `sample ${i}, ${maxTokensPerCall} tokens per call, ${cacheBytes} bytes`;
          assert.equal(shared.logprobs[i].length, s.response.length, at);
          assert.ok(maxAbsDiff(whole.logprobs[i], shared.logprobs[i]) < 1e-5, at);
          assert.ok(maxAbsDiff(whole.entropy[i], shared.entropy[i]) < 1e-5, at);
        });
      }
      await policy.release();
    }
  });
}

Deno.test("equal samples are scored once and each gets its own copy of the same values", async () => {
  const c = TINY_LLAMA;
  const { samples, groups } = prefixedSamples(c.vocab_size);
  // samples 0, 2 and 5 again (7, 8, 9), the first two inside their twins' shared-prefix groups
  const repeated = [...samples, samples[0], samples[2], samples[5]].map((s) => ({
    prompt: [...s.prompt],
    response: [...s.response],
  }));
  const repeatedGroups = [[...groups[0], 7], [...groups[1], 8], groups[2], [9]];
  for (const shared of [false, true]) {
    const count = (sessions: CountingSessions) => sessions.rows;
    const once = new CountingSessions(), twice = new CountingSessions();
    const a = new Policy(c, randomParameters(c, 3), { sessions: once });
    const b = a.withParameters(a.params);
    const distinct = shared ? await a.scoreSharedPrefixes(samples, groups) : await a.score(samples);
    const all = shared
      ? await new Policy(c, a.params, { sessions: twice }).scoreSharedPrefixes(
        repeated,
        repeatedGroups,
      )
      : await new Policy(c, a.params, { sessions: twice }).score(repeated);
    assert.equal(count(twice), count(once), `rows fed (shared prefixes: ${shared})`);
    [0, 1, 2, 3, 4, 5, 6, 0, 2, 5].forEach((src, i) => {
      assert.deepEqual(all.logprobs[i], distinct.logprobs[src], `sample ${i}`);
      assert.deepEqual(all.entropy[i], distinct.entropy[src], `sample ${i}`);
    });
    all.logprobs[7][0] = 42; // a copy: its twin keeps its value
    assert.notEqual(all.logprobs[0][0], 42);
    await b.release();
    await a.release();
  }
});

Deno.test("shared-prefix scoring names a group index that is no sample's or is in two groups", async () => {
  const c = TINY_LLAMA;
  const { samples } = prefixedSamples(c.vocab_size);
  const policy = new Policy(c, randomParameters(c, 3));
  // with and without repeated samples (the second path drops repeats before grouping)
  for (const input of [samples, [...samples, samples[0]]]) {
    await assert.rejects(
      () => policy.scoreSharedPrefixes(input, [[0, 1], [input.length]]),
      new RegExp(
        `group 1 must hold sample indices in \\[0, ${input.length}\\).*value is ${input.length}$`,
      ),
    );
    await assert.rejects(
      () => policy.scoreSharedPrefixes(input, [[0, 1], [1, 2]]),
      /group 1 .* current value is 1 \(already in a group\)/,
    );
    await assert.rejects(() => policy.scoreSharedPrefixes(input, [[-1]]), PolicyError);
  }
  await policy.release();
});

Deno.test("shared-prefix scoring reads a LoRA adapter (non-zero B) as score does", async () => {
  const c = TINY_QWEN;
  const lora: LoraConfig = { rank: 2, alpha: 4, dropout: 0, target_modules: [...LORA_MODULES] };
  const params = randomParameters(c, 3);
  const rnd = lcg(8);
  for (const s of loraParameterSpecs(c, lora)) {
    params.set(s.name, Float32Array.from({ length: s.shape[0] * s.shape[1] }, () => rnd() - 0.5));
  }
  const { samples, groups } = prefixedSamples(c.vocab_size);
  const policy = new Policy(c, params, { lora });
  const base = new Policy(c, params); // the same base weights, adapter off
  const whole = await policy.score(samples);
  const shared = await policy.scoreSharedPrefixes(samples, groups);
  const off = await base.score(samples);
  samples.forEach((_, i) => {
    assert.ok(maxAbsDiff(whole.logprobs[i], shared.logprobs[i]) < 1e-5, `sample ${i}`);
  });
  // The adapter changes the log-probs, so equality above is not the base graph agreeing with
  // itself.
  assert.ok(
    Math.max(...samples.map((_, i) => maxAbsDiff(whole.logprobs[i], off.logprobs[i]))) > 1e-3,
  );
  await policy.release();
  await base.release();
});

function rlSamples(): SeedSample[] {
  const rnd = lcg(5);
  return [TARGET, ...OTHERS].map((s, i) => ({
    ...s,
    inputs: seedInputs({
      advantages: i % 2 === 0 ? 1.2 : -0.7,
      old_logprobs: Float32Array.from(s.response, () => -2.4 + rnd() - 0.5),
      ref_logprobs: Float32Array.from(s.response, () => -2.4 + rnd() - 0.5),
      teacher_logprobs: i === 1 ? null : Float32Array.from(s.response, () => -3 * rnd()),
    }),
  }));
}

/** The JobSpec defaults. */
const COEF: SeedCoefficients = SPEC_COEFFICIENTS;

Deno.test("a train step split into micro-batches gives the same loss, stats and gradients", async () => {
  const params = randomParameters(TINY_LLAMA, 2);
  const whole = new Policy(TINY_LLAMA, params, { maxTokensPerCall: 1 << 16 });
  const split = new Policy(TINY_LLAMA, params, { maxTokensPerCall: 16 });
  const a = await whole.trainStep(SEED_OBJECTIVE, rlSamples(), COEF);
  const b = await split.trainStep(SEED_OBJECTIVE, rlSamples(), COEF);
  for (
    const k of [
      "loss",
      "pg_loss",
      "opd_loss",
      "kl_loss",
      "entropy",
      "clip_frac",
      "gate_mean",
      "delta_mean",
    ] as const
  ) {
    assert.ok(
      Math.abs(a.outputs[k] - b.outputs[k]) < 1e-5,
      `${k}: ${a.outputs[k]} vs ${b.outputs[k]}`,
    );
  }
  assert.equal(a.tokens, 3 + 13 + 1 + 2);
  for (const s of parameterSpecs(TINY_LLAMA)) {
    const ga = a.grads.get(s.name)!, gb = b.grads.get(s.name)!;
    const scale = Math.max(1e-3, ...Array.from(ga, Math.abs));
    assert.ok(maxAbsDiff(ga, gb) / scale < 1e-4, s.name);
  }
  const scored = await whole.score(rlSamples());
  scored.logprobs.forEach((lp, i) => assert.ok(maxAbsDiff(lp, a.logprobs[i]) < 1e-5));
  await whole.release();
  await split.release();
});

Deno.test("a tiny model overfits a small corpus with the train graph and AdamW", async () => {
  const c: DecoderConfig = {
    ...TINY_LLAMA,
    hidden_size: 32,
    intermediate_size: 64,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 8,
    vocab_size: 16,
  };
  const corpus: Sample[] = [
    { prompt: [1, 3], response: [4, 5, 6, 7, 2] },
    { prompt: [1, 8], response: [9, 10, 11, 2] },
    { prompt: [1, 12], response: [13, 5, 13, 5, 14, 2] },
    { prompt: [1, 15], response: [3, 8, 12, 2] },
  ];
  const params = randomParameters(c, 8, 0.3);
  const policy = new Policy(c, params);
  const opt = new AdamW(parameterSpecs(c), { lr: 1e-2, weightDecay: 0 });
  const first = (await policy.trainStep(TOKEN_NLL, corpus)).outputs.loss;
  let loss = first;
  for (let step = 0; step < 80 && loss > 0.05; step++) {
    const r = await policy.trainStep(TOKEN_NLL, corpus);
    loss = r.outputs.loss;
    clipGradNorm(r.grads, 1.0);
    opt.step(params, r.grads);
  }
  assert.ok(first > 1.5, `initial loss ${first} should be near ln 16`);
  assert.ok(loss < 0.05, `loss after training ${loss}`);
  const [gen] = await policy.generate([[1, 8]], { maxNewTokens: 8, greedy: true });
  assert.deepEqual(gen.tokens, [9, 10, 11, 2]);
  assert.equal(gen.finishReason, "eos");
  await policy.release();
});

Deno.test("a train step over no samples returns zero loss and zero gradients for every parameter", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 2));
  const r = await policy.trainStep(SEED_OBJECTIVE, [], COEF);
  assert.equal(r.outputs.loss, 0);
  assert.equal(r.tokens, 0);
  for (const s of parameterSpecs(TINY_LLAMA)) assert.ok(r.grads.get(s.name)!.every((x) => x === 0));
  await policy.release();
});

Deno.test("a policy with other parameters shares the compiled sessions and scores with its own", async () => {
  const a = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 2));
  const b = a.withParameters(randomParameters(TINY_LLAMA, 3));
  const sa = await a.score([TARGET]);
  const sessions = a.sessions.size;
  const sb = await b.score([TARGET]);
  assert.equal(b.sessions, a.sessions);
  assert.equal(a.sessions.size, sessions);
  assert.ok(maxAbsDiff(sa.logprobs[0], sb.logprobs[0]) > 1e-3);
  await b.release();
  await a.release();
});

Deno.test("a policy refuses parameters that do not match its config", () => {
  const params = randomParameters(TINY_LLAMA, 2);
  params.delete("model.norm.weight");
  assert.throws(
    () => new Policy(TINY_LLAMA, params),
    (e: Error) => e instanceof PolicyError && /model.norm.weight/.test(e.message),
  );
});

Deno.test("a train step names the sample and the input it is missing", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 2));
  const [s] = rlSamples();
  const { old_logprobs: _, ...inputs } = s.inputs;
  await assert.rejects(
    () => policy.trainStep(SEED_OBJECTIVE, [rlSamples()[1], { ...s, inputs }], COEF),
    (e: Error) => e instanceof PolicyError && /sample 1's input old_logprobs/.test(e.message),
  );
  const { kl_coef: __, ...coefs } = COEF;
  await assert.rejects(
    () => policy.trainStep(SEED_OBJECTIVE, rlSamples(), coefs as SeedCoefficients),
    (e: Error) => e instanceof PolicyError && /scalar input kl_coef/.test(e.message),
  );
  await policy.release();
});

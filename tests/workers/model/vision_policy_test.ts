import assert from "node:assert/strict";
import {
  decoderParameterSpecs,
  type Parameters,
  parameterSpecs,
  visionParameterSpecs,
} from "../../../workers/model/config.ts";
import { Policy } from "../../../workers/model/policy.ts";
import { TOKEN_NLL } from "../../../workers/model/objective.ts";
import { SEED_OBJECTIVE, seedInputs, type SeedSample } from "../../../workers/seed/objective.ts";
import { prepareSamples, type Sample } from "../../../workers/model/batch.ts";
import {
  AdamW,
  clipGradNorm,
  createBuiltinTinyVl,
  hfFolderReader,
  IMAGE_PLACEHOLDER,
  loadHfDirectory,
  saveHfDirectory,
  Tokenizer,
  writeHfFolder,
} from "../../../workers/model/mod.ts";
import { lcg } from "../engine/_gradcheck.ts";
import { SPEC_COEFFICIENTS } from "../seed/_objective_oracle.ts";
import { decoders } from "./_decode.ts";
import { randomImage, randomParameters, TINY_LLAMA, TINY_VL } from "./_tiny.ts";

const IMG = TINY_VL.image_token_id!;
const A = randomImage(8, 8, 21), B = randomImage(12, 9, 22), C = randomImage(3, 3, 23);
const maxAbsDiff = (a: Float32Array, b: Float32Array) =>
  a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

const TARGET: Sample = { prompt: [1, IMG, 5, 9], response: [7, 7, 2], images: [A] };
const OTHERS: Sample[] = [
  { prompt: [1, 4], response: [8, 3, 6, 5, 5, 3, 2] }, // text only
  { prompt: [1, IMG, 3, IMG, 3], response: [2], images: [B, C] },
  { prompt: [IMG, 6], response: [9, 8], images: [C] },
];

Deno.test("an image sample's log-probs do not depend on its batch, bucket or micro-batch split", async () => {
  const params = randomParameters(TINY_VL, 2);
  const policy = new Policy(TINY_VL, params);
  const alone = await policy.score([TARGET]);
  const mixed = await policy.score([OTHERS[0], TARGET, OTHERS[1], OTHERS[2]]);
  assert.ok(maxAbsDiff(alone.logprobs[0], mixed.logprobs[1]) < 1e-5);
  assert.ok(maxAbsDiff(alone.entropy[0], mixed.entropy[1]) < 1e-5);
  const split = new Policy(TINY_VL, params, { maxTokensPerCall: 16 });
  const parts = await split.score([OTHERS[0], TARGET, OTHERS[1], OTHERS[2]]);
  parts.logprobs.forEach((lp, i) => assert.ok(maxAbsDiff(lp, mixed.logprobs[i]) < 1e-5, `${i}`));
  // the image matters: another image gives other log-probs
  const other = await policy.score([{ ...TARGET, images: [B] }]);
  assert.ok(maxAbsDiff(other.logprobs[0], alone.logprobs[0]) > 1e-4);
  await policy.release();
  await split.release();
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
const COEF = SPEC_COEFFICIENTS;

Deno.test("a train step over image and text samples gives the same loss and gradients whole or in micro-batches", async () => {
  const params = randomParameters(TINY_VL, 2);
  const whole = new Policy(TINY_VL, params, { maxTokensPerCall: 1 << 16 });
  const split = new Policy(TINY_VL, params, { maxTokensPerCall: 16 });
  const a = await whole.trainStep(SEED_OBJECTIVE, rlSamples(), COEF);
  const b = await split.trainStep(SEED_OBJECTIVE, rlSamples(), COEF);
  for (const k of ["loss", "pg_loss", "opd_loss", "kl_loss", "entropy", "gate_mean"] as const) {
    assert.ok(
      Math.abs(a.outputs[k] - b.outputs[k]) < 1e-5,
      `${k}: ${a.outputs[k]} vs ${b.outputs[k]}`,
    );
  }
  for (const s of parameterSpecs(TINY_VL)) {
    const ga = a.grads.get(s.name)!, gb = b.grads.get(s.name)!;
    const scale = Math.max(1e-3, ...Array.from(ga, Math.abs));
    assert.ok(maxAbsDiff(ga, gb) / scale < 1e-4, s.name);
  }
  const patch = a.grads.get("vision_tower.embeddings.patch_embedding.weight")!;
  assert.ok(patch.some((x) => x !== 0), "the encoder gets a gradient");
  const sft = await split.trainStep(TOKEN_NLL, rlSamples());
  const sftWhole = await whole.trainStep(TOKEN_NLL, rlSamples());
  assert.ok(Math.abs(sft.outputs.loss - sftWhole.outputs.loss) < 1e-5);
  await whole.release();
  await split.release();
});

Deno.test("text-only samples on a vision model score as its decoder alone and leave the encoder without gradient", async () => {
  const params = randomParameters(TINY_VL, 3);
  const vl = new Policy(TINY_VL, params);
  const decoderOnly: Parameters = new Map(
    decoderParameterSpecs(TINY_VL).map((s) => [s.name, params.get(s.name)!]),
  );
  const text = new Policy(TINY_LLAMA, decoderOnly);
  const samples = [OTHERS[0], { prompt: [1, 3, 3], response: [4, 2] }];
  const a = await vl.score(samples), b = await text.score(samples);
  a.logprobs.forEach((lp, i) => assert.deepEqual(lp, b.logprobs[i]));
  const r = await vl.trainStep(TOKEN_NLL, samples);
  for (const s of visionParameterSpecs(TINY_VL)) {
    assert.ok(r.grads.get(s.name)!.every((x) => x === 0));
  }
  await assert.rejects(() => text.score([TARGET]), /must have a vision_config/);
  await vl.release();
  await text.release();
});

Deno.test("greedy generation with images picks the arg-max of the full forward, in any batch and prefill window", async () => {
  const policy = new Policy(TINY_VL, randomParameters(TINY_VL, 4));
  const prompts = [[1, IMG, 5, IMG, 7], [1, 4, 4], [IMG, 3]];
  const images = [[A, B], null, [C]];
  const opts = { maxNewTokens: 6, greedy: true, eosTokenIds: [], images };
  const gens = await policy.generate(prompts, opts);
  const windows = await policy.generate(prompts, { ...opts, maxTokensPerCall: 3 * 3 }); // 3 columns
  assert.deepEqual(windows, gens);
  const alone = await policy.generate([prompts[0]], { ...opts, images: [images[0]] });
  assert.deepEqual(alone[0], gens[0]);
  // the arg-max chain of the all-positions decode graph with the images injected
  const [s] = prepareSamples([{ prompt: prompts[0], response: [], images: [A, B] }], TINY_VL);
  const runs = s.prompt.flatMap((t, j) => (t === IMG ? [j] : []));
  const embeds = await policy.encodeImages([A, B]);
  const d = await decoders(policy);
  const v = TINY_VL.vocab_size, row = [...s.prompt];
  for (let k = 0; k < 6; k++) {
    const { logits } = await d.step(null, row, 0, { embeds, index: runs });
    const last = logits.subarray((row.length - 1) * v, row.length * v);
    row.push(last.indexOf(Math.max(...last)));
  }
  assert.deepEqual(gens[0].tokens, row.slice(s.prompt.length));
  await assert.rejects(
    () => policy.generate([[1, IMG]], { maxNewTokens: 2 }),
    /its 1 image tokens need images/,
  );
  await d.release();
  await policy.release();
});

Deno.test("a sample's bad images are reported under its own index when equal samples come before it", async () => {
  // samples 0 and 1 are the same input (scored once): the error must still name sample 2
  const twin: Sample = { prompt: [1, 5], response: [3] };
  const text = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 1));
  const vision = new Policy(TINY_VL, randomParameters(TINY_VL, 1));
  for (const score of ["score", "scoreSharedPrefixes"] as const) {
    const call = (p: Policy, bad: Sample) =>
      score === "score"
        ? p.score([twin, { ...twin }, bad])
        : p.scoreSharedPrefixes([twin, { ...twin }, bad], [[0, 1]]);
    await assert.rejects(
      () => call(text, { prompt: [1, 4], response: [2], images: [A] }),
      /images of sample 2 as the model must have a vision_config/,
      score,
    );
    await assert.rejects(
      () => call(vision, { prompt: [1, IMG, 4], response: [2], images: [A, B] }),
      /Cannot pack sample 2 as its prompt must hold/,
      score,
    );
  }
  await text.release();
  await vision.release();
});

Deno.test("a builtin:tiny-vl model saved as a Hugging Face folder loads back with identical log-probs", async () => {
  const model = createBuiltinTinyVl({ vocabulary: ["red", "blue", "colour"], seed: 3 });
  const dir = await Deno.makeTempDir();
  try {
    await writeHfFolder(dir, saveHfDirectory(model));
    const json = JSON.parse(await Deno.readTextFile(`${dir}/config.json`));
    assert.equal(json.vision_config.image_size, 48);
    assert.equal(json.image_token_id, model.config.image_token_id);
    const loaded = await loadHfDirectory(hfFolderReader(dir));
    assert.deepEqual(loaded.config, model.config);
    assert.equal(loaded.parameters.size, parameterSpecs(model.config).length);
    const tok = new Tokenizer(loaded.tokenizer);
    const sample = {
      prompt: tok.encode(`${IMAGE_PLACEHOLDER} colour?`),
      response: tok.encode(" red"),
      images: [randomImage(20, 30, 5)],
    };
    const a = new Policy(model.config, model.parameters);
    const b = new Policy(loaded.config, loaded.parameters);
    assert.deepEqual((await b.score([sample])).logprobs, (await a.score([sample])).logprobs);
    await a.release();
    await b.release();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("builtin:tiny-vl learns to name the colour that fills an image, which only the image tells it", async () => {
  // Every sample has the same prompt, so a model blind to the image cannot beat ln 2 on the
  // colour token (mean loss ≥ 0.34 over colour + EOS). Measured here: 5.85 at step 0, 0.41 at
  // step 12, 0.041 at step 18 (lr 3e-3, 8 fresh images a step); 0.0004 after 60 steps.
  const model = createBuiltinTinyVl({
    vocabulary: ["what", "colour", "is", "the", "image", "red", "blue"],
    seed: 1,
  });
  const tok = new Tokenizer(model.tokenizer);
  const rnd = lcg(7);
  const filled = (red: boolean) => { // a noisy red-ish or blue-ish image of random size
    const w = 16 + Math.floor(rnd() * 40), h = 16 + Math.floor(rnd() * 40);
    const base = red ? [200, 30, 30] : [30, 30, 200];
    const rgb = Uint8Array.from(
      { length: w * h * 3 },
      (_, i) => Math.max(0, Math.min(255, base[i % 3] + (rnd() - 0.5) * 100)),
    );
    return { width: w, height: h, rgb };
  };
  const prompt = tok.encode(`${IMAGE_PLACEHOLDER} what colour is the image?`);
  const sample = (red: boolean): Sample => ({
    prompt,
    response: [...tok.encode(red ? " red" : " blue"), tok.eosTokenId!],
    images: [filled(red)],
  });
  const policy = new Policy(model.config, model.parameters);
  const opt = new AdamW(parameterSpecs(model.config), { lr: 3e-3, weightDecay: 0 });
  const losses: number[] = [];
  for (let step = 0; step < 40 && !(losses.at(-1)! < 0.05); step++) {
    const r = await policy.trainStep(
      TOKEN_NLL,
      Array.from({ length: 8 }, (_, i) => sample(i % 2 === 0)),
    );
    losses.push(r.outputs.loss);
    clipGradNorm(r.grads, 1);
    opt.step(model.parameters, r.grads);
  }
  assert.ok(losses[0] > 1, `initial loss ${losses[0]}`);
  assert.ok(losses.at(-1)! < 0.05, `loss after ${losses.length} steps: ${losses.at(-1)}`);
  const held = Array.from({ length: 8 }, (_, i) => sample(i % 3 === 0));
  const gens = await policy.generate(held.map((s) => s.prompt), {
    maxNewTokens: 3,
    greedy: true,
    images: held.map((s) => s.images),
  });
  assert.deepEqual(
    gens.map((g) => tok.decode(g.tokens, { skipSpecialTokens: true }).trim()),
    held.map((_, i) => (i % 3 === 0 ? "red" : "blue")),
  );
  await policy.release();
});

import assert from "node:assert/strict";
import { createSession, tensor } from "../../../workers/engine/mod.ts";
import { parameterSpecs, visionParameterSpecs } from "../../../workers/model/config.ts";
import { buildTrainGraph } from "../../../workers/model/llama.ts";
import { TOKEN_NLL } from "../../../workers/model/objective.ts";
import { packSamples, prepareSamples, type Sample } from "../../../workers/model/batch.ts";
import { visionEncoder } from "../../../workers/model/vision.ts";
import { Policy } from "../../../workers/model/policy.ts";
import { gradCheck, lcg } from "../engine/_gradcheck.ts";
import { decoders, logProb } from "./_decode.ts";
import { randomImage, randomParameters, TINY_VL } from "./_tiny.ts";

type Feeds = Record<string, ReturnType<typeof tensor>>;
const IMG = TINY_VL.image_token_id!;
const A = randomImage(8, 8, 11), B = randomImage(5, 7, 12), C = randomImage(16, 16, 13);

Deno.test("the vision encoder's gradients match float64 finite differences for patches and every vision parameter", async () => {
  const specs = visionParameterSpecs(TINY_VL);
  const r = await gradCheck(
    [{ shape: [2, 4, 48] }, ...specs.map((s) => ({ shape: s.shape }))],
    (g, [pixels, ...ws]) =>
      visionEncoder(g, TINY_VL, new Map(specs.map((s, i) => [s.name, ws[i]])), pixels),
    // eps 1e-5: the loss sums 64 outputs, so at 1e-6 float64 rounding (~1e-9 absolute on the
    // difference quotient) dominates gradients near the floor
    { eps: 1e-5, floor: 1e-5 },
  );
  assert.ok(r.checked > 1500, `checked ${r.checked}`);
  assert.ok(r.maxRelErr < 1e-5, `max rel err ${r.maxRelErr} at ${r.worst}`);
});

Deno.test("the whole model's loss through an image sample has float64-exact gradients for vision and decoder parameters", async () => {
  const c = TINY_VL;
  const samples: Sample[] = prepareSamples([
    { prompt: [1, IMG, 5, IMG, 7], response: [3, 9, 2], images: [A, B] },
    { prompt: [1, 4, IMG], response: [6, 8, 2], images: [C] },
  ], c);
  const bucket = { batch: 2, length: 16, tokens: 8, images: 4 };
  const g = buildTrainGraph(c, bucket, { objective: TOKEN_NLL, dtype: "float64" });
  const session = await createSession(g.toModel());
  const p = packSamples(samples, bucket, 0, { config: c });
  const dims = [2, 16], rDims = [8];
  const feeds: Feeds = {
    input_ids: tensor("int64", p.inputIds, dims),
    position_ids: tensor("int64", p.positionIds, dims),
    token_index: tensor("int64", p.tokenIndex, rDims),
    targets: tensor("int64", p.targets, rDims),
    attention_mask: tensor("float64", Float64Array.from(p.attentionMask), dims),
    loss_mask: tensor("float64", Float64Array.from(p.lossMask), rDims),
    pixel_values: tensor("float64", Float64Array.from(p.pixelValues!), [4, 4, 48]),
    merge_index: tensor("int64", p.mergeIndex!, dims),
    response_tokens: tensor("float64", new Float64Array(8).fill(6), rDims), // per-token divisors
  };
  const params = new Map(
    [...randomParameters(c, 5)].map(([k, v]) => [k, Float64Array.from(v)]),
  );
  const run = async () => {
    for (const s of parameterSpecs(c)) {
      feeds[s.name] = tensor("float64", params.get(s.name)!, s.shape);
    }
    return await session.run(feeds);
  };
  const base = await run();
  const rnd = lcg(3), eps = 1e-6;
  let worst = 0, where = "", checked = 0;
  for (const s of parameterSpecs(c)) {
    const grad = base[`grad.${s.name}`].data as Float64Array;
    let big = 0;
    for (let i = 1; i < grad.length; i++) if (Math.abs(grad[i]) > Math.abs(grad[big])) big = i;
    for (const i of [big, ...Array.from({ length: 3 }, () => Math.floor(rnd() * grad.length))]) {
      const w = params.get(s.name)!, old = w[i];
      w[i] = old + eps;
      const lp = Number((await run()).loss.data[0]);
      w[i] = old - eps;
      const lm = Number((await run()).loss.data[0]);
      w[i] = old;
      const fd = (lp - lm) / (2 * eps);
      const scale = Math.max(Math.abs(fd), Math.abs(grad[i]));
      if (scale < 1e-6) continue;
      checked++;
      const rel = Math.abs(fd - grad[i]) / scale;
      if (rel > worst) (worst = rel), (where = `${s.name}[${i}] fd=${fd} analytic=${grad[i]}`);
    }
  }
  await session.release();
  assert.ok(checked >= parameterSpecs(c).length, `too few coordinates checked: ${checked}`);
  assert.ok(worst < 1e-5, `max rel err ${worst} at ${where}`);
  // the vision gradients are not zero: images reach the loss (k_proj biases excepted: they add
  // q·b to every key's score alike, which softmax cancels, so their gradient is exactly 0)
  for (const s of visionParameterSpecs(c).filter((s) => !s.name.endsWith("k_proj.bias"))) {
    const grad = base[`grad.${s.name}`].data as Float64Array;
    assert.ok(grad.some((x) => Math.abs(x) > 1e-8), `${s.name} has no gradient`);
  }
});

Deno.test("injecting the encoder's embeddings at the image runs reproduces the score graph token by token, and the k-th image feeds the k-th run", async () => {
  const policy = new Policy(TINY_VL, randomParameters(TINY_VL, 6));
  const v = TINY_VL.vision_config!, c = TINY_VL;
  const [s] = prepareSamples([{
    prompt: [1, IMG, 5, IMG, 7],
    response: [3, 9, 4, 2],
    images: [A, B],
  }], c);
  const [scored] = (await policy.score([s])).logprobs;
  const row = [...s.prompt, ...s.response];
  const runs = s.prompt.flatMap((t, j) => (t === IMG ? [j] : [])); // 8 image positions
  assert.equal(runs.length, 2 * (v.image_size / v.patch_size) ** 2);
  const d = await decoders(policy);
  const lpOf = async (images: typeof A[]) => {
    const r = await d.step(null, row.slice(0, -1), 0, {
      embeds: await policy.encodeImages(images),
      index: runs,
    });
    return s.response.map((id, j) => logProb(r.logits, c.vocab_size, s.prompt.length - 1 + j, id));
  };
  const inOrder = await lpOf([A, B]);
  inOrder.forEach((lp, j) =>
    assert.ok(Math.abs(lp - scored[j]) < 1e-4, `token ${j}: ${lp} vs ${scored[j]}`)
  );
  const swapped = await lpOf([B, A]);
  assert.ok(
    swapped.some((lp, j) => Math.abs(lp - scored[j]) > 1e-3),
    "swapping the images changes nothing",
  );
  const [scoredSwapped] = (await policy.score([{ ...s, images: [B, A] }])).logprobs;
  swapped.forEach((lp, j) =>
    assert.ok(Math.abs(lp - scoredSwapped[j]) < 1e-4, `swapped token ${j}`)
  );
  await d.release();
  await policy.release();
});

Deno.test("KV-cache decoding after a prefill with images reproduces the full forward's logits", async () => {
  const policy = new Policy(TINY_VL, randomParameters(TINY_VL, 8));
  const c = TINY_VL, v = c.vocab_size;
  const [s] = prepareSamples([{
    prompt: [1, 4, IMG, 5, 6],
    response: [3, 9, 4, 7, 2],
    images: [C],
  }], c);
  const row = [...s.prompt, ...s.response];
  const runs = s.prompt.flatMap((t, j) => (t === IMG ? [j] : []));
  const embeds = await policy.encodeImages([C]);
  const d = await decoders(policy);
  const full = (await d.step(null, row, 0, { embeds, index: runs })).logits;
  let r = await d.step(null, s.prompt, 0, { embeds, index: runs });
  let maxDiff = 0;
  for (let i = 0; i < s.prompt.length * v; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(r.logits[i] - full[i]));
  }
  for (let t = s.prompt.length; t < row.length; t++) {
    r = await d.step(r.past, [row[t]], t); // text-only steps on the image prefill's cache
    for (let i = 0; i < v; i++) {
      maxDiff = Math.max(maxDiff, Math.abs(r.logits[i] - full[t * v + i]));
    }
  }
  assert.ok(maxDiff < 1e-4, `max abs diff ${maxDiff}`);
  await d.release();
  await policy.release();
});

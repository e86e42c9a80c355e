/**
 * Sanity of the image placeholder wiring (workers/envs/README.md, "Vision tasks"): on a task where
 * the image carries no information the text lacks, the image path and the text path must give the
 * same results.
 *
 * The construction: builtin:tiny-vl whose projector's last layer has zero weights and a bias
 * equal to the embedding of one text token X. Its encoder then outputs X's embedding for every
 * patch of every image, so the model learns nothing from the pixels: an image prompt must behave
 * exactly as the same prompt with its `<image>` replaced, at the token level, by P copies of X
 * (P = image tokens per image) and no image. The two paths share nothing below the prompt ids:
 * the image path expands the placeholder, encodes the pixels and merges the embeddings (score
 * graph with image slots; decode prefill with image embeddings), the text path runs the
 * text-only graphs. A wrong count of image tokens, an off-by-one in positions or in the merge
 * index, or an image landing in another row would make them differ. The environment is Sokoban
 * with image observations and the relative-position line, so the prompts still carry the
 * layout as text and the rollouts are real ones.
 *
 * Then the converse, with the encoder as initialised: each sample's log-probs follow its own
 * image (swapping two samples' images changes them; reordering the batch does not).
 */
import assert from "node:assert/strict";
import {
  getEnvironment,
  IMAGE_PLACEHOLDER,
  toAsyncEnvironment,
} from "../../../workers/envs/mod.ts";
import { numImageTokens, Policy, type Sample, Tokenizer } from "../../../workers/model/mod.ts";
import {
  type BatchPolicy,
  type RolloutTrajectory,
  runRollouts,
  TextPolicy,
} from "../../../workers/seed/mod.ts";
import { probeFirstTurn, resolveModel } from "../../../workers/seed/run/mod.ts";

const OPTIONS = { render: "image", relative_positions: true };

async function setUp() {
  const env = toAsyncEnvironment(getEnvironment("sokoban"));
  const first = await probeFirstTurn(env, OPTIONS);
  const model = await resolveModel("builtin:tiny-vl", {
    env,
    seed: 7,
    artifacts: null as never,
    images: first.images,
  });
  const policy = new Policy(model.config, model.parameters, { threads: 1 });
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const tasks = await env.sampleTasks("train", 3, 11, OPTIONS);
  return { env, model, policy, theta, tasks };
}

/** Largest |a − b| over all tokens of all samples. */
function maxDiff(a: Float32Array[], b: Float32Array[]): number {
  let m = 0;
  a.forEach((x, i) => x.forEach((v, k) => (m = Math.max(m, Math.abs(v - b[i][k])))));
  return m;
}

Deno.test("with an encoder that outputs a text token's embedding, image prompts roll out and score as text prompts", async () => {
  const { env, model, policy, theta, tasks } = await setUp();
  const c = model.config, d = c.hidden_size;
  const x = theta.tokenizer.encode(" floor", { addSpecialTokens: false });
  assert.equal(x.length, 1, "X is one token");
  const embed = model.parameters.get("model.embed_tokens.weight")!;
  model.parameters.get("multi_modal_projector.linear_2.weight")!.fill(0);
  model.parameters.get("multi_modal_projector.linear_2.bias")!
    .set(embed.subarray(x[0] * d, (x[0] + 1) * d));
  const p = numImageTokens(c);
  /** Prompt ids with each `<image>` token replaced by P copies of `token` (default X). */
  const asText = (ids: number[], token = x[0]) =>
    ids.flatMap((t) => (t === c.image_token_id ? Array(p).fill(token) : [t]));
  // Sampling (temperature 1, the same seeds on both paths): a greedy random model emits EOS.
  const generate = { maxNewTokens: 8, temperature: 1, seed: 3, stop: ["</action>"] };
  const run = (policyFn: BatchPolicy) =>
    runRollouts({ env, tasks, groupSize: 1, maxTurns: 3, historyLength: 1, policy: policyFn });

  const imagePath = await run(async (prompts, images) => {
    assert.ok(images.every((i) => i.length === 1));
    return (await theta.generate(prompts, { ...generate, images })).texts;
  });
  const textPath = await run(async (prompts) => {
    const gens = await policy.generate(prompts.map((q) => asText(theta.promptIds(q))), {
      maxNewTokens: 8,
      greedy: false,
      temperature: 1,
      seed: 3,
      eosTokenIds: theta.tokenizer.stopTokenIds,
      stop: ["</action>"],
      detokenize: (ids) => theta.tokenizer.decode(ids, { skipSpecialTokens: true }),
    });
    return gens.map((g) => (g.text ?? "").trim());
  });
  const responses = (t: RolloutTrajectory[]) => t.map((r) => r.steps.map((s) => s.response));
  assert.deepEqual(responses(imagePath), responses(textPath));
  assert.ok(responses(imagePath).flat().every((r) => r.length > 0), "something was generated");

  const samples = imagePath.flatMap((t) => t.steps).map((s) =>
    theta.sample(s.prompt, s.response, false, s.images)
  );
  assert.ok(samples.every((s) => s.images?.length === 1));
  const twins: Sample[] = samples.map((s) => ({ prompt: asText(s.prompt), response: s.response }));
  const [withImages, asTokens] = [await policy.score(samples), await policy.score(twins)];
  const diff = maxDiff(withImages.logprobs, asTokens.logprobs);
  assert.ok(diff < 1e-4, `image path vs text path: max |Δ log-prob| = ${diff}`);
  // The control: the token X matters, so an equality above is not vacuous.
  const other = theta.tokenizer.encode(" wall", { addSpecialTokens: false })[0];
  const wrong = await policy.score(
    samples.map((s) => ({ prompt: asText(s.prompt, other), response: s.response })),
  );
  assert.ok(
    maxDiff(withImages.logprobs, wrong.logprobs) > 1e-3,
    "another token gives other log-probs",
  );
  await policy.release();
});

Deno.test("each sample's log-probs follow its own image: swapping images changes them, reordering does not", async () => {
  const { env, policy, theta, tasks } = await setUp();
  const moves = ["down", "left", "up"];
  const trajectories = await runRollouts({
    env,
    tasks,
    groupSize: 1,
    maxTurns: 3,
    historyLength: 0,
    policy: (prompts, _images) =>
      Promise.resolve(prompts.map((_, i) => `<action>${moves[i % 3]}</action>`)),
  });
  const steps = trajectories.flatMap((t) => t.steps);
  const samples = steps.map((s) => theta.sample(s.prompt, s.response, false, s.images));
  const base = await policy.score(samples);
  // Reversed order (other micro-batch slots and image slots): the same log-probs per sample.
  const reversed = await policy.score([...samples].reverse());
  const back = [...reversed.logprobs].reverse();
  assert.ok(maxDiff(base.logprobs, back) < 1e-5, "images follow their samples through packing");
  // Two turns of the same episode have different rooms: swap their images.
  const [i, j] = [0, 1];
  assert.notDeepEqual(samples[i].images![0].rgb, samples[j].images![0].rgb);
  const swapped = samples.map((s, k) =>
    k === i
      ? { ...s, images: samples[j].images }
      : k === j
      ? { ...s, images: samples[i].images }
      : s
  );
  const changed = await policy.score(swapped);
  const d = (k: number) => maxDiff([base.logprobs[k]], [changed.logprobs[k]]);
  assert.ok(d(i) > 1e-5 && d(j) > 1e-5, `swapped images change log-probs: ${d(i)}, ${d(j)}`);
  const untouched = samples.map((_, k) => k).filter((k) => k !== i && k !== j);
  assert.ok(
    maxDiff(untouched.map((k) => base.logprobs[k]), untouched.map((k) => changed.logprobs[k])) <
      1e-5,
  );
  assert.ok(steps.every((s) => s.prompt.includes(IMAGE_PLACEHOLDER)));
  await policy.release();
});

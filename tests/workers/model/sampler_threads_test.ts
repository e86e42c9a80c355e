/**
 * Draws split between threads (workers/model/sampler_threads.ts) are the draws of one thread:
 * the same tokens and the same random streams afterwards, for sampleToken directly and for a whole
 * generation with the tiny Qwen3 model (151,936 logits a row) through `Policy.generate`.
 */
import assert from "node:assert/strict";
import { Rng, sampleToken } from "../../../workers/model/sampling.ts";
import {
  MIN_PARALLEL_ROWS,
  MIN_PARALLEL_VOCAB,
  SamplerThreads,
} from "../../../workers/model/sampler_threads.ts";
import { initParameters, Policy } from "../../../workers/model/mod.ts";
import { TINY_QWEN3 } from "../../../workers/model/tiny_qwen3.ts";

const SAMPLE = { temperature: 0.9, topP: 1, greedy: false };

Deno.test("rows drawn on three threads give one thread's tokens and leave each stream where it would", async () => {
  const noise = new Rng(3);
  const rows = Array.from(
    { length: MIN_PARALLEL_ROWS + 3 },
    () => Float32Array.from({ length: MIN_PARALLEL_VOCAB * 2 }, () => 4 * noise.normal()),
  );
  const one = rows.map((_, i) => new Rng(100 + i));
  const three = rows.map((_, i) => new Rng(100 + i));
  const expected = rows.map((r, i) => sampleToken(r, SAMPLE, one[i]));
  const sampler = new SamplerThreads(3);
  try {
    const got = await sampler.draw(rows.map((logits, i) => ({ logits, rng: three[i] })), SAMPLE);
    assert.deepEqual(got, expected);
    assert.equal(sampler.workers, 2); // the rows were split: two of three shares on workers
    assert.deepEqual(three.map((r) => r.state()), one.map((r) => r.state()));
    assert.ok(new Set(expected).size > 1); // not one token everywhere
    // a second batch on the same workers continues the streams
    const again = await sampler.draw(rows.map((logits, i) => ({ logits, rng: three[i] })), SAMPLE);
    assert.deepEqual(again, rows.map((r, i) => sampleToken(r, SAMPLE, one[i])));
  } finally {
    sampler.close();
  }
  assert.equal(sampler.workers, 0);
});

Deno.test("a generation over the 151,936-token vocabulary is the same with two sampler threads as with one", async () => {
  const params = initParameters(TINY_QWEN3, 5);
  const one = new Policy(TINY_QWEN3, params, { threads: 1 });
  const two = one.withParameters(params);
  const prompts = Array.from(
    { length: MIN_PARALLEL_ROWS },
    (_, i) => [151644, 872, 198, 1000 + i, 2000 + 3 * i],
  );
  const options = { maxNewTokens: 6, temperature: 1, seed: 9 };
  try {
    const a = await one.generate(prompts, { ...options, samplerThreads: 1 });
    const b = await two.generate(prompts, { ...options, samplerThreads: 2 });
    assert.deepEqual(b, a);
    assert.equal(a.length, MIN_PARALLEL_ROWS);
    assert.ok(a.every((g) => g.tokens.length === 6));
  } finally {
    await one.release();
  }
});

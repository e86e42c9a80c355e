/**
 * The continuous-batching engine against the trainer's batched `generate` on one model (real
 * onnxruntime, one thread so both round alike): requests that join while others decode, leave
 * at different lengths and share batches give the tokens each prompt gets from `generate`.
 */
import assert from "node:assert/strict";
import { SessionCache } from "../../../workers/engine/mod.ts";
import { KvCache, Policy } from "../../../workers/model/mod.ts";
import { type ChoiceSink, DecodeEngine, type EngineFinish } from "../../../workers/serve/engine.ts";
import { decodeModel } from "../../../workers/serve/models.ts";
import { randomParameters, TINY_LLAMA } from "../model/_tiny.ts";

const config = { ...TINY_LLAMA, vocab_size: 13, max_position_embeddings: 256 };
const params = randomParameters(config, 7, 1.6);

/** A sink collecting tokens; `stopAfter` ends the choice once it has that many. */
function collector(stopAfter = Infinity) {
  const tokens: number[] = [];
  let reason: EngineFinish | undefined;
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  const sink: ChoiceSink = {
    token(id) {
      tokens.push(id);
      return tokens.length >= stopAfter;
    },
    finish(r) {
      reason = r;
      resolve();
    },
  };
  return { sink, tokens, done, reason: () => reason };
}

const prompts = [[1, 5, 6], [1, 7, 8, 9, 10, 3, 4], [1, 3], [1, 4, 4, 4, 5, 6, 7, 8, 9, 10, 11], [
  1,
  12,
]];

Deno.test("requests that join and leave between steps get what generate gives each prompt", async () => {
  const sessions = new SessionCache({ threads: 1 });
  const policy = new Policy(config, params, { threads: 1 });
  try {
    const limits = [9, 30, 4, 17, 25];
    for (const greedy of [true, false]) {
      const expected = await policy.generate(prompts, {
        maxNewTokens: limits,
        greedy,
        seed: 11,
        eosTokenIds: [],
      });
      const model = await decodeModel("m", config, params, sessions);
      let steps = 0;
      const engine = new DecodeEngine({
        maxBatch: 3,
        maxQueue: 10,
        beforeStep: () => void steps++,
      });
      const got = prompts.map((prompt, i) => {
        const c = collector();
        // the seed of prompt i's single choice is what generate derives for index i
        engine.submit({
          model,
          prompt,
          maxNewTokens: limits[i],
          sampling: { greedy, temperature: 1, topP: 1 },
          seed: 0,
          eosTokenIds: [],
          choices: [c.sink],
        });
        return c;
      });
      // generate seeds prompt i with (11·φ + i·c); the engine seeds choice 0 of seed s with s·φ:
      // compare greedy exactly, and sampled runs only by their lengths (other streams)
      await engine.idle();
      for (const [i, c] of got.entries()) {
        assert.equal(c.reason(), "length");
        assert.equal(c.tokens.length, limits[i]);
        if (greedy) assert.deepEqual(c.tokens, expected[i].tokens, `prompt ${i}`);
      }
      assert.ok(steps > Math.max(...limits), `${steps} steps: requests waited for room`);
    }
  } finally {
    await sessions.release();
    await policy.release();
  }
});

Deno.test("a seeded choice samples what generate samples for the same seed and prompt", async () => {
  const sessions = new SessionCache({ threads: 1 });
  const policy = new Policy(config, params, { threads: 1 });
  try {
    const model = await decodeModel("m", config, params, sessions);
    const engine = new DecodeEngine({ maxBatch: 8 });
    for (const seed of [0, 3, 99]) {
      const [expected] = await policy.generate([prompts[1]], {
        maxNewTokens: 20,
        temperature: 0.8,
        topP: 0.9,
        seed,
        eosTokenIds: [],
      });
      const a = collector(), b = collector(), other = collector();
      const sampling = { greedy: false, temperature: 0.8, topP: 0.9 };
      const base = { model, maxNewTokens: 20, sampling, eosTokenIds: [] };
      engine.submit({ ...base, prompt: prompts[1], seed, choices: [a.sink, b.sink] });
      engine.submit({ ...base, prompt: prompts[3], seed: seed + 1, choices: [other.sink] });
      await engine.idle();
      assert.deepEqual(a.tokens, expected.tokens, `seed ${seed}`);
      assert.notDeepEqual(b.tokens, a.tokens, "choice 1 draws from its own stream");
    }
  } finally {
    await sessions.release();
    await policy.release();
  }
});

Deno.test("requests with the same prompt share its prefill and each samples what generate samples for its seed", async () => {
  const sessions = new SessionCache({ threads: 1 });
  const policy = new Policy(config, params, { threads: 1 });
  try {
    const model = await decodeModel("m", config, params, sessions);
    const engine = new DecodeEngine({ maxBatch: 8 });
    const sampling = { greedy: false, temperature: 0.8, topP: 1 };
    const base = { model, maxNewTokens: 15, sampling, eosTokenIds: [] };
    const seeds = [4, 5, 6];
    const got = seeds.map((seed) => {
      const c = collector();
      engine.submit({ ...base, prompt: [...prompts[3]], seed, choices: [c.sink] });
      return c;
    });
    const other = collector();
    engine.submit({ ...base, prompt: prompts[0], seed: 4, choices: [other.sink] });
    await engine.idle();
    for (const [i, seed] of seeds.entries()) {
      const [expected] = await policy.generate([prompts[3]], { ...sampling, ...base, seed });
      assert.deepEqual(got[i].tokens, expected.tokens, `seed ${seed}`);
    }
    const [alone] = await policy.generate([prompts[0]], { ...sampling, ...base, seed: 4 });
    assert.deepEqual(other.tokens, alone.tokens, "another prompt in the same admission");
    assert.notDeepEqual(got[0].tokens, got[1].tokens, "each request draws from its own stream");
  } finally {
    await sessions.release();
    await policy.release();
  }
});

Deno.test("prompts with a common prefix prefill it once, later prompts reuse it, and each samples what generate samples alone", async () => {
  const sessions = new SessionCache({ threads: 1 });
  const policy = new Policy(config, params, { threads: 1 });
  try {
    const model = await decodeModel("m", config, params, sessions);
    const shapes: number[][] = [];
    const run = model.session.run.bind(model.session);
    model.session.run = ((feeds: Record<string, { dims: readonly number[] }>) => {
      shapes.push([...feeds.input_ids.dims]);
      return run(feeds as never);
    }) as never;
    const engine = new DecodeEngine({ maxBatch: 8, minSharedPrefix: 4 });
    const prefix = [1, 4, 4, 4, 5, 6, 7, 8];
    const own = [[9], [10, 11, 3], [2, 2], [10, 11, 3], [12, 5, 9, 9, 1, 3]];
    for (const greedy of [true, false]) {
      shapes.length = 0;
      const sampling = { greedy, temperature: 0.8, topP: 1 };
      const base = { model, maxNewTokens: 12, sampling, eosTokenIds: [] };
      const got = own.map((suffix, i) => {
        const c = collector();
        engine.submit({ ...base, prompt: [...prefix, ...suffix], seed: 20 + i, choices: [c.sink] });
        return c;
      });
      await engine.idle();
      for (const [i, suffix] of own.entries()) {
        const [alone] = await policy.generate([[...prefix, ...suffix]], {
          ...sampling,
          ...base,
          seed: 20 + i,
        });
        assert.deepEqual(got[i].tokens, alone.tokens, `greedy ${greedy}, prompt ${i}`);
      }
      // the prefix alone in one row, then the 4 distinct suffixes (widest 6) after it; the
      // second time each prompt starts from its own keys and values kept from the first, and
      // feeds its last token alone
      const expected = greedy ? [[1, 8], [4, 6]] : [[4, 1]];
      assert.deepEqual(shapes.slice(0, expected.length), expected);
    }
    // a later lone prompt that shares part of the kept prefix prefills only its own tokens
    shapes.length = 0;
    const lone = [...prefix.slice(0, 6), 3, 3, 2], c = collector();
    const base = { model, maxNewTokens: 12, eosTokenIds: [] };
    const greedy = { greedy: true, temperature: 1, topP: 1 };
    engine.submit({ ...base, sampling: greedy, prompt: lone, seed: 0, choices: [c.sink] });
    await engine.idle();
    assert.deepEqual(shapes[0], [1, 3]);
    const [alone] = await policy.generate([lone], { ...base, ...greedy, seed: 0 });
    assert.deepEqual(c.tokens, alone.tokens);
  } finally {
    await sessions.release();
    await policy.release();
  }
});

Deno.test("a cancelled request leaves at the next step and a sink may stop its choice", async () => {
  const sessions = new SessionCache({ threads: 1 });
  try {
    const model = await decodeModel("m", config, params, sessions);
    const released: string[] = [];
    let steps = 0;
    const abort = new AbortController();
    const engine = new DecodeEngine({
      maxBatch: 2,
      beforeStep: () => {
        if (++steps === 4) abort.abort();
      },
      onRelease: (r) => released.push(`${r.reason}:${r.tokens}`),
    });
    const base = {
      model,
      maxNewTokens: 50,
      sampling: { greedy: true, temperature: 1, topP: 1 },
      seed: 0,
      eosTokenIds: [],
    };
    const cancelled = collector(), stopped = collector(5);
    engine.submit({ ...base, prompt: prompts[0], choices: [cancelled.sink], signal: abort.signal });
    engine.submit({ ...base, prompt: prompts[2], choices: [stopped.sink] });
    await engine.idle();
    assert.equal(cancelled.reason(), "cancelled");
    assert.equal(cancelled.tokens.length, 3, "3 steps ran before the abort");
    assert.equal(stopped.reason(), "stop");
    assert.equal(stopped.tokens.length, 5);
    assert.deepEqual(released.sort(), ["cancelled:3", "stop:5"]);
    assert.equal(engine.active + engine.waiting, 0);
  } finally {
    await sessions.release();
  }
});

Deno.test("the queue refuses sequences beyond maxBatch + maxQueue", async () => {
  const sessions = new SessionCache({ threads: 1 });
  try {
    const model = await decodeModel("m", config, params, sessions);
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const engine = new DecodeEngine({ maxBatch: 2, maxQueue: 1, beforeStep: () => gate });
    const base = {
      model,
      prompt: prompts[0],
      maxNewTokens: 3,
      sampling: { greedy: true, temperature: 1, topP: 1 },
      seed: 0,
      eosTokenIds: [],
    };
    engine.submit({ ...base, choices: [collector().sink, collector().sink] });
    assert.throws(
      () => engine.submit({ ...base, choices: [collector().sink, collector().sink] }),
      (e: Error) => e.name === "QueueFullError" && /queue is full/.test(e.message),
    );
    engine.submit({ ...base, choices: [collector().sink] });
    assert.equal(engine.waiting, 3);
    open();
    await engine.idle();
  } finally {
    await sessions.release();
  }
});

Deno.test("KvCache.gather aligns rows of two caches at their newest slot and drops the oldest", () => {
  const c = { ...config, num_hidden_layers: 1, num_key_value_heads: 1, head_dim: 1 };
  const fill = (rows: number, used: number, base: number) => {
    const cache = new KvCache(c, rows);
    for (let s = 0; s < used; s++) {
      const slot = Float32Array.from({ length: rows }, (_, r) => base + 10 * r + s);
      cache.append({ "new.0.key": { data: slot }, "new.0.value": { data: slot } } as never, 1);
    }
    return cache;
  };
  const a = fill(2, 5, 100), b = fill(1, 2, 200);
  const g = KvCache.gather([{ cache: a, rows: [1] }, { cache: b, rows: [0, 0] }], 1);
  assert.equal(g.used, 4);
  const k = g.feeds()["past.0.key"].data as Float32Array, cap = g.capacity;
  const row = (r: number) => Array.from(k.subarray(r * cap, r * cap + g.used));
  assert.deepEqual(row(0), [111, 112, 113, 114]);
  assert.deepEqual(row(1), [0, 0, 200, 201]);
  assert.deepEqual(row(2), [0, 0, 200, 201]);
  // a part may end early: the first 3 slots of a's row 0 and nothing of b, aligned at slot 3
  const e = KvCache.gather([{ cache: a, rows: [0], end: 3 }, { cache: b, rows: [0], end: 0 }]);
  assert.equal(e.used, 3);
  const ek = e.feeds()["past.0.key"].data as Float32Array;
  assert.deepEqual(Array.from(ek.subarray(0, 3)), [100, 101, 102]);
  assert.deepEqual(Array.from(ek.subarray(e.capacity, e.capacity + 3)), [0, 0, 0]);
  assert.throws(() => KvCache.gather([{ cache: b, rows: [0], end: 3 }]), RangeError);
});

Deno.test("KvCache.shiftOldest moves a shared prefix next to each row's own slots", () => {
  const c = { ...config, num_hidden_layers: 1, num_key_value_heads: 1, head_dim: 1 };
  const cache = new KvCache(c, 2);
  for (let s = 0; s < 5; s++) {
    const slot = Float32Array.from({ length: 2 }, (_, r) => 1 + 10 * r + s);
    cache.append({ "new.0.key": { data: slot }, "new.0.value": { data: slot } } as never, 1);
  }
  cache.shiftOldest([2, 0], 2); // row 0: [p, p, empty, empty, own] → [0, 0, p, p, own]
  const k = cache.feeds()["past.0.value"].data as Float32Array, cap = cache.capacity;
  const row = (r: number) => Array.from(k.subarray(r * cap, r * cap + cache.used));
  assert.deepEqual(row(0), [0, 0, 1, 2, 5]);
  assert.deepEqual(row(1), [11, 12, 13, 14, 15]);
  assert.throws(() => cache.shiftOldest([4, 0], 2), RangeError);
});

Deno.test("running streams keep decoding while a long prompt is prefilled in windows", async () => {
  const sessions = new SessionCache({ threads: 1 });
  const policy = new Policy(config, params, { threads: 1 });
  try {
    const model = await decodeModel("m", config, params, sessions);
    // 10 columns per prefill call: the 100-token prompt takes 10 windows
    const engine = new DecodeEngine({ maxBatch: 4, maxTokensPerCall: 10 });
    const long = Array.from({ length: 100 }, (_, i) => 1 + ((i * 7) % 12));
    const [expected] = await policy.generate([long], {
      maxNewTokens: 5,
      greedy: true,
      seed: 0,
      eosTokenIds: [],
    });
    const base = { sampling: { greedy: true, temperature: 1, topP: 1 }, seed: 0, eosTokenIds: [] };
    const running = collector();
    let started!: () => void;
    const threeTokens = new Promise<void>((r) => (started = r));
    const sink: ChoiceSink = {
      token: (id, logits) => {
        if (running.tokens.length === 2) started();
        return running.sink.token(id, logits);
      },
      finish: (r, info) => running.sink.finish(r, info),
    };
    engine.submit({ ...base, model, prompt: prompts[0], maxNewTokens: 60, choices: [sink] });
    await threeTokens;
    const before = running.tokens.length;
    let atFirst = -1;
    const joined = collector();
    engine.submit({
      ...base,
      model,
      prompt: long,
      maxNewTokens: 5,
      choices: [{
        token: (id, logits) => {
          if (atFirst < 0) atFirst = running.tokens.length;
          return joined.sink.token(id, logits);
        },
        finish: (r, info) => joined.sink.finish(r, info),
      }],
    });
    await engine.idle();
    // one decode step of the running stream between each two of the 10 windows (9), where it
    // used to wait for the whole prefill (≤ 2 tokens: the step before and the one after)
    assert.ok(atFirst - before >= 9, `the running stream got ${atFirst - before} tokens`);
    assert.deepEqual(joined.tokens, expected.tokens);
    assert.equal(running.tokens.length, 60);
  } finally {
    await sessions.release();
    await policy.release();
  }
});

Deno.test("prefix reuse across admissions and windowed prefill give the same tokens and log-probs as neither", async () => {
  const sessions = new SessionCache({ threads: 1 });
  try {
    const model = await decodeModel("m", config, params, sessions);
    let columns = 0;
    const run = model.session.run.bind(model.session);
    model.session.run = ((feeds: Record<string, { dims: readonly number[] }>) => {
      columns += feeds.input_ids.dims[0] * feeds.input_ids.dims[1];
      return run(feeds as never);
    }) as never;
    // a rollout's shape: 3 tasks × 2 copies over common rules, sent in three waves (one
    // admission each), then a second turn that extends each first-turn prompt
    const rules = [1, 4, 4, 4, 5, 6, 7, 8, 9, 10];
    const tasks = [[11, 3, 2], [12, 12], [5, 9, 9, 1, 3, 7]];
    const turn1 = tasks.flatMap((t) => [[...rules, ...t], [...rules, ...t]]);
    const turn2 = turn1.map((p, i) => [...p, 2 + (i % 3), 6, 6, 1]);
    const waves = [turn1.slice(0, 2), turn1.slice(2, 4), turn1.slice(4), turn2];
    const decode = async (engine: DecodeEngine) => {
      columns = 0;
      const out: { tokens: number[]; logprobs: number[] }[] = [];
      for (const wave of waves) {
        const got = wave.map((prompt, i) => {
          const tokens: number[] = [], logprobs: number[] = [];
          let resolve!: () => void;
          const done = new Promise<void>((r) => (resolve = r));
          engine.submit({
            model,
            prompt,
            maxNewTokens: 6,
            sampling: { greedy: false, temperature: 0.9, topP: 1 },
            seed: 40 + out.length + i,
            eosTokenIds: [],
            topLogprobs: 0,
            choices: [{
              token(id, lp) {
                tokens.push(id);
                logprobs.push(lp!.logprob);
                return false;
              },
              finish: () => resolve(),
            }],
          });
          return { tokens, logprobs, done };
        });
        await Promise.all(got.map((g) => g.done));
        out.push(...got.map(({ tokens, logprobs }) => ({ tokens, logprobs })));
      }
      return { out, columns };
    };
    const plain = await decode(
      new DecodeEngine({
        prefixCacheBytes: 0,
        minSharedPrefix: 10 ** 9,
        maxTokensPerCall: 10 ** 6,
      }),
    );
    const reused = await decode(new DecodeEngine({ minSharedPrefix: 4, maxTokensPerCall: 8 }));
    assert.equal(reused.out.length, 12);
    for (const [i, r] of reused.out.entries()) {
      assert.deepEqual(r.tokens, plain.out[i].tokens, `request ${i}`);
      r.logprobs.forEach((x, k) => {
        assert.ok(Math.abs(x - plain.out[i].logprobs[k]) < 1e-5, `request ${i} token ${k}`);
      });
    }
    // and it fed fewer tokens: decode steps plus prompts' own suffixes only
    assert.ok(reused.columns < plain.columns, `${reused.columns} vs ${plain.columns}`);
  } finally {
    await sessions.release();
  }
});

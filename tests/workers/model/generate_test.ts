import assert from "node:assert/strict";
import { createSession, tensor } from "../../../workers/engine/mod.ts";
import { type DecoderConfig, parameterSpecs } from "../../../workers/model/config.ts";
import { buildDecodeGraph } from "../../../workers/model/llama.ts";
import { Policy } from "../../../workers/model/policy.ts";
import { prefixClasses } from "../../../workers/model/generate.ts";
import { CountingSessions } from "./_sessions.ts";
import type { TokenConstraint } from "../../../workers/model/sampling.ts";
import { randomParameters, TINY_LLAMA, TINY_LLAMA3, TINY_QWEN, TINY_QWEN3 } from "./_tiny.ts";

type Feeds = Record<string, ReturnType<typeof tensor>>;

/** Run the all-positions decode graph on rows of (ids, positions, key mask) with a past cache. */
async function decodeRunner(c: DecoderConfig) {
  const session = await createSession(buildDecodeGraph(c, { lastOnly: false }).toModel());
  const params = randomParameters(c, 9);
  const paramFeeds: Feeds = Object.fromEntries(
    parameterSpecs(c).map((s) => [s.name, tensor("float32", params.get(s.name)!, s.shape)]),
  );
  const empty = (b: number): Feeds => {
    const f: Feeds = {};
    for (let l = 0; l < c.num_hidden_layers; l++) {
      for (const k of ["key", "value"]) {
        f[`past.${l}.${k}`] = tensor("float32", new Float32Array(0), [
          b,
          c.num_key_value_heads,
          0,
          c.head_dim,
        ]);
      }
    }
    return f;
  };
  const step = async (past: Feeds, ids: number[][], pos: number[][], mask: number[][]) => {
    const b = ids.length, t = ids[0].length;
    const r = await session.run({
      ...paramFeeds,
      ...past,
      input_ids: tensor("int64", BigInt64Array.from(ids.flat().map(BigInt)), [b, t]),
      position_ids: tensor("int64", BigInt64Array.from(pos.flat().map(BigInt)), [b, t]),
      attention_mask: tensor("float32", Float32Array.from(mask.flat()), [b, mask[0].length]),
    });
    const next: Feeds = {};
    for (let l = 0; l < c.num_hidden_layers; l++) {
      for (const k of ["key", "value"]) {
        next[`past.${l}.${k}`] = concatKeys(past[`past.${l}.${k}`], r[`new.${l}.${k}`]);
      }
    }
    return { logits: r.logits.data as Float32Array, past: next }; // logits (B, T, V)
  };
  return { session, params, empty, step };
}

/** Cached keys (B, Hkv, P, D) followed by new ones (B, Hkv, T, D) along the token axis. */
function concatKeys(past: ReturnType<typeof tensor>, fresh: ReturnType<typeof tensor>) {
  const [b, h, p, d] = past.dims, t = fresh.dims[2];
  const a = past.data as Float32Array, n = fresh.data as Float32Array;
  const out = new Float32Array(b * h * (p + t) * d);
  for (let r = 0; r < b * h; r++) {
    out.set(a.subarray(r * p * d, (r + 1) * p * d), r * (p + t) * d);
    out.set(n.subarray(r * t * d, (r + 1) * t * d), (r * (p + t) + p) * d);
  }
  return tensor("float32", out, [b, h, p + t, d]);
}

const SEQ = [1, 5, 9, 3, 3, 7, 10, 4];
const range = (a: number, n: number) => Array.from({ length: n }, (_, i) => a + i);

for (const c of [TINY_LLAMA, TINY_QWEN, TINY_QWEN3, TINY_LLAMA3]) {
  const variant = c.rope_scaling ? ", Llama 3 RoPE" : "";
  Deno.test(`KV-cache prefill + steps reproduce the full forward's logits (${c.architecture}${variant})`, async () => {
    const d = await decodeRunner(c);
    const v = c.vocab_size, n = SEQ.length;
    const full = (await d.step(d.empty(1), [SEQ], [range(0, n)], [SEQ.map(() => 1)])).logits;
    let r = await d.step(d.empty(1), [SEQ.slice(0, 3)], [range(0, 3)], [[1, 1, 1]]);
    let maxDiff = 0;
    for (let i = 0; i < 3 * v; i++) maxDiff = Math.max(maxDiff, Math.abs(r.logits[i] - full[i]));
    for (let t = 3; t < n; t++) {
      r = await d.step(r.past, [[SEQ[t]]], [[t]], [Array(t + 1).fill(1)]);
      for (let i = 0; i < v; i++) {
        maxDiff = Math.max(maxDiff, Math.abs(r.logits[i] - full[t * v + i]));
      }
    }
    assert.ok(maxDiff < 1e-4, `max abs diff ${maxDiff}`);
    await d.session.release();
  });
}

Deno.test("a left-padded sequence decodes with the same logits as alone", async () => {
  const c = TINY_LLAMA, v = c.vocab_size;
  const d = await decodeRunner(c);
  const short = [1, 6, 2, 8, 5]; // prompt 3 tokens, then 2 decode steps
  const alone = (await d.step(d.empty(1), [short], [range(0, 5)], [[1, 1, 1, 1, 1]])).logits;
  // batch: SEQ prompt of 6 tokens next to `short`'s 3 tokens left-padded by 3
  let r = await d.step(d.empty(2), [SEQ.slice(0, 6), [0, 0, 0, ...short.slice(0, 3)]], [
    range(0, 6),
    [0, 0, 0, 0, 1, 2],
  ], [
    [1, 1, 1, 1, 1, 1],
    [0, 0, 0, 1, 1, 1],
  ]);
  let maxDiff = 0;
  const row = (logits: Float32Array, b: number, t: number, tt: number) =>
    logits.subarray((b * tt + t) * v, (b * tt + t + 1) * v);
  for (let t = 0; t < 3; t++) {
    const got = row(r.logits, 1, 3 + t, 6), want = alone.subarray(t * v, (t + 1) * v);
    for (let i = 0; i < v; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i] - want[i]));
  }
  for (let s = 0; s < 2; s++) {
    const mask = [[...Array(7 + s).fill(1)], [0, 0, 0, ...Array(4 + s).fill(1)]];
    r = await d.step(r.past, [[SEQ[6 + s]], [short[3 + s]]], [[6 + s], [3 + s]], mask);
    const got = row(r.logits, 1, 0, 1), want = alone.subarray((3 + s) * v, (4 + s) * v);
    for (let i = 0; i < v; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i] - want[i]));
  }
  assert.ok(maxDiff < 1e-4, `max abs diff ${maxDiff}`);
  await d.session.release();
});

const PROMPTS = [[1, 5, 9], [1, 4], [1, 7, 7, 3, 8]];

Deno.test("generation with the same seed is identical and another seed differs", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 4));
  const opts = { maxNewTokens: 12, seed: 42, eosTokenIds: [] };
  const a = await policy.generate(PROMPTS, opts);
  const b = await policy.generate(PROMPTS, opts);
  const c = await policy.generate(PROMPTS, { ...opts, seed: 43 });
  assert.deepEqual(a, b);
  assert.notDeepEqual(a.map((x) => x.tokens), c.map((x) => x.tokens));
  assert.ok(a.every((x) => x.tokens.length === 12 && x.finishReason === "length"));
  await policy.release();
});

Deno.test("greedy generation picks the arg-max of the full forward's logits at every step", async () => {
  const c = TINY_QWEN;
  const d = await decodeRunner(c);
  const policy = new Policy(c, d.params);
  const [gen] = await policy.generate([PROMPTS[0]], {
    maxNewTokens: 6,
    greedy: true,
    eosTokenIds: [],
  });
  const seq = [...PROMPTS[0], ...gen.tokens];
  const logits =
    (await d.step(d.empty(1), [seq], [range(0, seq.length)], [seq.map(() => 1)])).logits;
  const v = c.vocab_size;
  gen.tokens.forEach((tok, k) => {
    const at = PROMPTS[0].length - 1 + k;
    const row = Array.from(logits.subarray(at * v, (at + 1) * v));
    assert.equal(tok, row.indexOf(Math.max(...row)), `step ${k}`);
  });
  await d.session.release();
  await policy.release();
});

Deno.test("sequences that finish early leave the batch without changing the others' tokens", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 4));
  // 5 rows: the first to finish lingers (1 < 5/4), later ones are compacted away; 40 tokens
  // outgrow the first cache chunk.
  const prompts = [...PROMPTS, [1, 2, 3], [1, 10, 9, 8, 7, 6, 5]];
  const limits = [2, 40, 5, 3, 37];
  const batched = await policy.generate(prompts, {
    maxNewTokens: limits,
    greedy: true,
    eosTokenIds: [],
  });
  for (let i = 0; i < prompts.length; i++) {
    const [alone] = await policy.generate([prompts[i]], {
      maxNewTokens: limits[i],
      greedy: true,
      eosTokenIds: [],
    });
    assert.deepEqual(batched[i].tokens, alone.tokens);
    assert.equal(batched[i].tokens.length, limits[i]);
  }
  await policy.release();
});

Deno.test("EOS and stop strings end a sequence; the text is cut right after the stop string", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 4));
  const detokenize = (ids: number[]) => ids.map((i) => String.fromCharCode(97 + i)).join("");
  const [free] = await policy.generate([PROMPTS[0]], {
    maxNewTokens: 6,
    greedy: true,
    eosTokenIds: [],
    detokenize,
  });
  const [eos] = await policy.generate([PROMPTS[0]], {
    maxNewTokens: 6,
    greedy: true,
    eosTokenIds: [free.tokens[1]],
  });
  assert.equal(eos.finishReason, "eos");
  assert.deepEqual(eos.tokens, free.tokens.slice(0, free.tokens.indexOf(free.tokens[1]) + 1));
  const stop = free.text!.slice(2, 4);
  const [stopped] = await policy.generate([PROMPTS[0]], {
    maxNewTokens: 6,
    greedy: true,
    eosTokenIds: [],
    stop: [stop],
    detokenize,
  });
  assert.equal(stopped.finishReason, "stop");
  assert.equal(stopped.text, free.text!.slice(0, free.text!.indexOf(stop) + stop.length));
  await policy.release();
});

Deno.test("prompts split over several decode groups give the same samples as one group", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 4));
  const prompts = [...PROMPTS, [1, 2, 3, 4, 5, 6, 7], [1, 9]];
  const opts = { maxNewTokens: 6, seed: 7, eosTokenIds: [] };
  const one = await policy.generate(prompts, opts);
  const many = await policy.generate(prompts, { ...opts, maxBatch: 2 });
  assert.deepEqual(many, one);
  await policy.release();
});

Deno.test("a prompt prefilled in several short calls generates the same tokens", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 4));
  const opts = { maxNewTokens: 8, greedy: true, eosTokenIds: [] };
  const whole = await policy.generate(PROMPTS, opts);
  const windows = await policy.generate(PROMPTS, { ...opts, maxTokensPerCall: 3 * 2 }); // 2 columns
  assert.deepEqual(windows, whole);
  await policy.release();
});

Deno.test("the decode graph's log-probs equal the score graph's", async () => {
  const c = TINY_QWEN, v = c.vocab_size;
  const d = await decodeRunner(c);
  const logits =
    (await d.step(d.empty(1), [SEQ], [range(0, SEQ.length)], [SEQ.map(() => 1)])).logits;
  const policy = new Policy(c, d.params);
  const [scored] = (await policy.score([{ prompt: [SEQ[0]], response: SEQ.slice(1) }])).logprobs;
  for (let t = 0; t + 1 < SEQ.length; t++) {
    const row = Array.from(logits.subarray(t * v, (t + 1) * v));
    const m = Math.max(...row), lse = m + Math.log(row.reduce((s, x) => s + Math.exp(x - m), 0));
    assert.ok(Math.abs(scored[t] - (row[SEQ[t + 1]] - lse)) < 1e-4, `position ${t}`);
  }
  await d.session.release();
  await policy.release();
});

/**
 * Two families of prompts with shared prefixes (5 and 4 tokens, 2 in common; in each, one prompt
 * begins with another) and one prompt alone. Token ids < 11 (the tiny vocabularies).
 */
const FAMILIES = [
  [3, 4, 5, 6, 7, 1, 2],
  [3, 4, 5, 6, 7, 1],
  [3, 4, 5, 6, 7, 2, 1, 2],
  [3, 4, 8, 9, 1],
  [3, 4, 8, 9, 2, 1],
  [10, 2, 1],
  [3, 4, 8, 9, 2, 1, 10, 10],
];

Deno.test("prefix classes split prompts where sharing saves the most prefill", () => {
  const { classOf, prefixes } = prefixClasses(FAMILIES);
  const of = (i: number) => (classOf[i] < 0 ? null : prefixes[classOf[i]]);
  for (const i of [0, 1, 2]) assert.deepEqual(of(i), [3, 4, 5, 6, 7]);
  // each prefix stops one token short of its family's shortest prompt (6 and 5 tokens)
  for (const i of [3, 4, 6]) assert.deepEqual(of(i), [3, 4, 8, 9]);
  assert.equal(of(5), null);
  // one class over all six would save 5 × 2 tokens; two classes save 2 × 5 + 2 × 4
  assert.equal(prefixes.length, 2);
  assert.deepEqual(prefixClasses([[1, 2], [3, 4]]).prefixes, []);
});

Deno.test("prompts that share prefixes generate the same tokens with each prefix prefilled once", async () => {
  for (const [seed, greedy] of [[0, true], [5, false]] as const) {
    for (const maxTokensPerCall of [undefined, 3 * 7]) {
      const plain = new CountingSessions(), shared = new CountingSessions();
      const params = randomParameters(TINY_QWEN, 4);
      const a = new Policy(TINY_QWEN, params, { sessions: plain });
      const b = new Policy(TINY_QWEN, params, { sessions: shared });
      const opts = {
        maxNewTokens: [6, 9, 4, 7, 5, 6, 8],
        greedy,
        seed,
        eosTokenIds: [],
        maxTokensPerCall,
      };
      const want = await a.generate(FAMILIES, opts);
      const got = await b.generate(FAMILIES, { ...opts, sharePrefixes: true });
      const at = `greedy ${greedy}, ${maxTokensPerCall} tokens per call`;
      assert.deepEqual(got, want, at);
      // fed once: 5 + 4 prefix tokens instead of 3 × 5 + 3 × 4 (the windows pad the rest)
      assert.ok(
        shared.tokens < plain.tokens,
        `${at}: ${shared.tokens} vs ${plain.tokens} tokens fed`,
      );
      await a.release();
      await b.release();
    }
  }
});

/**
 * A constraint that makes the tokens after the `after`-th one be `forced` — through
 * `forcedTokens` under jump-forward, else by masking every other token — and allows any token
 * elsewhere, recording a copy of the logits of each such free draw; complete after `total`.
 */
function forcing(forced: number[], after: number, total: number) {
  const seen: Float32Array[] = [];
  let n = 0, k = 0; // tokens accepted, forced tokens among them
  const inForced = () => n >= after && k < forced.length;
  const constraint: TokenConstraint = {
    maskLogits(logits) {
      if (inForced()) logits.forEach((_, t) => t !== forced[k] && (logits[t] = -Infinity));
      else seen.push(Float32Array.from(logits));
    },
    accept(token) {
      if (inForced()) assert.equal(token, forced[k++]);
      return ++n === total;
    },
    forcedTokens: () => (n === after && k === 0 ? forced : []),
  };
  return { constraint, seen };
}

/** Largest absolute difference between two lists of logit rows of equal shapes. */
function maxAbsDiff(a: Float32Array[], b: Float32Array[]): number {
  assert.equal(a.length, b.length);
  let d = 0;
  a.forEach((row, k) => row.forEach((x, t) => (d = Math.max(d, Math.abs(x - b[k][t])))));
  return d;
}

Deno.test("a row left-padded within a decode call gets the logits of drawing every token alone", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 4));
  const prompts = [[1, 5, 9, 4], [1, 7]];
  // row 0 is forced 4 tokens after its 2nd: in that call row 1's one token is left-padded by 3
  const make = () => [forcing([3, 4, 5, 6], 2, 9), forcing([], 0, 7)];
  const run = async (rows: number[], jumpForward: boolean) => {
    const made = make();
    const out = await policy.generate(rows.map((i) => prompts[i]), {
      maxNewTokens: 12,
      greedy: true,
      eosTokenIds: [],
      constraint: (j) => made[rows[j]].constraint,
      jumpForward,
    });
    return { tokens: out.map((g) => g.tokens), seen: rows.map((i) => made[i].seen), out };
  };
  const together = await run([0, 1], true);
  assert.deepEqual(together.tokens[0].slice(2, 6), [3, 4, 5, 6]);
  assert.deepEqual(together.out.map((g) => [g.tokens.length, g.finishReason]), [
    [9, "stop"],
    [7, "stop"],
  ]);
  assert.deepEqual(together.seen.map((x) => x.length), [5, 7], "forced tokens are not drawn");
  // the reference: every token drawn (the forced ones through the mask), one column per call
  const drawn = await run([0, 1], false);
  assert.deepEqual(together.tokens, drawn.tokens);
  for (const i of [0, 1]) {
    const d = maxAbsDiff(together.seen[i], drawn.seen[i]);
    assert.ok(d < 1e-4, `row ${i}: max abs diff ${d} from drawing every token`);
    const alone = await run([i], true);
    assert.deepEqual(alone.tokens[0], together.tokens[i]);
    const a = maxAbsDiff(together.seen[i], alone.seen[0]);
    assert.ok(a < 1e-4, `row ${i}: max abs diff ${a} from decoding alone`);
  }
  await policy.release();
});

Deno.test("forced tokens fed over several decode calls, a few columns each, give the same tokens", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 4));
  const prompts = [[1, 5, 9, 4], [1, 7], [1, 8, 8]];
  const run = async (maxTokensPerCall?: number) => {
    const rows = [forcing([3, 4, 5, 6, 7, 8, 9], 1, 12), forcing([4, 4], 3, 10), forcing([], 0, 6)];
    const out = await policy.generate(prompts, {
      maxNewTokens: 16,
      greedy: true,
      eosTokenIds: [],
      constraint: (i) => rows[i].constraint,
      maxTokensPerCall,
    });
    return out.map((g) => g.tokens);
  };
  const whole = await run();
  assert.deepEqual(whole[0].slice(1, 8), [3, 4, 5, 6, 7, 8, 9]);
  assert.deepEqual(await run(6), whole); // 2 columns per call: row 0's 8 pending take 4 calls
  await policy.release();
});

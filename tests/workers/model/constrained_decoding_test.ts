import assert from "node:assert/strict";
import type * as ort from "onnxruntime-node";
import { createSession, tensor } from "../../../workers/engine/mod.ts";
import {
  buildByteLevelTokenizer,
  buildDecodeGraph,
  compileTextPattern,
  ConstraintError,
  type DecodeRunner,
  generate,
  JsonConstrainedDecoder,
  type JsonObjectSchema,
  parameterSpecs,
  Policy,
  Rng,
  sampleToken,
  STATE_FIELDS,
  tokenBytes,
  type TokenConstraint,
  Tokenizer,
} from "../../../workers/model/mod.ts";
import { gpt2Tokenizer } from "./_gpt2.ts";
import { randomParameters, TINY_LLAMA } from "./_tiny.ts";

const GPT2 = gpt2Tokenizer({ cleanUp: false });
const BUILTIN = new Tokenizer(
  buildByteLevelTokenizer(["box", "push", "never", "target", "wall", "name", "note", "id"]),
);
/** A schema unlike the analyzer's: three fields, tight bounds, no whitespace. */
const SCHEMA: JsonObjectSchema = {
  fields: [
    { name: "id", maxUnits: 6, requireAlnum: true },
    { name: "name", maxUnits: 12 },
    { name: "note", maxUnits: 3 },
  ],
  maxWhitespace: 0,
};
const BLOCKED = 0xffff;

/** Token ids whose bytes hold a JSON special byte or a non-ASCII byte (drawn more often). */
function trickyIds(tokens: (Uint8Array | null)[]): number[] {
  return tokens.flatMap((b, id) =>
    b && b.some((x) => x === 0x22 || x === 0x5c || x === 0x7d || x === 0x2c || x >= 0x80)
      ? [id]
      : []
  );
}

/**
 * Decodes under `decoder` with random logits: N(0, 3²) noise, tricky tokens boosted on half the
 * steps, greedy on odd seeds. Returns the token ids.
 */
function randomRun(
  decoder: JsonConstrainedDecoder,
  tricky: number[],
  seed: number,
  budget: number,
) {
  const rng = new Rng(seed), c = decoder.start(), ids: number[] = [];
  const logits = new Float32Array(decoder.vocabSize);
  /** Jump-forward (on two seeds in three): accepts the forced tokens; true when they close. */
  const jump = () => {
    if (seed % 3 === 0) return false;
    for (const id of c.forcedTokens(budget - ids.length)) {
      ids.push(id);
      if (c.accept(id)) return true;
    }
    return false;
  };
  if (jump()) return { ids, done: true };
  while (ids.length < budget) {
    for (let i = 0; i < logits.length; i++) logits[i] = (rng.next() - 0.5) * 10;
    if (rng.next() < 0.5) { for (const id of tricky) logits[id] += rng.next() * 8; }
    c.maskLogits(logits, budget - ids.length);
    const id = sampleToken(logits, { greedy: seed % 2 === 1, temperature: 1, topP: 1 }, rng);
    ids.push(id);
    if (c.accept(id) || jump()) return { ids, done: true };
  }
  return { ids, done: false };
}

Deno.test("token bytes concatenate to exactly the text decode returns (builtin and GPT-2)", () => {
  for (const tok of [BUILTIN, GPT2]) {
    const bytes = tokenBytes(tok);
    const ids = bytes.flatMap((b, id) => (b ? [id] : []));
    const rng = new Rng(7);
    let checked = 0;
    while (checked < 200) {
      const seq = Array.from({ length: 12 }, () => ids[rng.nextInt(ids.length)]);
      const all = Uint8Array.from(seq.flatMap((id) => [...bytes[id]!]));
      let text: string;
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(all);
      } catch {
        continue; // a split character: decode's replacement characters are not compared
      }
      assert.equal(tok.decode(seq, { skipSpecialTokens: true }), text);
      checked++;
    }
    const eos = tok.eosTokenId!;
    assert.equal(bytes[eos], null, "special tokens write nothing and are never allowed");
  }
});

Deno.test("the mask allows exactly the tokens the automaton accepts, each with the cost of its successor", () => {
  const decoder = new JsonConstrainedDecoder(tokenBytes(GPT2), SCHEMA);
  const a = decoder.automaton;
  const prefixes = [
    '{"id":"',
    '{"id":"a\\u00',
    '{"id":"x","name":"\u00e9',
    '{"id":"abcde',
    '{"id":"a",',
  ];
  const st = new Int32Array(2 * STATE_FIELDS);
  for (const prefix of prefixes) {
    a.init(st, 0);
    for (const b of new TextEncoder().encode(prefix)) assert.ok(a.step(st, 0, b), prefix);
    const costs = decoder.costsAfter(st, 0);
    let allowed = 0;
    for (let id = 0; id < decoder.vocabSize; id++) {
      const bytes = decoder.bytesOf(id);
      st.copyWithin(STATE_FIELDS, 0, STATE_FIELDS);
      let ok = bytes !== null;
      for (let i = 0; ok && i < bytes!.length; i++) ok = a.step(st, STATE_FIELDS, bytes![i]);
      const expected = ok ? decoder.cost(st, STATE_FIELDS) : BLOCKED;
      if (costs[id] !== expected) {
        assert.fail(`${prefix}: token ${id} cost ${costs[id]} ≠ ${expected}`);
      }
      if (ok) allowed++;
    }
    assert.ok(allowed > 0 && allowed < decoder.vocabSize, `${prefix}: ${allowed} allowed`);
  }
  // from the start only tokens made of `{` (and nothing after it) qualify: no whitespace here
  a.init(st, 0);
  const first = decoder.costsAfter(st, 0);
  const starts = [...first.keys()].filter((id) => first[id] !== BLOCKED)
    .map((id) => new TextDecoder().decode(decoder.bytesOf(id)!));
  assert.ok(starts.includes("{") && starts.includes('{"'), JSON.stringify(starts));
  assert.ok(starts.every((s) => '{"id":"'.startsWith(s)), JSON.stringify(starts));
});

Deno.test("random logits always give an object of the schema within the budget, down to the smallest budget, with and without jump-forward", () => {
  for (const tok of [BUILTIN, GPT2]) {
    const bytes = tokenBytes(tok);
    const decoder = new JsonConstrainedDecoder(bytes, SCHEMA);
    const tricky = trickyIds(bytes);
    const seeds = tok === GPT2 ? 60 : 300;
    for (let seed = 0; seed < seeds; seed++) {
      const budget = decoder.minTokens + (seed % 12);
      const { ids, done } = randomRun(decoder, tricky, seed, budget);
      const text = tok.decode(ids, { skipSpecialTokens: true });
      assert.ok(done && ids.length <= budget, `seed ${seed}: ${ids.length}/${budget} ${text}`);
      const value = JSON.parse(text);
      assert.deepEqual(Object.keys(value), ["id", "name", "note"], text);
      assert.match(value.id, /[\p{L}\p{N}]/u);
      assert.ok(value.id.length <= 6 && value.name.length <= 12 && value.note.length <= 3, text);
    }
  }
});

Deno.test("in a pattern value the cached mask still leaves room for the shortest sentence after each byte", () => {
  // single-byte tokens: the trie's lookahead is 1, so rooms of 3 and more once shared one mask
  const tokens = Array.from({ length: 128 }, (_, b) => Uint8Array.of(b));
  const pattern = compileTextPattern({ seq: [{ repeat: "a", min: 0 }, "bbbbb"] });
  const decoder = new JsonConstrainedDecoder(tokens, {
    fields: [{ name: "s", maxUnits: 8, pattern }],
    maxWhitespace: 0,
  });
  const c = decoder.start(), ids: number[] = [];
  const A = "a".charCodeAt(0);
  for (let remaining = 64; !c.done; remaining--) {
    const logits = new Float32Array(128);
    logits[A] = 1; // the model wants one more "a" every time it may write one
    c.maskLogits(logits, remaining);
    const id = sampleToken(logits, { greedy: true, temperature: 1, topP: 1 }, new Rng(0));
    ids.push(id);
    c.accept(id);
  }
  // 8 bytes hold at most three a's before the five b's
  assert.equal(String.fromCharCode(...ids), '{"s":"aaabbbbb"}');
});

Deno.test("a budget below the shortest object, or a vocabulary that cannot write it, is refused", () => {
  const decoder = new JsonConstrainedDecoder(tokenBytes(GPT2), SCHEMA);
  assert.ok(
    decoder.minTokens >= 5,
    `GPT-2 writes ${decoder.exampleObject()} in ${decoder.minTokens}`,
  );
  assert.equal(decoder.exampleObject(), '{"id":"a","name":"","note":""}');
  const logits = new Float32Array(decoder.vocabSize);
  assert.throws(() => decoder.start().maskLogits(logits, decoder.minTokens - 1), ConstraintError);
  decoder.start().maskLogits(logits, decoder.minTokens); // exactly enough: no throw
  const noBrace = tokenBytes(BUILTIN).map((b) => (b && b.includes(0x7d) ? null : b));
  assert.throws(() => new JsonConstrainedDecoder(noBrace, SCHEMA), /must spell/);
  const c = decoder.start();
  assert.throws(() => c.accept(GPT2.encode("}")[0]), /must continue the JSON object/);
});

Deno.test("generate applies a row's constraint before each draw and stops the row when it completes", async () => {
  const policy = new Policy(TINY_LLAMA, randomParameters(TINY_LLAMA, 4));
  const forced = [3, 5, 7];
  /** Allows only the next token of `forced`; complete after the last. */
  const only = (): TokenConstraint => {
    let k = 0;
    return {
      maskLogits(logits, remaining) {
        assert.ok(remaining >= forced.length - k);
        logits.forEach((_, t) => (logits[t] = t === forced[k] ? logits[t] : -Infinity));
      },
      accept: (token) => (assert.equal(token, forced[k]), ++k === forced.length),
    };
  };
  const prompts = [[1, 4], [1, 6, 8]];
  const free = await policy.generate(prompts, { maxNewTokens: 6, greedy: true, eosTokenIds: [] });
  for (const greedy of [true, false]) {
    const out = await policy.generate(prompts, {
      maxNewTokens: 6,
      greedy,
      eosTokenIds: [],
      constraint: (i) => (i === 0 ? only() : null),
    });
    assert.deepEqual(out[0], { tokens: forced, finishReason: "stop" });
    if (greedy) assert.deepEqual(out[1], free[1]); // an unconstrained row is untouched
  }
  await policy.release();
});

/** Decoded text of token ids (UTF-8). */
const textOf = (decoder: JsonConstrainedDecoder, ids: number[]) =>
  new TextDecoder().decode(Uint8Array.from(ids.flatMap((id) => [...decoder.bytesOf(id)!])));

Deno.test("forced tokens spell the forced run, leaving its last token to the model where a longer one could start with it", () => {
  const pattern = compileTextPattern({ seq: ["push it ", { oneOf: ["right", "up"] }] });
  const decoder = new JsonConstrainedDecoder(tokenBytes(GPT2), {
    fields: [{ name: "s", maxUnits: 20, pattern }],
    maxWhitespace: 0,
  });
  const c = decoder.start();
  const start = c.forcedTokens(64);
  // `{"s":"push it ` in GPT-2's fewest tokens is `{"`,`s`,`":"`,`push`,` it`,` `: the space is
  // left to the model (` right` and ` up` are tokens)
  assert.deepEqual(start.map((id) => textOf(decoder, [id])), ['{"', "s", '":"', "push", " it"]);
  for (const id of start) assert.equal(c.accept(id), false);
  assert.deepEqual(c.forcedTokens(64), [], "the next token is the model's choice");
  assert.equal(c.accept(GPT2.encode(" right")[0]), false);
  // after the last choice the rest closes the object, so it is forced whole
  const end = c.forcedTokens(64);
  assert.equal(textOf(decoder, end), '"}');
  assert.equal(end.map((id) => c.accept(id)).at(-1), true);
  assert.deepEqual(c.forcedTokens(64), [], "nothing once the object is closed");
});

Deno.test("forced tokens stop where the object could no longer close within the budget", () => {
  // single bytes, `xy` and `yzc"}`: the run `{"s":"xyz` is 8 tokens (`xy`,`z`), but the
  // shortest object `{"s":"xyzc"}` is also 8 (`x`,`yzc"}`), so with 8 tokens left only the
  // first 6 may be forced (then `x`,`yzc"}` still fit)
  const utf8 = new TextEncoder();
  const tokens = [
    ...Array.from({ length: 128 }, (_, b) => Uint8Array.of(b)),
    utf8.encode("xy"),
    utf8.encode('yzc"}'),
  ];
  const pattern = compileTextPattern({ seq: ["xyz", { oneOf: ["c", "d"] }] });
  const decoder = new JsonConstrainedDecoder(tokens, {
    fields: [{ name: "s", maxUnits: 8, pattern }],
    maxWhitespace: 0,
  });
  assert.equal(decoder.minTokens, 8);
  const spell = (ids: number[]) => textOf(decoder, ids);
  assert.equal(spell(decoder.start().forcedTokens(20)), '{"s":"xyz');
  assert.deepEqual(decoder.start().forcedTokens(20).slice(-2), [128, "z".charCodeAt(0)]);
  const tight = decoder.start(), forced = tight.forcedTokens(8);
  assert.equal(spell(forced), '{"s":"');
  forced.forEach((id) => tight.accept(id));
  assert.equal(tight.tokensToFinish(), 2);
  assert.deepEqual(decoder.start().forcedTokens(0), []);
});

/**
 * Token bytes of a small vocabulary for a tiny model: ids 0–2 special (no bytes), 3–127 the byte
 * of the same value, then a few words as BPE would merge them.
 */
const WORDS = ['{"', '":"', '"}', " then ", " the", " box", "push", " it", " up", " left", "Walk"];
const SMALL_VOCAB: (Uint8Array | null)[] = [
  null,
  null,
  null,
  ...Array.from({ length: 125 }, (_, i) => Uint8Array.of(i + 3)),
  ...WORDS.map((w) => new TextEncoder().encode(w)),
];

/** A tiny random model over SMALL_VOCAB whose decode-session calls are counted. */
async function countingRunner() {
  const config = { ...TINY_LLAMA, vocab_size: SMALL_VOCAB.length, max_position_embeddings: 256 };
  const session = await createSession(buildDecodeGraph(config, { lastOnly: true }).toModel());
  const params = randomParameters(config, 5);
  const counter = { runs: 0 };
  const runner: DecodeRunner = {
    config,
    session: {
      run: (feeds: ort.InferenceSession.FeedsType) => (counter.runs++, session.run(feeds)),
    } as unknown as ort.InferenceSession,
    parameters: Object.fromEntries(
      parameterSpecs(config).map((p) => [p.name, tensor("float32", params.get(p.name)!, p.shape)]),
    ),
  };
  return { runner, counter, release: () => session.release() };
}

/** Generates under `schema` on the counting runner; returns texts, tokens and decode calls. */
async function decodeUnder(
  schema: JsonObjectSchema,
  prompts: number[][],
  options: {
    jumpForward?: boolean;
    greedy?: boolean;
    maxNewTokens?: number;
    sharePrefixes?: boolean;
  } = {},
) {
  const { runner, counter, release } = await countingRunner();
  const decoder = new JsonConstrainedDecoder(SMALL_VOCAB, schema);
  const out = await generate(runner, prompts, {
    maxNewTokens: options.maxNewTokens ?? 96,
    greedy: options.greedy ?? false,
    seed: 3,
    eosTokenIds: [],
    constraint: () => decoder.start(),
    jumpForward: options.jumpForward,
    sharePrefixes: options.sharePrefixes,
  });
  await release();
  const texts = out.map((g) => textOf(decoder, g.tokens));
  return { out, texts, runs: counter.runs };
}

const PROMPTS = [[1, 40, 50], [1, 60], [1, 70, 71, 72, 73]];

Deno.test("a schema whose text is fully forced is generated exactly, with no decode call", async () => {
  const pattern = compileTextPattern("Walk behind the box, then push it up.");
  const schema = { fields: [{ name: "episode_skill", maxUnits: 60, pattern }], maxWhitespace: 0 };
  const whole = '{"episode_skill":"Walk behind the box, then push it up."}';
  const on = await decodeUnder(schema, PROMPTS);
  assert.deepEqual(on.texts, PROMPTS.map(() => whole));
  assert.ok(on.out.every((g) => g.finishReason === "stop" && g.tokens.length >= 20));
  assert.equal(on.runs, 0);
  const off = await decodeUnder(schema, PROMPTS, { jumpForward: false });
  assert.deepEqual(off.texts, on.texts);
  // without jump-forward: the prefill, then one call per token but the last
  assert.equal(off.runs, 1 + Math.max(...off.out.map((g) => g.tokens.length)) - 1);
});

Deno.test("a mostly forced schema is decoded in about as many calls as it has choices, into sentences of its pattern", async () => {
  const pattern = compileTextPattern({
    seq: [
      "Walk behind ",
      { oneOf: ["the box", "each box"] },
      ", then push it ",
      { repeat: { oneOf: ["up", "left", "down"] }, separator: " then " },
      " onto the target.",
    ],
  });
  const schema = { fields: [{ name: "s", maxUnits: 100, pattern }], maxWhitespace: 0 };
  const prompts = [...PROMPTS, [1, 9], [1, 33, 34]];
  for (const greedy of [true, false]) {
    const on = await decodeUnder(schema, prompts, { greedy });
    const off = await decodeUnder(schema, prompts, { greedy, jumpForward: false });
    for (const text of [...on.texts, ...off.texts]) {
      const { s } = JSON.parse(text);
      assert.ok(pattern.matches(s), text);
    }
    // choices: the box, then per direction which one and whether another follows; a random
    // model may spell a choice in up to 3 tokens (` `, `t`, `he` … where ` the` would do)
    const longest = Math.max(...on.out.map((g) => g.tokens.length));
    const choices = Math.max(...on.texts.map((t) => 3 * t.split(" then ").length));
    assert.ok(on.runs <= 1 + choices, `${on.runs} calls for ≤ ${choices} choices: ${on.texts}`);
    assert.ok(on.runs * 3 < longest, `${on.runs} calls for ${longest} tokens`);
    assert.ok(off.runs >= Math.max(...off.out.map((g) => g.tokens.length)));
  }
});

Deno.test("a forced token that completes the object ends the row there", async () => {
  const pattern = compileTextPattern({ seq: [{ oneOf: ["up", "left"] }, " then stop"] });
  const schema = { fields: [{ name: "s", maxUnits: 20, pattern }], maxWhitespace: 0 };
  const { out, texts, runs } = await decodeUnder(schema, PROMPTS, { maxNewTokens: 40 });
  for (const [i, g] of out.entries()) {
    assert.match(texts[i], /^\{"s":"(up|left) then stop"\}$/);
    assert.equal(g.finishReason, "stop");
    assert.equal(textOf(new JsonConstrainedDecoder(SMALL_VOCAB, schema), [g.tokens.at(-1)!]), '"}');
  }
  // `{"s":"` is prefilled, one call draws `up`/`left` (or ` ` `u`…): the rest is forced
  assert.ok(runs <= 3, `${runs} calls`);
});

Deno.test("jump-forward with shared prompt prefixes writes the same texts as each alone", async () => {
  const pattern = compileTextPattern({
    seq: ["push it ", { repeat: { oneOf: ["up", "left", "down"] }, separator: " then " }, "."],
  });
  const schema = { fields: [{ name: "s", maxUnits: 60, pattern }], maxWhitespace: 0 };
  // three prompts share `1 40 50 60`, two of them are equal: the forced start follows the prefix
  const prompts = [[1, 40, 50, 60, 7], [1, 40, 50, 60, 8, 9], [1, 40, 50, 60, 7], [1, 33]];
  const plain = await decodeUnder(schema, prompts, { greedy: true });
  const shared = await decodeUnder(schema, prompts, { greedy: true, sharePrefixes: true });
  assert.deepEqual(shared.texts, plain.texts);
  assert.equal(shared.texts[0], shared.texts[2]);
  for (const t of plain.texts) assert.ok(pattern.matches(JSON.parse(t).s), t);
});

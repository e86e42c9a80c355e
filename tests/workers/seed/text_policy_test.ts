import assert from "node:assert/strict";
import {
  AdamW,
  buildByteLevelTokenizer,
  clipGradNorm,
  ConstraintError,
  type DecoderConfig,
  IMAGE_PLACEHOLDER,
  parameterSpecs,
  Policy,
  TOKEN_NLL,
  Tokenizer,
  TokenizerError,
} from "../../../workers/model/mod.ts";
import { TextPolicy, withoutImagePlaceholders } from "../../../workers/seed/text_policy.ts";
import { analysisSchema, analysisTarget, parseSkillAnalysis } from "../../../workers/skills/mod.ts";
import { analyzerTemplateVocabulary } from "../../../workers/seed/run/model_source.ts";
import { randomParameters, TINY_LLAMA } from "../model/_tiny.ts";

Deno.test("generated text loses every image placeholder, including ones that removal would form", () => {
  assert.equal(IMAGE_PLACEHOLDER, "<image>");
  // One replaceAll pass left "<image>" here, an image slot for any later prompt quoting it.
  assert.equal(withoutImagePlaceholders("search[<im<image>age>]"), "search[]");
  assert.equal(withoutImagePlaceholders("<<im<image>age>im<image>age>x"), "x");
  assert.equal(withoutImagePlaceholders("<action>up</action> <image>"), "<action>up</action> ");
  assert.equal(withoutImagePlaceholders("<imag e> stays"), "<imag e> stays");
});

/** A small decoder sized to `tok` (2 layers, width 32), parameters from `seed`. */
function smallPolicy(tok: Tokenizer, seed: number): Policy {
  const c: DecoderConfig = {
    ...TINY_LLAMA,
    vocab_size: tok.vocabSize,
    hidden_size: 32,
    intermediate_size: 64,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 8,
    max_position_embeddings: 128,
    bos_token_id: null,
    eos_token_id: tok.eosTokenId,
    pad_token_id: tok.padTokenId,
  };
  return new Policy(c, randomParameters(c, seed, 0.3));
}

const ANALYZER_WORDS = [...analyzerTemplateVocabulary(), "Never", "push", "box", "won", "corner"];

Deno.test("a model that already writes valid analyses writes the same text under the schema", async () => {
  const tok = new Tokenizer(buildByteLevelTokenizer(ANALYZER_WORDS));
  const policy = smallPolicy(tok, 8);
  const text = new TextPolicy(policy, tok);
  const targets = [
    { episode_skill: 'Never push a "box" into a corner \\ é', episode_summary: "won" },
    { episode_skill: "push box", episode_summary: "Never 中" },
  ].map(analysisTarget);
  const prompts = ["Outcome: success", "Outcome: failure"];
  const corpus = prompts.map((p, i) => text.sample(p, targets[i], true));
  const opt = new AdamW(parameterSpecs(policy.config), { lr: 1e-2, weightDecay: 0 });
  let loss = Infinity;
  for (let step = 0; step < 300 && loss > 0.01; step++) {
    const r = await policy.trainStep(TOKEN_NLL, corpus);
    loss = r.outputs.loss;
    clipGradNorm(r.grads, 1);
    opt.step(policy.params, r.grads);
  }
  assert.ok(loss <= 0.01, `SFT loss ${loss}`);
  const base = { maxNewTokens: 80, temperature: 0, seed: 0 };
  const free = await text.generate(prompts, { ...base, stop: ['"}'] });
  const constrained = await text.generate(prompts, { ...base, schema: analysisSchema() });
  assert.deepEqual(free.texts, targets);
  assert.deepEqual(constrained.texts, targets);
  // the free run stops at the stop string, the constrained one when the object closes
  assert.equal(constrained.tokens, free.tokens);
  await policy.release();
});

Deno.test("an untrained model decoding under the schema writes analyses that all parse, batched", async () => {
  const tok = new Tokenizer(buildByteLevelTokenizer(ANALYZER_WORDS));
  const policy = smallPolicy(tok, 3);
  const text = new TextPolicy(policy, tok);
  const min = text.jsonDecoder(analysisSchema()).minTokens;
  const prompts = Array.from(
    { length: 6 },
    (_, i) => `Outcome: ${i % 2 ? "success" : "failure"} ${i}`,
  );
  for (const maxNewTokens of [min, min + 3, 64]) {
    for (const temperature of [0, 1]) {
      const options = { maxNewTokens, temperature, seed: 11 };
      const free = await text.generate(prompts, { ...options, stop: ['"}'] });
      const g = await text.generate(prompts, { ...options, schema: analysisSchema() });
      assert.ok(g.tokens <= prompts.length * maxNewTokens);
      for (const t of g.texts) assert.ok(parseSkillAnalysis(t) !== null, `${maxNewTokens}: ${t}`);
      assert.ok(free.texts.every((t) => parseSkillAnalysis(t) === null), "random weights alone");
    }
  }
  await assert.rejects(
    text.generate(prompts, {
      maxNewTokens: min - 1,
      temperature: 0,
      seed: 0,
      schema: analysisSchema(),
    }),
    (e: Error) => e instanceof ConstraintError && e.message.includes(`≥ ${min}`),
  );
  await policy.release();
});

Deno.test("one schema per prompt: each text is an object of its own prompt's schema", async () => {
  const tok = new Tokenizer(buildByteLevelTokenizer(ANALYZER_WORDS));
  const policy = smallPolicy(tok, 3);
  const text = new TextPolicy(policy, tok);
  const push = analysisSchema({ skillPattern: { oneOf: ["push up", "push down"] } });
  const never = analysisSchema({ skillPattern: "never push" });
  const prompts = ["Outcome: success", "Outcome: failure", "Outcome: failure"];
  const schema = [push, never, never];
  const g = await text.generate(prompts, { maxNewTokens: 64, temperature: 1, seed: 3, schema });
  const skills = g.texts.map((t) => parseSkillAnalysis(t)?.episode_skill);
  assert.ok(skills[0] === "push up" || skills[0] === "push down", skills[0]);
  assert.deepEqual(skills.slice(1), ["never push", "never push"]);
  await assert.rejects(
    text.generate(prompts, { maxNewTokens: 64, temperature: 0, seed: 0, schema: [push] }),
    (e: Error) => e instanceof ConstraintError && e.message.includes("one schema per prompt (3)"),
  );
  await policy.release();
});

Deno.test("a tokenizer that cannot spell the prompt or the analysis object fails with a TokenizerError naming tokenizer.json", async () => {
  const tok = new Tokenizer({
    tokenizerJson: {
      version: "1.0",
      model: {
        type: "BPE",
        vocab: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`t${i}`, i])),
        merges: [],
      },
    },
    tokenizerConfig: null,
  });
  const policy = smallPolicy(tok, 3);
  const text = new TextPolicy(policy, tok);
  assert.throws(
    () => text.promptIds("Push the box onto the target."),
    (e: Error) =>
      e instanceof TokenizerError && e.message.includes("tokenizer (tokenizer.json) must spell") &&
      e.message.includes('"Push the box onto the target."'),
  );
  assert.throws(
    () => text.jsonDecoder(analysisSchema()),
    (e: Error) =>
      e instanceof TokenizerError && e.cause instanceof ConstraintError &&
      /tokenizer \(tokenizer.json\) must spell its JSON object: .*episode_skill/.test(e.message),
  );
  await policy.release();
});

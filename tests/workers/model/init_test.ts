import assert from "node:assert/strict";
import { parameterCount, parameterSpecs } from "../../../workers/model/config.ts";
import {
  builtinTinyConfig,
  createBuiltinTiny,
  InitError,
  initParameters,
} from "../../../workers/model/init.ts";
import { Tokenizer } from "../../../workers/model/tokenizer.ts";

Deno.test("the tiny config has about one million parameters for a 1-2k vocabulary", () => {
  assert.equal(parameterCount(builtinTinyConfig(1262)), 738_432 + 128 * 1262);
  for (const v of [1000, 1500, 2000]) {
    const n = parameterCount(builtinTinyConfig(v));
    assert.ok(n > 850_000 && n < 1_000_000, `${v}: ${n}`);
  }
  const c = builtinTinyConfig(1000, { eosTokenId: 997, padTokenId: 997 });
  assert.equal(c.head_dim * c.num_attention_heads, c.hidden_size);
  assert.equal(c.num_attention_heads % c.num_key_value_heads, 0);
  assert.equal(c.eos_token_id, 997);
  assert.equal(c.bos_token_id, null);
  assert.ok(c.tie_word_embeddings);
  assert.throws(() => builtinTinyConfig(0), InitError);
});

Deno.test("initialisation is seeded: N(0, 0.02) matrices, unit norms, zero biases", () => {
  const config = {
    ...builtinTinyConfig(300),
    architecture: "Qwen2ForCausalLM" as const,
    attention_bias: true,
  };
  const a = initParameters(config, 1);
  const b = initParameters(config, 1);
  const c = initParameters(config, 2);
  assert.deepEqual([...a.keys()], parameterSpecs(config).map((s) => s.name));
  assert.deepEqual(a, b);
  assert.notDeepEqual(a.get("model.embed_tokens.weight"), c.get("model.embed_tokens.weight"));
  assert.ok(a.get("model.norm.weight")!.every((x) => x === 1));
  assert.ok(a.get("model.layers.0.input_layernorm.weight")!.every((x) => x === 1));
  assert.ok(a.get("model.layers.3.self_attn.k_proj.bias")!.every((x) => x === 0));
  const w = a.get("model.layers.2.mlp.up_proj.weight")!;
  const mean = w.reduce((s, x) => s + x, 0) / w.length;
  const std = Math.sqrt(w.reduce((s, x) => s + (x - mean) ** 2, 0) / w.length);
  assert.ok(Math.abs(mean) < 1e-3);
  assert.ok(Math.abs(std - 0.02) < 5e-4, `std ${std}`);
});

Deno.test("createBuiltinTiny sizes the config to its tokenizer and wires EOS and pad", () => {
  const model = createBuiltinTiny({
    vocabulary: ["go", "to", "drawer", "1", "take", "mug"],
    seed: 7,
  });
  const tokenizer = new Tokenizer(model.tokenizer);
  assert.equal(model.config.vocab_size, tokenizer.vocabSize);
  assert.equal(model.config.eos_token_id, tokenizer.tokenToId("<|endoftext|>"));
  assert.equal(model.config.pad_token_id, model.config.eos_token_id);
  assert.equal(
    model.parameters.get("model.embed_tokens.weight")!.length,
    tokenizer.vocabSize * 128,
  );
  assert.equal(tokenizer.encode(" drawer").length, 1);
  assert.deepEqual(model.generationConfig!.eos_token_id, tokenizer.stopTokenIds);
});

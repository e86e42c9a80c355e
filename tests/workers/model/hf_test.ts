import assert from "node:assert/strict";
import type { DecoderConfig } from "../../../workers/model/config.ts";
import {
  configFromJson,
  configToJson,
  type FileReader,
  hfFolderReader,
  HfFormatError,
  loadHfDirectory,
  saveHfDirectory,
  writeHfFolder,
} from "../../../workers/model/hf.ts";
import { createBuiltinTiny, initParameters } from "../../../workers/model/init.ts";
import { readSafetensors } from "../../../workers/model/safetensors.ts";

/** TinyLlama-1.1B's config.json as published on the Hub. */
const TINYLLAMA_CONFIG = {
  architectures: ["LlamaForCausalLM"],
  attention_bias: false,
  bos_token_id: 1,
  eos_token_id: 2,
  hidden_act: "silu",
  hidden_size: 2048,
  initializer_range: 0.02,
  intermediate_size: 5632,
  max_position_embeddings: 2048,
  model_type: "llama",
  num_attention_heads: 32,
  num_hidden_layers: 22,
  num_key_value_heads: 4,
  pretraining_tp: 1,
  rms_norm_eps: 1e-05,
  rope_scaling: null,
  rope_theta: 10000.0,
  tie_word_embeddings: false,
  torch_dtype: "bfloat16",
  transformers_version: "4.35.0",
  use_cache: true,
  vocab_size: 32000,
};

/** Qwen2.5-0.5B-Instruct's config.json as published on the Hub. */
const QWEN25_CONFIG = {
  architectures: ["Qwen2ForCausalLM"],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  hidden_act: "silu",
  hidden_size: 896,
  initializer_range: 0.02,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  model_type: "qwen2",
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-06,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  transformers_version: "4.43.1",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

/** Every field of the Hub config (except the writer's version) comes back with the same name and value. */
function assertMatchesHub(ours: Record<string, unknown>, hub: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(hub)) {
    if (key === "transformers_version") continue;
    assert.deepEqual(ours[key], value, `config.json field ${key}`);
  }
}

Deno.test("a real Llama config.json parses with HF defaults and is written back with HF names", () => {
  const c = configFromJson(TINYLLAMA_CONFIG);
  assert.equal(c.architecture, "LlamaForCausalLM");
  assert.equal(c.head_dim, 64);
  assert.equal(c.num_key_value_heads, 4);
  assert.equal(c.attention_bias, false);
  assert.equal(c.pad_token_id, null);
  assertMatchesHub(configToJson(c, "bfloat16"), TINYLLAMA_CONFIG);
});

Deno.test("a real Qwen2 config.json parses with QKV bias and is written back with HF names", () => {
  const c = configFromJson(QWEN25_CONFIG);
  assert.equal(c.architecture, "Qwen2ForCausalLM");
  assert.equal(c.attention_bias, true);
  assert.equal(c.head_dim, 64);
  assert.equal(c.tie_word_embeddings, true);
  assert.equal(c.rope_theta, 1e6);
  assertMatchesHub(configToJson(c, "bfloat16", QWEN25_CONFIG), QWEN25_CONFIG);
  const fresh = configToJson(c, "float32");
  assert.equal(fresh.max_window_layers, 24);
  assert.equal(fresh.torch_dtype, "float32");
});

Deno.test("config.json defaults, eos lists and unsupported features", () => {
  const minimal = {
    model_type: "llama",
    vocab_size: 10,
    hidden_size: 8,
    intermediate_size: 16,
    num_hidden_layers: 1,
    num_attention_heads: 2,
    eos_token_id: [5, 6],
    head_dim: null,
  };
  const c = configFromJson(minimal);
  assert.equal(c.architecture, "LlamaForCausalLM");
  assert.equal(c.num_key_value_heads, 2);
  assert.equal(c.head_dim, 4);
  assert.equal(c.eos_token_id, 5);
  assert.equal(c.rope_theta, 10000);
  assert.throws(
    () => configFromJson({ ...TINYLLAMA_CONFIG, architectures: ["MistralForCausalLM"] }),
    /architectures must be \[LlamaForCausalLM\] or \[Qwen2ForCausalLM\]: current value is \["MistralForCausalLM"\]/,
  );
  assert.throws(
    () => configFromJson({ ...TINYLLAMA_CONFIG, rope_scaling: { rope_type: "llama3", factor: 8 } }),
    /RoPE scaling must be absent or default/,
  );
  assert.throws(
    () => configFromJson({ ...TINYLLAMA_CONFIG, hidden_act: "gelu" }),
    /hidden_act must be silu/,
  );
  assert.throws(() => configFromJson({ ...TINYLLAMA_CONFIG, attention_bias: true }), /o_proj bias/);
  assert.throws(
    () => configFromJson({ ...TINYLLAMA_CONFIG, hidden_size: -1 }),
    /hidden_size must be valid/,
  );
  assert.throws(
    () => configFromJson({ ...TINYLLAMA_CONFIG, num_key_value_heads: 5 }),
    HfFormatError,
  );
});

const tiny = createBuiltinTiny({ vocabulary: ["go", "north", "take", "mug", "1", "2"], seed: 3 });

function mapReader(files: Map<string, Uint8Array>): FileReader {
  return (name) => Promise.resolve(files.get(name) ?? null);
}

const bitsEqual = (a: Float32Array, b: Float32Array) =>
  assert.deepEqual(
    new Uint32Array(a.buffer, a.byteOffset, a.length),
    new Uint32Array(b.buffer, b.byteOffset, b.length),
  );

Deno.test("a saved directory loads back with identical tensors, config and tokenizer files", async () => {
  const files = saveHfDirectory(tiny);
  assert.deepEqual([...files.keys()].sort(), [
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
  ]);
  const weights = readSafetensors(files.get("model.safetensors")!);
  assert.deepEqual(weights.metadata, { format: "pt" }); // transformers refuses files without it
  assert.ok(!weights.tensors.has("lm_head.weight")); // tied
  const back = await loadHfDirectory(mapReader(files));
  assert.deepEqual(back.config, tiny.config);
  assert.deepEqual([...back.parameters.keys()], [...tiny.parameters.keys()]);
  for (const [name, data] of tiny.parameters) bitsEqual(back.parameters.get(name)!, data);
  assert.deepEqual(back.tokenizer, tiny.tokenizer);
  assert.deepEqual(back.generationConfig, tiny.generationConfig);
  assert.deepEqual(saveHfDirectory(back), files); // saving what was loaded gives the same bytes
  const json = JSON.parse(new TextDecoder().decode(files.get("config.json")!));
  assert.equal(json.torch_dtype, "float32");
  assert.equal(json.model_type, "llama");
});

Deno.test("a BF16 save halves the weights and loads back within bf16 precision", async () => {
  const files = saveHfDirectory(tiny, { dtype: "BF16" });
  const json = JSON.parse(new TextDecoder().decode(files.get("config.json")!));
  assert.equal(json.torch_dtype, "bfloat16");
  const back = await loadHfDirectory(mapReader(files));
  const a = tiny.parameters.get("model.layers.0.mlp.down_proj.weight")!;
  const b = back.parameters.get("model.layers.0.mlp.down_proj.weight")!;
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= Math.abs(a[i]) * 2 ** -8);
});

Deno.test("an untied Qwen2 model saves as shards and loads back through the index", async () => {
  const config: DecoderConfig = {
    ...tiny.config,
    architecture: "Qwen2ForCausalLM",
    attention_bias: true,
    tie_word_embeddings: false,
  };
  const model = { ...tiny, config, parameters: initParameters(config, 9), generationConfig: null };
  const files = saveHfDirectory(model, { maxShardBytes: 300_000 });
  assert.ok(!files.has("model.safetensors"));
  const index = JSON.parse(new TextDecoder().decode(files.get("model.safetensors.index.json")!));
  const shards = new Set(Object.values(index.weight_map));
  assert.ok(shards.size > 1);
  for (const shard of shards) assert.ok(files.has(shard as string));
  const back = await loadHfDirectory(mapReader(files));
  assert.deepEqual(back.config, config);
  for (const [name, data] of model.parameters) bitsEqual(back.parameters.get(name)!, data);
  assert.equal(back.generationConfig!.eos_token_id, config.eos_token_id);
});

Deno.test("a directory round-trips through a local folder", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await writeHfFolder(`${dir}/ckpt`, saveHfDirectory(tiny));
    const back = await loadHfDirectory(hfFolderReader(`${dir}/ckpt`));
    assert.deepEqual(back.config, tiny.config);
    bitsEqual(back.parameters.get("model.norm.weight")!, tiny.parameters.get("model.norm.weight")!);
    assert.equal(await hfFolderReader(dir)("missing.json"), null);
    await assert.rejects(() => hfFolderReader(dir)("../etc"), /plain name/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("incomplete or inconsistent directories fail with clear errors", async () => {
  const files = saveHfDirectory(tiny);
  const without = (name: string) => new Map([...files].filter(([k]) => k !== name));
  await assert.rejects(
    () => loadHfDirectory(mapReader(without("config.json"))),
    /config.json must exist/,
  );
  await assert.rejects(
    () => loadHfDirectory(mapReader(without("model.safetensors"))),
    /both are missing/,
  );
  await assert.rejects(
    () => loadHfDirectory(mapReader(without("tokenizer.json"))),
    /tokenizer.json must exist/,
  );
  const bigger = new Map(files);
  const json = JSON.parse(new TextDecoder().decode(files.get("config.json")!));
  bigger.set(
    "config.json",
    new TextEncoder().encode(JSON.stringify({ ...json, vocab_size: json.vocab_size + 1 })),
  );
  await assert.rejects(
    () => loadHfDirectory(mapReader(bigger)),
    /model.embed_tokens.weight as its shape must be/,
  );
  const untied = new Map(files);
  untied.set(
    "config.json",
    new TextEncoder().encode(JSON.stringify({ ...json, tie_word_embeddings: false })),
  );
  await assert.rejects(
    () => loadHfDirectory(mapReader(untied)),
    /must hold lm_head.weight: it is missing/,
  );
  assert.throws(
    () => saveHfDirectory({ ...tiny, parameters: new Map() }),
    /parameter model.embed_tokens.weight must hold/,
  );
  assert.throws(
    () => configToJson({ ...tiny.config, attention_bias: true }),
    /attention_bias must be false/,
  );
});

import assert from "node:assert/strict";
import { type DecoderConfig, parameterSpecs } from "../../../workers/model/config.ts";
import { randomParameters, TINY_LLAMA3, TINY_QWEN3 } from "./_tiny.ts";
import {
  configFromJson,
  configJsonBytes,
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

/** Qwen3-0.6B's config.json as published on the Hub (head_dim 128 ≠ 1024 / 16). */
const QWEN3_CONFIG = {
  architectures: ["Qwen3ForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: "silu",
  hidden_size: 1024,
  initializer_range: 0.02,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  max_window_layers: 28,
  model_type: "qwen3",
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-06,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  transformers_version: "4.51.0",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

/** Llama-3.2-1B's config.json as published on the Hub (Llama 3 RoPE scaling). */
const LLAMA32_CONFIG = {
  architectures: ["LlamaForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 128000,
  eos_token_id: 128001,
  head_dim: 64,
  hidden_act: "silu",
  hidden_size: 2048,
  initializer_range: 0.02,
  intermediate_size: 8192,
  max_position_embeddings: 131072,
  mlp_bias: false,
  model_type: "llama",
  num_attention_heads: 32,
  num_hidden_layers: 16,
  num_key_value_heads: 8,
  pretraining_tp: 1,
  rms_norm_eps: 1e-05,
  rope_scaling: {
    factor: 32.0,
    high_freq_factor: 4.0,
    low_freq_factor: 1.0,
    original_max_position_embeddings: 8192,
    rope_type: "llama3",
  },
  rope_theta: 500000.0,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  transformers_version: "4.45.0.dev0",
  use_cache: true,
  vocab_size: 128256,
};

/**
 * Every field of the Hub config (except the writer's version) comes back with the same name and
 * value.
 */
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

Deno.test("a real Qwen3 config.json parses with its own head_dim and q/k norms and is written back", () => {
  const c = configFromJson(QWEN3_CONFIG);
  assert.equal(c.architecture, "Qwen3ForCausalLM");
  assert.equal(c.attention_bias, false);
  assert.equal(c.head_dim, 128);
  assert.equal(c.rope_scaling, undefined);
  const names = parameterSpecs(c).map((s) => s.name);
  assert.ok(names.includes("model.layers.27.self_attn.q_norm.weight"));
  assert.deepEqual(
    parameterSpecs(c).find((s) => s.name === "model.layers.0.self_attn.k_norm.weight")!.shape,
    [128],
  );
  assert.deepEqual(
    parameterSpecs(c).find((s) => s.name === "model.layers.0.self_attn.q_proj.weight")!.shape,
    [2048, 1024],
  );
  assert.ok(!names.some((n) => n.endsWith("q_proj.bias")));
  assertMatchesHub(configToJson(c, "bfloat16", QWEN3_CONFIG), QWEN3_CONFIG);
  assertMatchesHub(configToJson(c, "bfloat16"), QWEN3_CONFIG); // also without the source file
  const { head_dim: _, ...noHeadDim } = QWEN3_CONFIG;
  assert.equal(configFromJson(noHeadDim).head_dim, 128); // Qwen3Config's default, not 1024 / 16
  assert.throws(() => configFromJson({ ...QWEN3_CONFIG, attention_bias: true }), /o_proj bias/);
});

Deno.test("Llama 3.2's rope_scaling parses and is written back unchanged", () => {
  const c = configFromJson(LLAMA32_CONFIG);
  assert.deepEqual(c.rope_scaling, {
    rope_type: "llama3",
    factor: 32,
    low_freq_factor: 1,
    high_freq_factor: 4,
    original_max_position_embeddings: 8192,
  });
  assertMatchesHub(configToJson(c, "bfloat16"), LLAMA32_CONFIG);
  // transformers ≥ 5 writes the same fields under rope_parameters.
  const { rope_scaling, rope_theta, ...rest } = LLAMA32_CONFIG;
  const v5 = configFromJson({ ...rest, rope_parameters: { ...rope_scaling, rope_theta } });
  assert.deepEqual(v5.rope_scaling, c.rope_scaling);
  assert.equal(v5.rope_theta, 500000);
  const { factor: _, ...noFactor } = rope_scaling;
  assert.throws(
    () => configFromJson({ ...LLAMA32_CONFIG, rope_scaling: noFactor }),
    /rope_scaling.factor must be set for rope_type llama3/,
  );
  assert.throws(
    () =>
      configFromJson({ ...LLAMA32_CONFIG, rope_scaling: { ...rope_scaling, high_freq_factor: 1 } }),
    /low_freq_factor < high_freq_factor/,
  );
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
    /architectures must be \[LlamaForCausalLM\], \[Qwen2ForCausalLM\] or \[Qwen3ForCausalLM\]: current value is \["MistralForCausalLM"\]/,
  );
  assert.throws(
    () => configFromJson({ ...TINYLLAMA_CONFIG, rope_scaling: { rope_type: "yarn", factor: 8 } }),
    /rope_scaling.rope_type must be absent, default or llama3: current value is "yarn"/,
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

for (const base of [TINY_QWEN3, TINY_LLAMA3]) {
  Deno.test(
    `a ${base.architecture} model${
      base.rope_scaling ? " with Llama 3 RoPE scaling" : ""
    } saves with HF names and loads back`,
    async () => {
      const config = { ...base, vocab_size: tiny.config.vocab_size };
      const model = {
        ...tiny,
        config,
        parameters: randomParameters(config, 4),
        generationConfig: null,
      };
      const files = saveHfDirectory(model);
      const weights = readSafetensors(files.get("model.safetensors")!);
      assert.deepEqual(
        [...weights.tensors.keys()].sort(),
        parameterSpecs(config).map((s) => s.name).sort(),
      );
      const json = JSON.parse(new TextDecoder().decode(files.get("config.json")!));
      assert.deepEqual(json.architectures, [config.architecture]);
      assert.equal(json.head_dim, config.head_dim);
      assert.deepEqual(json.rope_scaling, config.rope_scaling ?? null);
      const back = await loadHfDirectory(mapReader(files));
      assert.deepEqual(back.config, config);
      for (const [name, data] of model.parameters) bitsEqual(back.parameters.get(name)!, data);
    },
  );
}

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

Deno.test("config.json writes Llama 3's rope_scaling and the other float fields as Python writes floats", () => {
  const text = new TextDecoder().decode(
    configJsonBytes(configToJson(configFromJson(LLAMA32_CONFIG), "bfloat16")),
  );
  for (
    const line of [
      '"factor": 32.0,',
      '"high_freq_factor": 4.0,',
      '"low_freq_factor": 1.0,',
      '"original_max_position_embeddings": 8192',
      '"rope_theta": 500000.0,',
      '"attention_dropout": 0.0,',
      '"vocab_size": 128256',
    ]
  ) assert.ok(text.includes(line), line);
  assert.deepEqual(JSON.parse(text).rope_scaling, LLAMA32_CONFIG.rope_scaling);
});

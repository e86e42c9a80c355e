/**
 * Decoder configuration and parameter layout, matching Hugging Face `LlamaForCausalLM`,
 * `Qwen2ForCausalLM` and `Qwen3ForCausalLM` (`config.json` field names; `model.safetensors`
 * tensor names and shapes). The three differ only in: QKV bias (Qwen2), a per-head RMSNorm of
 * queries and keys before RoPE (Qwen3: `self_attn.q_norm.weight`, `self_attn.k_norm.weight`,
 * each (D,)), and Qwen3's `head_dim` that need not be hidden_size / num_attention_heads.
 * Any of them may carry Llama 3's `rope_scaling` (workers/model/rope.ts).
 *
 * This file is the contract between the graph builders (workers/model/llama.ts,
 * workers/model/vision.ts), the checkpoint I/O (safetensors, HF directory), initialisation and
 * the optimizer.
 *
 * A config with a `vision_config` is a vision-language model: the decoder plus an image encoder
 * (SigLIP-style ViT) and a LLaVA-style projector. Its extra tensors (HF names, shapes with
 * Dv = vision hidden size, F = vision intermediate size, C = channels, p = patch size,
 * P = (image_size / p)² patches, D = decoder hidden size):
 *
 * | tensor                                                          | shape        |
 * | --------------------------------------------------------------- | ------------ |
 * | `vision_tower.embeddings.patch_embedding.weight`                | (Dv, C, p, p) |
 * | `vision_tower.embeddings.patch_embedding.bias`                  | (Dv,)        |
 * | `vision_tower.embeddings.position_embedding.weight`             | (P, Dv)      |
 * | `vision_tower.encoder.layers.{i}.layer_norm1.weight` / `.bias`  | (Dv,)        |
 * | `vision_tower.encoder.layers.{i}.self_attn.{q,k,v,out}_proj.weight` | (Dv, Dv) |
 * | `vision_tower.encoder.layers.{i}.self_attn.{q,k,v,out}_proj.bias`   | (Dv,)    |
 * | `vision_tower.encoder.layers.{i}.layer_norm2.weight` / `.bias`  | (Dv,)        |
 * | `vision_tower.encoder.layers.{i}.mlp.fc1.weight` / `.bias`      | (F, Dv) / (F,) |
 * | `vision_tower.encoder.layers.{i}.mlp.fc2.weight` / `.bias`      | (Dv, F) / (Dv,) |
 * | `vision_tower.post_layernorm.weight` / `.bias`                  | (Dv,)        |
 * | `multi_modal_projector.linear_1.weight` / `.bias`               | (D, Dv) / (D,) |
 * | `multi_modal_projector.linear_2.weight` / `.bias`               | (D, D) / (D,) |
 *
 * The patch embedding is stored as SigLIP's Conv2d kernel (Dv, C, p, p); applied to a patch
 * flattened channel-major (`preprocessImage`) it is the same linear map.
 */

/** HF architecture names we load and save. */
export type Architecture = "LlamaForCausalLM" | "Qwen2ForCausalLM" | "Qwen3ForCausalLM";

/**
 * Llama 3's RoPE frequency scaling (`config.json` `rope_scaling` with `rope_type: "llama3"`):
 * frequencies whose wavelength exceeds `original_max_position_embeddings / low_freq_factor`
 * tokens are divided by `factor`, those below `… / high_freq_factor` are kept, and the band
 * between is interpolated (workers/model/rope.ts).
 */
export interface RopeScaling {
  rope_type: "llama3";
  /** Divisor of the low frequencies (Llama 3.1/3.2: 8 or 32). */
  factor: number;
  low_freq_factor: number;
  /** Must exceed `low_freq_factor`. */
  high_freq_factor: number;
  /** Context length (tokens) the model was pretrained at before the extension (8192). */
  original_max_position_embeddings: number;
}

/** Decoder hyper-parameters, with Hugging Face's `config.json` names. */
export interface DecoderConfig {
  architecture: Architecture;
  /** Tokens in the vocabulary (rows of `embed_tokens`). */
  vocab_size: number;
  /** Model width d (channels). */
  hidden_size: number;
  /** SwiGLU hidden width. */
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  /** Grouped KV heads (GQA); equals `num_attention_heads` for plain multi-head attention. */
  num_key_value_heads: number;
  /** Per-head width; `hidden_size / num_attention_heads` unless given. */
  head_dim: number;
  rms_norm_eps: number;
  rope_theta: number;
  /** Llama 3 RoPE scaling; absent or null for plain RoPE. */
  rope_scaling?: RopeScaling | null;
  /** Longest sequence (tokens) the RoPE tables are built for. */
  max_position_embeddings: number;
  /** `lm_head` shares `embed_tokens` (no `lm_head.weight` tensor). */
  tie_word_embeddings: boolean;
  /** Bias on q/k/v projections (Qwen2: true; Llama, Qwen3: false). */
  attention_bias: boolean;
  bos_token_id: number | null;
  eos_token_id: number | null;
  pad_token_id: number | null;
  /** Image encoder of a vision-language model; absent or null for a text-only decoder. */
  vision_config?: VisionConfig | null;
  /** Token id whose positions take image features (one run of P tokens per image). */
  image_token_id?: number | null;
}

/** Activations of the vision tower and projector (HF `hidden_act` names). */
export type VisionActivation = "gelu_pytorch_tanh" | "gelu" | "quick_gelu";

/** Image encoder hyper-parameters, with Hugging Face's SigLIP `vision_config` names. */
export interface VisionConfig {
  /** Side of the square input, pixels (images are resized to it). */
  image_size: number;
  /** Side of a square patch, pixels; must divide `image_size`. */
  patch_size: number;
  /** Input channels; 3 (RGB). */
  num_channels: number;
  /** Encoder width Dv. */
  hidden_size: number;
  /** Encoder MLP width. */
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  layer_norm_eps: number;
  /** MLP activation: `gelu_pytorch_tanh` (SigLIP), exact `gelu` or `quick_gelu` (CLIP). */
  hidden_act: VisionActivation;
  /** Activation between the projector's two linears (LLaVA's top-level `projector_hidden_act`). */
  projector_hidden_act: VisionActivation;
}

/** One parameter tensor: HF name and shape (row-major, float32 in memory). */
export interface ParameterSpec {
  name: string;
  shape: number[];
}

/**
 * Every parameter of the model in Hugging Face order and layout: the decoder's, then the vision
 * tower's and projector's when the config has a `vision_config`. Linear weights are
 * `[out_features, in_features]` as in `torch.nn.Linear`.
 */
export function parameterSpecs(c: DecoderConfig): ParameterSpec[] {
  return [...decoderParameterSpecs(c), ...visionParameterSpecs(c)];
}

/** The decoder's parameters (what a text-only graph reads), in HF order. */
export function decoderParameterSpecs(c: DecoderConfig): ParameterSpec[] {
  const d = c.hidden_size;
  const q = c.num_attention_heads * c.head_dim;
  const kv = c.num_key_value_heads * c.head_dim;
  const specs: ParameterSpec[] = [{ name: "model.embed_tokens.weight", shape: [c.vocab_size, d] }];
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}`;
    specs.push({ name: `${p}.input_layernorm.weight`, shape: [d] });
    specs.push({ name: `${p}.self_attn.q_proj.weight`, shape: [q, d] });
    if (c.attention_bias) specs.push({ name: `${p}.self_attn.q_proj.bias`, shape: [q] });
    specs.push({ name: `${p}.self_attn.k_proj.weight`, shape: [kv, d] });
    if (c.attention_bias) specs.push({ name: `${p}.self_attn.k_proj.bias`, shape: [kv] });
    specs.push({ name: `${p}.self_attn.v_proj.weight`, shape: [kv, d] });
    if (c.attention_bias) specs.push({ name: `${p}.self_attn.v_proj.bias`, shape: [kv] });
    specs.push({ name: `${p}.self_attn.o_proj.weight`, shape: [d, q] });
    if (hasQkNorm(c)) {
      specs.push({ name: `${p}.self_attn.q_norm.weight`, shape: [c.head_dim] });
      specs.push({ name: `${p}.self_attn.k_norm.weight`, shape: [c.head_dim] });
    }
    specs.push({ name: `${p}.post_attention_layernorm.weight`, shape: [d] });
    specs.push({ name: `${p}.mlp.gate_proj.weight`, shape: [c.intermediate_size, d] });
    specs.push({ name: `${p}.mlp.up_proj.weight`, shape: [c.intermediate_size, d] });
    specs.push({ name: `${p}.mlp.down_proj.weight`, shape: [d, c.intermediate_size] });
  }
  specs.push({ name: "model.norm.weight", shape: [d] });
  if (!c.tie_word_embeddings) specs.push({ name: "lm_head.weight", shape: [c.vocab_size, d] });
  return specs;
}

/** Whether queries and keys get a per-head RMSNorm before RoPE (Qwen3). */
export function hasQkNorm(c: DecoderConfig): boolean {
  return c.architecture === "Qwen3ForCausalLM";
}

/** Patches per image, P = (image_size / patch_size)²: the image tokens one image takes. */
export function patchesPerImage(v: VisionConfig): number {
  return (v.image_size / v.patch_size) ** 2;
}

/** The vision tower's and projector's parameters (none without a `vision_config`), HF order. */
export function visionParameterSpecs(c: DecoderConfig): ParameterSpec[] {
  const v = c.vision_config;
  if (!v) return [];
  const d = v.hidden_size, p = v.patch_size;
  const specs: ParameterSpec[] = [];
  const linear = (name: string, out: number, inF: number) => {
    specs.push({ name: `${name}.weight`, shape: [out, inF] });
    specs.push({ name: `${name}.bias`, shape: [out] });
  };
  const norm = (name: string) => {
    specs.push({ name: `${name}.weight`, shape: [d] });
    specs.push({ name: `${name}.bias`, shape: [d] });
  };
  const e = "vision_tower.embeddings";
  specs.push({ name: `${e}.patch_embedding.weight`, shape: [d, v.num_channels, p, p] });
  specs.push({ name: `${e}.patch_embedding.bias`, shape: [d] });
  specs.push({ name: `${e}.position_embedding.weight`, shape: [patchesPerImage(v), d] });
  for (let i = 0; i < v.num_hidden_layers; i++) {
    const l = `vision_tower.encoder.layers.${i}`;
    norm(`${l}.layer_norm1`);
    for (const n of ["q_proj", "k_proj", "v_proj", "out_proj"]) linear(`${l}.self_attn.${n}`, d, d);
    norm(`${l}.layer_norm2`);
    linear(`${l}.mlp.fc1`, v.intermediate_size, d);
    linear(`${l}.mlp.fc2`, d, v.intermediate_size);
  }
  norm("vision_tower.post_layernorm");
  linear("multi_modal_projector.linear_1", c.hidden_size, d);
  linear("multi_modal_projector.linear_2", c.hidden_size, c.hidden_size);
  return specs;
}

/**
 * Whether a parameter is a normalisation gain (RMSNorm `*norm.weight`, LayerNorm
 * `*layer_norm1.weight`, `*post_layernorm.weight`): initialised to 1.
 */
export function isNormWeight(name: string): boolean {
  return /norm\d*\.weight$/.test(name);
}

/** Parameters by HF name, float32, row-major. */
export type Parameters = Map<string, Float32Array>;

/** Number of scalar parameters of a config. */
export function parameterCount(c: DecoderConfig): number {
  return parameterSpecs(c).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/**
 * Decoder configuration and parameter layout, matching Hugging Face `LlamaForCausalLM` and
 * `Qwen2ForCausalLM` (`config.json` field names; `model.safetensors` tensor names and shapes).
 *
 * This file is the contract between the graph builders (workers/model/llama.ts), the
 * checkpoint I/O (safetensors, HF directory), initialisation and the optimizer.
 */

/** HF architecture names we load and save. */
export type Architecture = "LlamaForCausalLM" | "Qwen2ForCausalLM";

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
  /** Longest sequence (tokens) the RoPE tables are built for. */
  max_position_embeddings: number;
  /** `lm_head` shares `embed_tokens` (no `lm_head.weight` tensor). */
  tie_word_embeddings: boolean;
  /** Bias on q/k/v projections (Qwen2: true; Llama: false). */
  attention_bias: boolean;
  bos_token_id: number | null;
  eos_token_id: number | null;
  pad_token_id: number | null;
}

/** One parameter tensor: HF name and shape (row-major, float32 in memory). */
export interface ParameterSpec {
  name: string;
  shape: number[];
}

/**
 * Every parameter of the decoder in Hugging Face order and layout. Linear weights are
 * `[out_features, in_features]` as in `torch.nn.Linear`.
 */
export function parameterSpecs(c: DecoderConfig): ParameterSpec[] {
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
    specs.push({ name: `${p}.post_attention_layernorm.weight`, shape: [d] });
    specs.push({ name: `${p}.mlp.gate_proj.weight`, shape: [c.intermediate_size, d] });
    specs.push({ name: `${p}.mlp.up_proj.weight`, shape: [c.intermediate_size, d] });
    specs.push({ name: `${p}.mlp.down_proj.weight`, shape: [d, c.intermediate_size] });
  }
  specs.push({ name: "model.norm.weight", shape: [d] });
  if (!c.tie_word_embeddings) specs.push({ name: "lm_head.weight", shape: [c.vocab_size, d] });
  return specs;
}

/** Parameters by HF name, float32, row-major. */
export type Parameters = Map<string, Float32Array>;

/** Number of scalar parameters of a config. */
export function parameterCount(c: DecoderConfig): number {
  return parameterSpecs(c).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

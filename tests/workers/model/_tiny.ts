/** Tiny decoder and vision configs, seeded random parameters and images for model tests. */
import {
  type DecoderConfig,
  isNormWeight,
  type Parameters,
  parameterSpecs,
} from "../../../workers/model/config.ts";
import type { RgbImage } from "../../../workers/model/image.ts";
import { lcg } from "../engine/_gradcheck.ts";

/** Llama-style: GQA (4 query heads on 2 KV heads), tied embeddings, no bias. */
export const TINY_LLAMA: DecoderConfig = {
  architecture: "LlamaForCausalLM",
  vocab_size: 11,
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 4,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 64,
  tie_word_embeddings: true,
  attention_bias: false,
  bos_token_id: 1,
  eos_token_id: 2,
  pad_token_id: 0,
};

/** Qwen2-style: QKV bias, untied head, plain multi-head attention. */
export const TINY_QWEN: DecoderConfig = {
  ...TINY_LLAMA,
  architecture: "Qwen2ForCausalLM",
  num_hidden_layers: 1,
  num_key_value_heads: 4,
  tie_word_embeddings: false,
  attention_bias: true,
  rope_theta: 1e6,
};

/** Qwen3-style: per-head q/k RMSNorm, head_dim (6) ≠ hidden_size / heads (2), GQA, no bias. */
export const TINY_QWEN3: DecoderConfig = {
  ...TINY_LLAMA,
  architecture: "Qwen3ForCausalLM",
  head_dim: 6,
  tie_word_embeddings: false,
  rope_theta: 1e6,
};

/**
 * Llama 3-style RoPE scaling on a head of 8 channels (θ = 100): its four wavelengths
 * (≈ 6.3, 19.9, 62.8, 198.7 tokens) fall in the kept, blended, blended and divided bands of
 * L = 64, low_freq_factor 1, high_freq_factor 4.
 */
export const TINY_LLAMA3: DecoderConfig = {
  ...TINY_LLAMA,
  hidden_size: 16,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 8,
  rope_theta: 100,
  max_position_embeddings: 512,
  rope_scaling: {
    rope_type: "llama3",
    factor: 8,
    low_freq_factor: 1,
    high_freq_factor: 4,
    original_max_position_embeddings: 64,
  },
};

/** Seeded parameters: norms ≈ 1, matrices ~ N(0, 0.5²)-ish, so activations are O(1). */
export function randomParameters(c: DecoderConfig, seed = 3, scale = 1.2): Parameters {
  const rnd = lcg(seed);
  const p: Parameters = new Map();
  for (const s of parameterSpecs(c)) {
    const n = s.shape.reduce((a, b) => a * b, 1);
    const norm = isNormWeight(s.name);
    p.set(
      s.name,
      Float32Array.from(
        { length: n },
        () => (norm ? 1 + 0.2 * (rnd() - 0.5) : (rnd() - 0.5) * scale),
      ),
    );
  }
  return p;
}

/** A vision-language config: TINY_LLAMA plus an 8×8-pixel encoder of 4-pixel patches (P = 4). */
export const TINY_VL: DecoderConfig = {
  ...TINY_LLAMA,
  vision_config: {
    image_size: 8,
    patch_size: 4,
    num_channels: 3,
    hidden_size: 8,
    intermediate_size: 12,
    num_hidden_layers: 2,
    num_attention_heads: 2,
    layer_norm_eps: 1e-6,
    hidden_act: "gelu_pytorch_tanh",
    projector_hidden_act: "gelu_pytorch_tanh",
  },
  image_token_id: 10,
};

/** A seeded random RGB image of `width` × `height` pixels. */
export function randomImage(width: number, height: number, seed: number): RgbImage {
  const rnd = lcg(seed);
  return { width, height, rgb: Uint8Array.from({ length: width * height * 3 }, () => rnd() * 256) };
}

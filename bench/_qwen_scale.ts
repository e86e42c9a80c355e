/** Qwen2.5-0.5B's configuration and a peak-memory probe, shared by the scale benchmarks. */
import type { DecoderConfig } from "../workers/model/config.ts";

/** Qwen2.5-0.5B's `config.json` (494M parameters, tied embeddings, QKV bias, GQA 14/2). */
export const QWEN25_05B: DecoderConfig = {
  architecture: "Qwen2ForCausalLM",
  vocab_size: 151936,
  hidden_size: 896,
  intermediate_size: 4864,
  num_hidden_layers: 24,
  num_attention_heads: 14,
  num_key_value_heads: 2,
  head_dim: 64,
  rms_norm_eps: 1e-6,
  rope_theta: 1e6,
  max_position_embeddings: 32768,
  tie_word_embeddings: true,
  attention_bias: true,
  bos_token_id: 151643,
  eos_token_id: 151645,
  pad_token_id: 151643,
};

/**
 * Qwen2.5-0.5B's configuration with `layers` decoder layers (24 is the real model; fewer keep
 * full fine-tuning's weights, gradients and AdamW moments within a shared machine's memory).
 * Throws RangeError unless 1 ≤ layers ≤ 24.
 */
export function qwen25Config(layers: number): DecoderConfig {
  if (!Number.isInteger(layers) || layers < 1 || layers > 24) {
    throw new RangeError(
      `Cannot build the Qwen2.5-0.5B config as layers must be an integer in [1, 24]: current value is ${layers}`,
    );
  }
  return { ...QWEN25_05B, num_hidden_layers: layers };
}

/** Peak resident set of this process so far (`VmHWM` of /proc/self/status), MB. */
export function peakRssMb(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  return Number(status.match(/VmHWM:\s+(\d+)/)![1]) / 1024;
}

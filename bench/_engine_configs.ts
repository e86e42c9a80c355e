/** Model configs shared by the engine benchmarks. */
import type { DecoderConfig } from "../workers/model/config.ts";

const base = {
  architecture: "LlamaForCausalLM",
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 2048,
  tie_word_embeddings: true,
  attention_bias: false,
  bos_token_id: 1,
  eos_token_id: 2,
  pad_token_id: 0,
} as const;
/** The benchmark's model sizes and their train-step shapes (bench/engine.ts, engine_profile.ts). */
export const CONFIGS: {
  name: string;
  config: DecoderConfig;
  train: { batch: number; length: number; steps: number };
}[] = [
  {
    name: "small",
    config: {
      ...base,
      vocab_size: 512,
      hidden_size: 128,
      intermediate_size: 352,
      num_hidden_layers: 4,
      num_attention_heads: 4,
      num_key_value_heads: 4,
      head_dim: 32,
    },
    train: { batch: 8, length: 64, steps: 10 },
  },
  {
    name: "medium",
    config: {
      ...base,
      vocab_size: 8192,
      hidden_size: 512,
      intermediate_size: 1408,
      num_hidden_layers: 6,
      num_attention_heads: 8,
      num_key_value_heads: 8,
      head_dim: 64,
    },
    train: { batch: 8, length: 128, steps: 2 },
  },
];

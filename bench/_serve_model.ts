/**
 * The serving benchmarks' ~24M model and prompts (bench/serve.ts, bench/tools/serve_profile.ts).
 */
import type { AsyncEnvironment } from "../workers/envs/mod.ts";
import {
  buildByteLevelTokenizer,
  builtinTinyConfig,
  type HfModel,
  initParameters,
  Tokenizer,
} from "../workers/model/mod.ts";

/**
 * A ~24M-parameter Llama config over an 8k byte-level vocabulary: the sokoban words (so the
 * prompt has as many tokens as for builtin:tiny) plus synthetic ones.
 */
export function model24m(sokobanWords: string[]): HfModel {
  const words = [
    ...sokobanWords,
    ...Array.from({ length: 7900 - sokobanWords.length }, (_, i) => `w${i.toString(36)}`),
  ];
  const files = buildByteLevelTokenizer(words);
  const tok = new Tokenizer(files);
  const config = {
    ...builtinTinyConfig(tok.vocabSize, { eosTokenId: tok.eosTokenId, padTokenId: tok.padTokenId }),
    hidden_size: 512,
    intermediate_size: 1408,
    num_hidden_layers: 6,
    num_attention_heads: 8,
    num_key_value_heads: 8,
    head_dim: 64,
  };
  return {
    config,
    parameters: initParameters(config, 1),
    tokenizer: files,
    generationConfig: null,
  };
}

/**
 * The first-turn prompts of `count` sokoban train tasks (seed 0): what an agent's first requests
 * send. They share the environment's rules, task line and the board's first row, and differ in
 * the board (on builtin:tiny's tokenizer ~100 of ~172 tokens are common to all of them).
 */
export async function boardPrompts(env: AsyncEnvironment, count: number): Promise<string[]> {
  const tasks = await env.sampleTasks("train", count, 0, {});
  const prompts: string[] = [];
  for (const task of tasks) {
    const episode = env.createEpisode(task);
    try {
      const observation = await episode.reset();
      prompts.push(
        await env.buildPrompt({ task, history: [], observation, historyLength: 0, turn: 1 }),
      );
    } finally {
      await episode.close();
    }
  }
  return prompts;
}

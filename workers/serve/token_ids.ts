/**
 * Token-exact completions, the request fields RL trainers use on vLLM's OpenAI server and that
 * this server implements with the same shapes (workers/serve/README.md, "Remote rollout engines"):
 *
 * - `prompt` as token ids (`[1, 2, 3]`, or `[[1, 2, 3]]`): decoded as given, never re-tokenized;
 * - `logprobs: 0`: each sampled token's log-probability, in the legacy completions shape
 *   `{tokens, token_logprobs, top_logprobs, text_offset}` (`top_logprobs[i]` holds the sampled
 *   token alone, as vLLM answers `logprobs: 0`);
 * - `return_tokens_as_token_ids: true`: those tokens are written `"token_id:<id>"` instead of
 *   their text, so a client reads the sampled ids back without tokenizing anything.
 *
 * The log-probability is the model's own: log-softmax of the raw logits (before temperature and
 * top-p), in float64 — what vLLM reports by default and what the trainer's score pass computes
 * for the same token, so the two can be compared token by token.
 */
import { badRequest } from "./errors.ts";

/** Most prompt token ids accepted. */
export const MAX_PROMPT_IDS = 262_144;

/**
 * log p(id) = logits[id] − logsumexp(logits), in float64.
 * @param logits (V,) float32 raw logits of one row.
 */
export function tokenLogprob(logits: Float32Array, id: number): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  return logits[id] - max - Math.log(sum);
}

/**
 * Checks token-id prompt against the vocabulary.
 * @throws ServeError 400 at `prompt` when an id is outside [0, vocabSize).
 */
export function checkPromptIds(ids: readonly number[], vocabSize: number): number[] {
  const bad = ids.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
  if (bad >= 0) {
    throw badRequest(
      `Invalid request: prompt token ids must be integers in [0, ${vocabSize}): prompt[${bad}] is ${
        ids[bad]
      }`,
      "prompt",
    );
  }
  return [...ids];
}

/** What a request asked for of its sampled tokens. */
export interface TokenLogOptions {
  /** `logprobs` was set (0): report each sampled token's log-probability. */
  logprobs: boolean;
  /** `return_tokens_as_token_ids`: name tokens `token_id:<id>`. */
  asIds: boolean;
}

/** One choice's sampled tokens and their log-probabilities, in order. */
export class TokenLog {
  readonly ids: number[] = [];
  readonly logprobs: number[] = [];

  /** Records a sampled token drawn from `logits` (V,). */
  push(id: number, logits: Float32Array): void {
    this.ids.push(id);
    this.logprobs.push(tokenLogprob(logits, id));
  }

  /**
   * The choice's `logprobs` object (legacy completions shape; see module doc).
   * @param tokenText a token's text (used when not `asIds`).
   */
  toJson(asIds: boolean, tokenText: (id: number) => string) {
    const tokens = this.ids.map((id) => (asIds ? `token_id:${id}` : tokenText(id)));
    const offsets: number[] = [];
    let at = 0;
    for (const id of this.ids) {
      offsets.push(at);
      at += tokenText(id).length;
    }
    return {
      tokens,
      token_logprobs: [...this.logprobs],
      top_logprobs: tokens.map((t, i) => ({ [t]: this.logprobs[i] })),
      text_offset: offsets,
    };
  }
}

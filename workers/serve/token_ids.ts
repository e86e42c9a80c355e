/**
 * Token-exact completions, the request fields RL trainers use on vLLM's OpenAI server and that
 * this server implements with the same shapes (workers/serve/README.md, "Remote rollout engines"):
 *
 * - `prompt` as token ids (`[1, 2, 3]`, or `[[1, 2, 3]]`): decoded as given, never re-tokenized;
 * - `logprobs` and `return_tokens_as_token_ids: true` (logprobs.ts): the sampled tokens come back
 *   as `"token_id:<id>"` with their log-probabilities, so a client reads the sampled ids back
 *   without tokenizing anything.
 */
import { badRequest } from "./errors.ts";

/** Most prompt token ids accepted. */
export const MAX_PROMPT_IDS = 262_144;

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

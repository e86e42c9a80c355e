/**
 * Log-probs in OpenAI's shapes, from the engine's per-token {@link TokenLogprob}s:
 *
 * - chat (`logprobs: true`, `top_logprobs: k`): `{content: [{token, logprob, bytes,
 *   top_logprobs: [{token, logprob, bytes}]}], refusal: null}`;
 * - completions (`logprobs: k`): `{tokens, token_logprobs, top_logprobs: [{token: logprob}],
 *   text_offset}`, offsets counted in the completion's text from 0 (no `echo`).
 *
 * A token's text is what it writes (`tokenBytes`: UTF-8 bytes, which for a byte-level token
 * may be part of a character, then shown with U+FFFD as OpenAI does) and `bytes` those bytes;
 * a special token is its own string. With vLLM's `return_tokens_as_token_ids` a token is written
 * `token_id:<id>` instead. Log-probs are those of the distribution the token was sampled from,
 * before top-p: softmax(logits / T) at the request's temperature T (1 when greedy), the trainer's
 * `Policy.score` of the same tokens at that temperature (vLLM answers so with
 * `--logprobs-mode processed_logprobs` and `top_p` 1; its default, `raw_logprobs`, is T = 1).
 */
import { tokenBytes, type Tokenizer } from "../model/mod.ts";
import type { TokenLogprob } from "./engine.ts";

/** What a request asked for: `top` alternatives per token, tokens as ids or as text. */
export interface LogprobRequest {
  top: number;
  tokenIds: boolean;
}

/** One chat log-prob entry (`choices[].logprobs.content[]`). */
export interface ChatLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
  top_logprobs: { token: string; logprob: number; bytes: number[] | null }[];
}

/** Completions' `choices[].logprobs`. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Record<string, number>[];
  text_offset: number[];
}

const utf8 = new TextDecoder();

/** Writes tokens as OpenAI's log-prob entries for one tokenizer (see module doc). */
export class LogprobWriter {
  readonly #bytes: (Uint8Array | null)[];

  constructor(private readonly tokenizer: Tokenizer, private readonly request: LogprobRequest) {
    this.#bytes = tokenBytes(tokenizer);
  }

  /** A token's text and bytes (see module doc). */
  token(id: number): { token: string; bytes: number[] | null } {
    const b = this.#bytes[id] ?? null;
    const text = b ? utf8.decode(b) : (this.tokenizer.idToToken(id) ?? "");
    return {
      token: this.request.tokenIds ? `token_id:${id}` : text,
      bytes: b ? [...b] : [...new TextEncoder().encode(text)],
    };
  }

  /** One chat entry. */
  chat(id: number, lp: TokenLogprob): ChatLogprob {
    return {
      ...this.token(id),
      logprob: lp.logprob,
      top_logprobs: lp.top.map(([t, logprob]) => ({ ...this.token(t), logprob })),
    };
  }

  /**
   * Completions' log-probs of `tokens` (with theirs in `lps`), text offsets from `offset` (the
   * completion text's length before them, for stream chunks).
   */
  completion(
    tokens: readonly number[],
    lps: readonly TokenLogprob[],
    offset = 0,
  ): CompletionLogprobs {
    const out: CompletionLogprobs = {
      tokens: [],
      token_logprobs: [],
      top_logprobs: [],
      text_offset: [],
    };
    let at = offset;
    tokens.forEach((id, i) => {
      const { token } = this.token(id);
      out.tokens.push(token);
      out.token_logprobs.push(lps[i].logprob);
      out.top_logprobs.push(
        Object.fromEntries(lps[i].top.map(([t, logprob]) => [this.token(t).token, logprob])),
      );
      out.text_offset.push(at);
      at += this.request.tokenIds
        ? utf8.decode(this.#bytes[id] ?? new Uint8Array()).length
        : token.length;
    });
    return out;
  }
}

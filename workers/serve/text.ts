/**
 * The text of one choice as its tokens arrive: decoded with special tokens dropped (as the
 * trainer's generation does, workers/seed/text_policy.ts), cut before the first stop string
 * (OpenAI's rule: the returned text never contains the stop sequence), and handed out in
 * deltas for streaming that never show text which a later token could still take back: the
 * tail that could be the start of a stop string, and an incomplete UTF-8 character (a byte-level
 * token sequence that ends inside one decodes to U+FFFD until the rest arrives).
 */
/** What {@link ChoiceText.push} learned from one token. */
export interface TextStep {
  /** Text safe to show now (may be ""). */
  delta: string;
  /** True when a stop string appeared: the choice is done and `delta` ends before it. */
  stopped: boolean;
}

/**
 * Incremental text of one choice (see module doc). Each token decodes only a short window of
 * the latest tokens, as Hugging Face's `TextStreamer` and vLLM's `detokenize_incrementally` do:
 * the text the window adds beyond the tokens already read is the new text, and is kept once it
 * no longer ends in an incomplete character. Decoding the whole text again at every token cost
 * O(n) per token (65 µs per token at 64 tokens on builtin:tiny). The result equals decoding all
 * tokens at once for decoders that join their tokens' texts (byte-level BPE as in GPT-2, Qwen
 * and the builtin tokenizers; Metaspace); `tests/workers/serve/prompt_test.ts` checks it on
 * random token sequences.
 */
export class ChoiceText {
  readonly tokens: number[] = [];
  /** Text of tokens [0, #read). */
  #stable = "";
  /** First token of the decode window. */
  #window = 0;
  /** Tokens whose text is in #stable. */
  #read = 0;
  /** Decoded text of tokens [#window, #read). */
  #windowText = "";
  /** Text of tokens [#read, n) as the window decodes it (may end in U+FFFD). */
  #pending = "";
  #emitted = 0;
  #final: string | null = null;
  readonly #longestStop: number;

  /**
   * @param decode token ids → text with special tokens skipped.
   * @param stops stop strings (non-empty ones count).
   */
  constructor(
    private readonly decode: (ids: number[]) => string,
    private readonly stops: readonly string[],
  ) {
    this.#longestStop = Math.max(0, ...stops.map((x) => x.length));
  }

  /** Adds a generated token (not an EOS: those end the choice without text). */
  push(token: number): TextStep {
    this.tokens.push(token);
    const checked = this.#stable.length; // no stop string lies wholly within it (checked before)
    const text = this.#advance();
    const hit = this.#stopAt(text, Math.max(0, checked - this.#longestStop + 1));
    if (hit >= 0) {
      this.#final = text.slice(0, hit);
      return { delta: this.#take(this.#final.length, this.#final), stopped: true };
    }
    return { delta: this.#take(this.#safeEnd(text), text), stopped: false };
  }

  /** Ends the choice (EOS, length or stop): the rest of the text not yet handed out. */
  finish(): string {
    const text = this.text;
    return this.#take(text.length, text);
  }

  /** The whole text so far (final once a stop string was seen). */
  get text(): string {
    return this.#final ?? this.#stable + this.#pending;
  }

  /** Decodes the window with the newest token → the whole text so far. */
  #advance(): string {
    const n = this.tokens.length;
    const text = this.decode(this.tokens.slice(this.#window));
    if (text.length > this.#windowText.length && !text.endsWith("\uFFFD")) {
      this.#stable += text.slice(this.#windowText.length);
      this.#pending = "";
      this.#window = this.#read;
      this.#read = n;
      this.#windowText = this.decode(this.tokens.slice(this.#window, this.#read));
    } else {
      this.#pending = text.slice(this.#windowText.length);
    }
    return this.#stable + this.#pending;
  }

  /** Where the earliest stop string starts in `text` at or after `from`, or -1. */
  #stopAt(text: string, from: number): number {
    let hit = -1;
    for (const stop of this.stops) {
      if (stop.length === 0) continue;
      const at = text.indexOf(stop, from);
      if (at !== -1 && (hit === -1 || at < hit)) hit = at;
    }
    return hit;
  }

  #take(end: number, text: string): string {
    if (end <= this.#emitted) return "";
    const delta = text.slice(this.#emitted, end);
    this.#emitted = end;
    return delta;
  }

  /** Length of the prefix of `text` no later token can change (see module doc). */
  #safeEnd(text: string): number {
    let end = text.length;
    while (end > this.#emitted && text.charCodeAt(end - 1) === 0xfffd) end--;
    const base = end;
    for (const stop of this.stops) {
      for (let k = Math.min(stop.length - 1, base); k > 0; k--) {
        if (text.startsWith(stop.slice(0, k), base - k)) {
          end = Math.min(end, base - k);
          break;
        }
      }
    }
    return Math.max(end, this.#emitted);
  }
}

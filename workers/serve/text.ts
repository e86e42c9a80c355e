/**
 * The text of one choice as its tokens arrive: decoded with special tokens dropped (as the
 * trainer's generation does, workers/seed/text_policy.ts), cut before the first stop string
 * (OpenAI's rule: the returned text never contains the stop sequence), and handed out in
 * deltas for streaming that never show text which a later token could still take back: the
 * tail that could be the start of a stop string, and an incomplete UTF-8 character (a byte-level
 * token sequence that ends inside one decodes to U+FFFD until the rest arrives).
 */
import { stopStringHit } from "../model/mod.ts";

/** What {@link ChoiceText.push} learned from one token. */
export interface TextStep {
  /** Text safe to show now (may be ""). */
  delta: string;
  /** True when a stop string appeared: the choice is done and `delta` ends before it. */
  stopped: boolean;
}

/** Incremental text of one choice (see module doc). */
export class ChoiceText {
  readonly tokens: number[] = [];
  #emitted = 0;
  #final: string | null = null;

  /**
   * @param decode token ids → text with special tokens skipped.
   * @param stops stop strings (non-empty ones count).
   */
  constructor(
    private readonly decode: (ids: number[]) => string,
    private readonly stops: readonly string[],
  ) {}

  /** Adds a generated token (not an EOS: those end the choice without text). */
  push(token: number): TextStep {
    this.tokens.push(token);
    const text = this.decode(this.tokens);
    const hit = stopStringHit(text, [...this.stops]);
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
    return this.#final ?? this.decode(this.tokens);
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

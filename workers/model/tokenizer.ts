/**
 * Tokenizers: Hugging Face `tokenizer.json` files run by `@huggingface/tokenizers` (BPE,
 * WordPiece, Unigram; not WordLevel), chat templates by `@huggingface/jinja`, and a builder of
 * byte-level BPE tokenizers for `builtin:tiny` models from an environment's vocabulary.
 */
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";

/** Thrown when tokenizer files are invalid or unsupported, or ids are out of range. */
export class TokenizerError extends Error {
  override name = "TokenizerError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** The two tokenizer files of a Hugging Face directory, parsed from JSON. */
export interface TokenizerFiles {
  /** `tokenizer.json`. */
  tokenizerJson: Record<string, unknown>;
  /** `tokenizer_config.json` (special tokens, chat template), or null when absent. */
  tokenizerConfig: Record<string, unknown> | null;
}

/** One chat message for `applyChatTemplate`. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | string;
  content: string;
}

/** Options of `Tokenizer.encode`. */
export interface TokenizerEncodeOptions {
  /** Add the tokenizer's special tokens (e.g. Llama's BOS) via its post-processor; default true. */
  addSpecialTokens?: boolean;
}

/** Options of `Tokenizer.decode`. */
export interface TokenizerDecodeOptions {
  /** Drop special tokens (EOS, chat markers) from the text; default false. */
  skipSpecialTokens?: boolean;
}

/**
 * Parses a JSON file's bytes into an object. @throws {TokenizerError} when it is not a JSON object.
 */
export function parseJsonObject(bytes: Uint8Array, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(bytes));
  } catch (cause) {
    throw new TokenizerError(`Cannot read ${what} as it must be JSON`, { cause });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new TokenizerError(`Cannot read ${what} as it must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

/** A special token as `tokenizer_config.json` writes it: a string or `{content}`. */
function tokenContent(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (
    value && typeof value === "object" &&
    typeof (value as { content?: unknown }).content === "string"
  ) {
    return (value as { content: string }).content;
  }
  return null;
}

/** A Unicode normalization form, as `String.prototype.normalize` takes it. */
type UnicodeForm = "NFC" | "NFD" | "NFKC" | "NFKD";

/**
 * The Unicode normalization forms `tokenizer.json`'s normalizer applies, in order ([] for none);
 * null when it does anything else.
 */
function unicodeForms(files: TokenizerFiles): UnicodeForm[] | null {
  const forms: readonly UnicodeForm[] = ["NFC", "NFD", "NFKC", "NFKD"];
  const walk = (n: unknown): UnicodeForm[] | null => {
    if (n === null || n === undefined) return [];
    if (typeof n !== "object") return null;
    const { type, normalizers } = n as { type?: unknown; normalizers?: unknown };
    if (type === "Sequence" && Array.isArray(normalizers)) {
      const out: UnicodeForm[] = [];
      for (const inner of normalizers) {
        const f = walk(inner);
        if (f === null) return null;
        out.push(...f);
      }
      return out;
    }
    const form = forms.find((f) => f === type);
    return form ? [form] : null;
  };
  return walk(files.tokenizerJson.normalizer);
}

/** A loaded tokenizer: text ↔ token ids, special token ids, and the chat template if any. */
export class Tokenizer {
  /** The files it was built from (saved unchanged with checkpoints). */
  readonly files: TokenizerFiles;
  /** Largest token id + 1 (base vocabulary and added tokens). */
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | null;
  readonly padTokenId: number | null;
  /** Token ids that end a generation: EOS plus `<|im_end|>`/`<|eot_id|>` when present. */
  readonly stopTokenIds: number[];
  /** Jinja chat template from `tokenizer_config.json`, or null. */
  readonly chatTemplate: string | null;
  #hf: HfTokenizer;
  /** Ids of `tokenizer.json`'s added tokens marked `special`. */
  #special: Set<number>;
  #template: Template | null = null;
  #cleanUp: boolean;

  /**
   * @throws {TokenizerError} when `tokenizer.json` lacks a model, uses the unsupported WordLevel
   *   model, or cannot be built by `@huggingface/tokenizers`.
   */
  constructor(files: TokenizerFiles) {
    const model = files.tokenizerJson.model as { type?: unknown } | undefined;
    if (!model || typeof model !== "object") {
      throw new TokenizerError("Cannot load tokenizer.json as it must hold a model object");
    }
    if (model.type === "WordLevel") {
      throw new TokenizerError(
        "Cannot load tokenizer.json as its model must be BPE, WordPiece or Unigram: current value is WordLevel",
      );
    }
    const json = {
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: null,
      added_tokens: [],
      ...files.tokenizerJson,
    };
    const config = files.tokenizerConfig ?? {};
    try {
      this.#hf = new HfTokenizer(json, config);
    } catch (cause) {
      throw new TokenizerError(
        `Cannot load tokenizer.json as @huggingface/tokenizers rejects it: ${cause}`,
        { cause },
      );
    }
    this.files = files;
    const added = Array.isArray(files.tokenizerJson.added_tokens)
      ? files.tokenizerJson.added_tokens as { id?: unknown; special?: unknown }[]
      : [];
    this.#special = new Set(
      added.filter((t) => t?.special === true && typeof t.id === "number").map((t) =>
        t.id as number
      ),
    );
    let maxId = -1;
    for (const id of this.#hf.get_vocab(true).values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;
    const idOf = (key: string) => {
      const content = tokenContent(config[key]);
      return content === null ? null : this.#hf.token_to_id(content) ?? null;
    };
    this.bosTokenId = idOf("bos_token");
    this.eosTokenId = idOf("eos_token");
    this.padTokenId = idOf("pad_token");
    const stops = new Set<number>();
    if (this.eosTokenId !== null) stops.add(this.eosTokenId);
    for (const marker of ["<|im_end|>", "<|eot_id|>", "<|endoftext|>"]) {
      const id = this.#hf.token_to_id(marker);
      if (id !== undefined && (marker !== "<|endoftext|>" || this.eosTokenId === null)) {
        stops.add(id);
      }
    }
    this.stopTokenIds = [...stops];
    this.chatTemplate = typeof config.chat_template === "string" ? config.chat_template : null;
    this.#cleanUp = config.clean_up_tokenization_spaces === true;
  }

  /** Builds a tokenizer from file bytes. @throws {TokenizerError} on invalid JSON or files. */
  static fromBytes(tokenizerJson: Uint8Array, tokenizerConfig: Uint8Array | null): Tokenizer {
    return new Tokenizer({
      tokenizerJson: parseJsonObject(tokenizerJson, "tokenizer.json"),
      tokenizerConfig: tokenizerConfig === null
        ? null
        : parseJsonObject(tokenizerConfig, "tokenizer_config.json"),
    });
  }

  #maxTokenChars: number | undefined;
  #unicodeForms: UnicodeForm[] | null | undefined;

  /**
   * The longest vocabulary entry (UTF-16 code units): a byte-level entry stands for at most as
   * many code units of (normalized) text as it has characters, so no token covers more. Computed
   * once, on first use.
   */
  get maxTokenChars(): number {
    if (this.#maxTokenChars === undefined) {
      let longest = 1;
      for (const key of this.#hf.get_vocab(true).keys()) longest = Math.max(longest, key.length);
      this.#maxTokenChars = longest;
    }
    return this.#maxTokenChars;
  }

  /**
   * A lower bound on the number of tokens of `text`, found without tokenizing it: the length of
   * the text as the normalizer leaves it over {@link maxTokenChars}. Null when `tokenizer.json`
   * has a normalizer other than Unicode normalization forms (NFC, NFD, NFKC, NFKD, alone or in a
   * Sequence), which might delete text (then no length bounds the count). Encoding ~1 MiB takes
   * seconds; this takes milliseconds.
   */
  minTokens(text: string): number | null {
    if (this.#unicodeForms === undefined) this.#unicodeForms = unicodeForms(this.files);
    if (this.#unicodeForms === null) return null;
    let normalized = text;
    for (const form of this.#unicodeForms) normalized = normalized.normalize(form);
    return Math.ceil(normalized.length / this.maxTokenChars);
  }

  /** Token ids of `text`. */
  encode(text: string, options: TokenizerEncodeOptions = {}): number[] {
    return this.#hf.encode(text, { add_special_tokens: options.addSpecialTokens ?? true }).ids;
  }

  /**
   * Text of token ids (`""` for none). Ids without a token (at or past `vocabSize`, or holes in
   * the vocabulary, e.g. a model's padded embedding rows) decode to nothing, as in `tokenizers`.
   * @throws {TokenizerError} when an id is not a non-negative integer.
   */
  decode(ids: readonly number[], options: TokenizerDecodeOptions = {}): string {
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0) {
        throw new TokenizerError(
          `Cannot decode token id as it must be a non-negative integer: current value is ${id}`,
        );
      }
    }
    const known = ids.filter((id) => this.#hf.id_to_token(id) !== undefined);
    if (known.length === 0) return "";
    return this.#hf.decode(known, {
      skip_special_tokens: options.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: this.#cleanUp,
    });
  }

  /** Id of a token string (e.g. `<|im_end|>`), or undefined. */
  tokenToId(token: string): number | undefined {
    return this.#hf.token_to_id(token);
  }

  /** Whether `id` is one of `tokenizer.json`'s added tokens marked special (e.g. `<|im_end|>`). */
  isSpecialToken(id: number): boolean {
    return this.#special.has(id);
  }

  /** Token string of an id, or undefined. */
  idToToken(id: number): string | undefined {
    return this.#hf.id_to_token(id);
  }

  /**
   * Renders `messages` with the chat template (variables as in transformers:
   * `messages`, `add_generation_prompt`, `bos_token`, `eos_token`, `pad_token`, and
   * `enable_thinking` when `options.enableThinking` is given: Qwen3's thinking switch, a keyword
   * argument of `apply_chat_template` passed through to the template).
   * @throws {TokenizerError} when there is no chat template, or the template fails.
   */
  applyChatTemplate(
    messages: ChatMessage[],
    options: { addGenerationPrompt?: boolean; enableThinking?: boolean } = {},
  ): string {
    if (this.chatTemplate === null) {
      throw new TokenizerError(
        "Cannot apply a chat template as tokenizer_config.json must hold chat_template: it does not",
      );
    }
    const config = this.files.tokenizerConfig ?? {};
    try {
      this.#template ??= new Template(this.chatTemplate);
      return this.#template.render({
        messages,
        add_generation_prompt: options.addGenerationPrompt ?? false,
        bos_token: tokenContent(config.bos_token) ?? "",
        eos_token: tokenContent(config.eos_token) ?? "",
        pad_token: tokenContent(config.pad_token) ?? "",
        ...(options.enableThinking === undefined
          ? {}
          : { enable_thinking: options.enableThinking }),
      });
    } catch (cause) {
      throw new TokenizerError(`Cannot apply the chat template as it must render: ${cause}`, {
        cause,
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// builtin:tiny — a byte-level BPE tokenizer built from an environment's vocabulary.
// ---------------------------------------------------------------------------------------------

/** GPT-2's pre-tokenizer split (the ByteLevel pre-tokenizer with `use_regex: true`). */
const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** GPT-2's reversible byte → printable character map (`bytes_to_unicode`), in id order. */
export function bytesToUnicode(): Map<number, string> {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  return new Map(bs.map((b, i) => [b, String.fromCharCode(cs[i])]));
}

/** Special tokens of builtin tokenizers: EOS/pad first, then the chat markers. */
export const BUILTIN_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;

/** ChatML chat template of builtin tokenizers (the Qwen2 style). */
export const BUILTIN_CHAT_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** Largest vocabulary a builtin tokenizer accepts (words). */
export const MAX_BUILTIN_WORDS = 50_000;

/**
 * Builds a GPT-2-style byte-level BPE tokenizer whose merges make every vocabulary word a single
 * token both at the start of a text (`word`) and after a space (`Ġword`), and every ASCII
 * punctuation mark after a space (`Ġ:`). Lossless for any text: the 256 byte tokens cover what
 * the merges do not. Ids: bytes 0–255 (GPT-2 order), merges, then `BUILTIN_SPECIAL_TOKENS`.
 *
 * Merges are learned by BPE training (Sennrich et al. 2016) on the words' pre-tokenized pieces:
 * the most frequent adjacent pair first (ties by the pair's text), never creating a token twice,
 * so encoding replays training exactly; then `Ġ` + each piece. A word the GPT-2 split breaks into
 * several pieces (e.g. `box_1`) encodes to one token per piece.
 *
 * `options.specialTokens` are added after `BUILTIN_SPECIAL_TOKENS` as further special tokens
 * (one id each, matched before pre-tokenization), e.g. `<image>` for vision models.
 * @throws {TokenizerError} when the vocabulary is empty, larger than `MAX_BUILTIN_WORDS`, or has
 *   an empty word, or when an extra special token is empty or repeats one.
 */
export function buildByteLevelTokenizer(
  vocabulary: readonly string[],
  options: { specialTokens?: readonly string[] } = {},
): TokenizerFiles {
  const specials = [...BUILTIN_SPECIAL_TOKENS, ...(options.specialTokens ?? [])];
  if (specials.some((t, i) => t.length === 0 || specials.indexOf(t) !== i)) {
    throw new TokenizerError(
      `Cannot build a tokenizer as special tokens must be non-empty and distinct: current list is ${
        JSON.stringify(specials)
      }`,
    );
  }
  if (vocabulary.length === 0 || vocabulary.length > MAX_BUILTIN_WORDS) {
    throw new TokenizerError(
      `Cannot build a tokenizer as the vocabulary must hold 1 to ${MAX_BUILTIN_WORDS} words: current size is ${vocabulary.length}`,
    );
  }
  const byteChar = bytesToUnicode();
  const encoder = new TextEncoder();
  const toByteLevel = (piece: string) =>
    Array.from(encoder.encode(piece), (b) => byteChar.get(b)!).join("");
  const space = byteChar.get(0x20)!; // "Ġ"
  const plain = new Set<string>(); // pieces without a leading space, byte-level
  const spaced = new Set<string>(); // the same after "Ġ"
  const punctuation = Array.from({ length: 94 }, (_, i) => String.fromCharCode(0x21 + i))
    .filter((c) => /[^\p{L}\p{N}]/u.test(c));
  for (const word of [...vocabulary, ...punctuation]) {
    if (word.length === 0) {
      throw new TokenizerError("Cannot build a tokenizer as vocabulary words must not be empty");
    }
    for (const text of [word, " " + word]) {
      for (const piece of text.match(GPT2_SPLIT) ?? []) {
        if (piece.trim().length === 0) continue; // whitespace runs stay bytes
        const chars = toByteLevel(piece);
        if (chars.startsWith(space)) spaced.add(chars.slice(1));
        else plain.add(chars);
      }
    }
  }
  for (const rest of spaced) plain.add(rest);

  const merges = trainMerges([...plain].sort());
  const vocab = new Map<string, number>([...byteChar.values()].map((c, i) => [c, i]));
  for (const [a, b] of merges) vocab.set(a + b, vocab.size);
  for (const rest of [...spaced].sort()) {
    // a piece training could not finish stays split
    if (vocab.has(rest) && !vocab.has(space + rest)) {
      merges.push([space, rest]);
      vocab.set(space + rest, vocab.size);
    }
  }
  const added = specials.map((content, i) => ({
    id: vocab.size + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const byteLevel = {
    type: "ByteLevel",
    add_prefix_space: false,
    trim_offsets: true,
    use_regex: true,
  };
  const tokenizerJson = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { ...byteLevel, trim_offsets: false },
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: Object.fromEntries(vocab),
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
  const tokenizerConfig = {
    add_bos_token: false,
    add_prefix_space: false,
    bos_token: null,
    eos_token: "<|endoftext|>",
    pad_token: "<|endoftext|>",
    unk_token: null,
    clean_up_tokenization_spaces: false,
    model_max_length: 2048,
    tokenizer_class: "PreTrainedTokenizerFast",
    chat_template: BUILTIN_CHAT_TEMPLATE,
    added_tokens_decoder: Object.fromEntries(added.map(({ id, ...rest }) => [String(id), rest])),
  };
  return { tokenizerJson, tokenizerConfig };
}

/**
 * BPE training on distinct pieces (each a string of byte-level characters, weight 1) until every
 * piece is one symbol or no pair can be merged. A pair whose concatenation already is a token is
 * never merged, so each token has one producing merge and the encoder (lowest rank first,
 * leftmost on ties) reproduces training.
 */
function trainMerges(pieces: string[]): [string, string][] {
  const words = pieces.map((p) => Array.from(p));
  const tokens = new Set<string>(words.flat());
  const merges: [string, string][] = [];
  let open = words.filter((w) => w.length > 1);
  while (open.length > 0) {
    const counts = new Map<string, number>();
    for (const w of open) {
      for (let i = 0; i + 1 < w.length; i++) {
        if (tokens.has(w[i] + w[i + 1])) continue;
        const key = w[i] + "\u0000" + w[i + 1];
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
    }
    let best: string | null = null;
    let bestCount = 0;
    for (const [key, count] of counts) {
      if (count > bestCount || (count === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = count;
      }
    }
    if (best === null) break; // remaining pieces cannot finish without a duplicate token
    const [a, b] = best.split("\u0000");
    merges.push([a, b]);
    tokens.add(a + b);
    for (const w of open) {
      for (let i = 0; i + 1 < w.length; i++) {
        if (w[i] === a && w[i + 1] === b) w.splice(i, 2, a + b);
      }
    }
    open = open.filter((w) => w.length > 1);
  }
  return merges;
}

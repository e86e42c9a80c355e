/**
 * The text side of the policy for the trainer: how a prompt and a response become token ids, and
 * batched generation of actions (stop at `</action>`) and analyses (stop at the end of the JSON
 * object). One convention everywhere (rollout, warm-up SFT, re-scoring, evaluation):
 *
 *     input ids = encode(prompt + "\n")            (the tokenizer's special tokens, e.g. a BOS)
 *     response  = encode(text, no special tokens)  (+ EOS for analyzer targets)
 *
 * Prompts are used raw (no chat template): the builtin models are trained on exactly this form.
 *
 * Vision models: a prompt's `<image>` placeholders (one special token each) go with the images
 * given beside the prompt (`sample(…, images)`, `generate(…, { images })`); the model expands each
 * into its image tokens. Generated text never contains the placeholder (it is removed), so a
 * response or a skill quoted in a later prompt cannot open an image slot that has no image.
 */
import {
  ConstraintError,
  IMAGE_PLACEHOLDER,
  JsonConstrainedDecoder,
  type JsonObjectSchema,
  type Policy,
  type RgbImage,
  type Sample,
  tokenBytes,
  Tokenizer,
} from "../model/mod.ts";

/** Separator between a prompt and its response. */
export const PROMPT_SUFFIX = "\n";

/** Stop string of an action response. */
export const ACTION_STOP = "</action>";

/**
 * Stop string of an analysis decoded without its schema (`seed.analyzer_constrained: false`):
 * the end of `{"episode_skill": "…", "episode_summary": "…"}`. Constrained decoding stops when
 * the object closes instead.
 */
export const ANALYSIS_STOP = '"}';

/**
 * `text` without any {@link IMAGE_PLACEHOLDER}, removed until none is left: one pass of
 * `replaceAll` turned `<im<image>age>` into `<image>`, which a later prompt quoting the text
 * (a skill, a search echoed by the env) would read as an image slot without an image.
 */
export function withoutImagePlaceholders(text: string): string {
  let out = text;
  while (out.includes(IMAGE_PLACEHOLDER)) out = out.replaceAll(IMAGE_PLACEHOLDER, "");
  return out;
}

/** A generated batch: one text per prompt and the number of tokens generated. */
export interface TextGeneration {
  texts: string[];
  tokens: number;
}

/** Options of {@link TextPolicy.generate}. */
export interface TextGenerateOptions {
  maxNewTokens: number;
  /** 0 = greedy. */
  temperature: number;
  /** Seed of the sampling streams. */
  seed: number;
  /** Stop strings (default none; EOS always stops). */
  stop?: string[];
  /** Vision models: `images[i]` fill prompt i's `<image>` placeholders (empty/absent: none). */
  images?: (readonly RgbImage[] | undefined)[];
  /**
   * Structured generation: every text is an object of this schema, written within
   * `maxNewTokens` (constrained_decoding.ts); generation stops when the object closes, and
   * `stop` is ignored (a stop string could occur inside a string value).
   */
  schema?: JsonObjectSchema;
}

/** A `Policy` and its tokenizer, speaking text. */
export class TextPolicy {
  readonly #prompts = new Map<string, number[]>();
  readonly #decoders = new Map<string, JsonConstrainedDecoder>();

  constructor(readonly policy: Policy, readonly tokenizer: Tokenizer) {}

  /** Token ids of `prompt` + {@link PROMPT_SUFFIX} (memoised: prompts repeat within a step). */
  promptIds(prompt: string): number[] {
    let ids = this.#prompts.get(prompt);
    if (!ids) {
      ids = this.tokenizer.encode(prompt + PROMPT_SUFFIX);
      if (this.#prompts.size > 20_000) this.#prompts.clear();
      this.#prompts.set(prompt, ids);
    }
    return ids;
  }

  /** Token ids of a response text (no special tokens), plus EOS when `eos` (and there is one). */
  responseIds(text: string, eos = false): number[] {
    const ids = this.tokenizer.encode(text, { addSpecialTokens: false });
    const end = this.tokenizer.eosTokenId ?? this.tokenizer.stopTokenIds[0];
    if (eos && end !== undefined && end !== null) ids.push(end);
    return ids;
  }

  /**
   * A (prompt, response) token sample; `images` (vision models) fill the prompt's `<image>`
   * placeholders in order and are kept only when there are some.
   */
  sample(prompt: string, response: string, eos = false, images?: readonly RgbImage[]): Sample {
    const s: Sample = { prompt: this.promptIds(prompt), response: this.responseIds(response, eos) };
    if (images && images.length > 0) s.images = [...images];
    return s;
  }

  /**
   * The constrained decoder of `schema` for this tokenizer and model width (built on first use,
   * then reused: building indexes the vocabulary).
   * @throws {ConstraintError} when the vocabulary cannot spell an object of the schema.
   */
  jsonDecoder(schema: JsonObjectSchema): JsonConstrainedDecoder {
    const key = JSON.stringify(schema);
    let decoder = this.#decoders.get(key);
    if (!decoder) {
      decoder = new JsonConstrainedDecoder(tokenBytes(this.tokenizer), schema, {
        vocabSize: this.policy.config.vocab_size,
      });
      this.#decoders.set(key, decoder);
    }
    return decoder;
  }

  /**
   * Generates one continuation per prompt, as text (special tokens dropped, cut after the stop
   * string that ended it). With `options.schema`, each text is an object of the schema.
   * @throws {ConstraintError} when `maxNewTokens` is below the fewest tokens the schema's
   *   shortest object takes with this tokenizer.
   */
  async generate(prompts: string[], options: TextGenerateOptions): Promise<TextGeneration> {
    if (prompts.length === 0) return { texts: [], tokens: 0 };
    const tok = this.tokenizer;
    const decoder = options.schema ? this.jsonDecoder(options.schema) : null;
    if (decoder && options.maxNewTokens < decoder.minTokens) {
      throw new ConstraintError(
        `Cannot generate ${
          JSON.stringify(decoder.exampleObject())
        }-shaped text as maxNewTokens must be ≥ ${decoder.minTokens} for this tokenizer: current value is ${options.maxNewTokens}`,
      );
    }
    const gens = await this.policy.generate(prompts.map((p) => this.promptIds(p)), {
      maxNewTokens: options.maxNewTokens,
      greedy: options.temperature === 0,
      temperature: options.temperature || 1,
      seed: options.seed,
      eosTokenIds: tok.stopTokenIds,
      stop: decoder ? undefined : options.stop,
      constraint: decoder ? () => decoder.start() : undefined,
      detokenize: (ids) => tok.decode(ids, { skipSpecialTokens: true }),
      images: options.images?.map((x) => (x ? [...x] : undefined)),
    });
    const vision = Boolean(this.policy.config.vision_config);
    const clean = (t: string) => (vision ? withoutImagePlaceholders(t) : t);
    return {
      texts: gens.map((g) => clean(g.text ?? "").trim()),
      tokens: gens.reduce((n, g) => n + g.tokens.length, 0),
    };
  }
}

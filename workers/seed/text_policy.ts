/**
 * The text side of the policy for the trainer: how a prompt and a response become token ids, and
 * batched generation of actions (stop at `</action>`) and analyses (stop at the end of the JSON
 * object). One convention everywhere (rollout, analyzer, re-scoring, warm-up SFT, evaluation), in
 * the model's prompt form (workers/model/chat_template.ts, `promptFormOf`):
 *
 * - `plain` (builtin models, trained from scratch on exactly this form):
 *
 *       input ids = encode(prompt + "\n")            (the tokenizer's special tokens, e.g. a BOS)
 *       response  = encode(text, no special tokens)  (+ EOS for analyzer targets)
 *
 * - `chat_template` (a model whose tokenizer has a chat template of its own, e.g. an uploaded
 *   Qwen3): the prompt is the content of one user message, rendered by the template with the
 *   generation prompt and encoded without adding special tokens; every response ends with the
 *   template's end-of-turn token (`<|im_end|>` for Qwen), which also stops generation:
 *
 *       input ids = encode(template([{role: "user", content: prompt}], generation prompt),
 *                          no special)
 *       response  = encode(text, no special tokens) + end-of-turn
 *
 *   A skill for re-scoring goes into the prompt string (skills.ts `insertSkill`), so it lands
 *   inside the user message and the whole conversation is rendered again.
 *
 * Sampled responses: {@link TextPolicy.generate} also returns each response's token ids as they
 * are trained and scored (`TextGeneration.responseIds`). Under a chat template these are the
 * sampled ids themselves (plus the end-of-turn token when a stop string or the JSON schema ended
 * the answer), never the text decoded and encoded again: a response whose text encodes to other
 * ids (a leading space, a merge across the stop string) is scored as the ids that were sampled.
 * Plain models keep their original convention (the trimmed text encoded again), so builtin runs
 * are unchanged.
 *
 * Vision models: a prompt's `<image>` placeholders (one special token each) go with the images
 * given beside the prompt (`sample(…, images)`, `generate(…, { images })`); the model expands each
 * into its image tokens. Generated text never contains the placeholder (it is removed), so a
 * response or a skill quoted in a later prompt cannot open an image slot that has no image.
 */
import {
  type ChatMessage,
  ConstraintError,
  encodePrompt,
  endOfTurnTokenId,
  type Generation,
  IMAGE_PLACEHOLDER,
  JsonConstrainedDecoder,
  type JsonObjectSchema,
  type Policy,
  type PromptForm,
  promptFormOf,
  renderPrompt,
  type RgbImage,
  type Sample,
  stopTokenIdsOf,
  tokenBytes,
  Tokenizer,
  TokenizerError,
} from "../model/mod.ts";
import type { BatchPolicy } from "./rollout.ts";

/** Stop string of an action response. */
export const ACTION_STOP = "</action>";

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

/** The message rendered once when a chat-template policy is built (a template check). */
const USER_PROBE: ChatMessage = { role: "user", content: "Hi" };

/**
 * A generated batch: one text per prompt, each response's token ids as they are trained and
 * scored (see module doc), and the number of tokens generated.
 */
export interface TextGeneration {
  texts: string[];
  /** Per prompt, the response ids (T_i,) that `sample(prompt, ids)` trains on. */
  responseIds: number[][];
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
   * Structured generation: every text is an object of this schema (or of `schema[i]` for prompt
   * i, one per prompt), written within `maxNewTokens` (constrained_decoding.ts); generation stops
   * when the object closes, and `stop` is ignored (a stop string could occur inside a string
   * value).
   */
  schema?: JsonObjectSchema | readonly JsonObjectSchema[];
  /** Prefill a prefix common to several prompts once (`GenerateOptions.sharePrefixes`). */
  sharePrefixes?: boolean;
  /**
   * Under a schema, append the text the schema forces without drawing its tokens (jump-forward
   * decoding, `GenerateOptions.jumpForward`). Default true.
   */
  jumpForward?: boolean;
}

/** A `Policy` and its tokenizer, speaking text in the model's prompt form (see module doc). */
export class TextPolicy {
  /** `chat_template` when the tokenizer has a chat template of its own, else `plain`. */
  readonly form: PromptForm;
  /** The token ending every chat-template response (null in the plain form). */
  readonly endOfTurnId: number | null;
  readonly #stopIds: number[];
  readonly #prompts = new Map<string, number[]>();
  readonly #decoders = new Map<string, JsonConstrainedDecoder>();

  /**
   * `options.eosTokenIds`: the EOS ids the model's files declare (`declaredEosTokenIds`, e.g.
   * every id of generation_config.json's list); generation stops on them too (default none
   * beyond the tokenizer's).
   * @throws {TokenizerError} when the tokenizer's own chat template fails to render a user
   *   message (checked here, so a job with such a model fails when it starts).
   */
  constructor(
    readonly policy: Policy,
    readonly tokenizer: Tokenizer,
    options: { eosTokenIds?: readonly number[] } = {},
  ) {
    this.form = promptFormOf(tokenizer);
    if (this.form === "chat_template") renderPrompt(tokenizer, this.form, [USER_PROBE]);
    this.endOfTurnId = this.form === "chat_template" ? endOfTurnTokenId(tokenizer) : null;
    this.#stopIds = stopTokenIdsOf(tokenizer, this.form, options.eosTokenIds);
  }

  /** Token ids that end a generation (`stopTokenIdsOf` with the model's declared EOS ids). */
  get stopTokenIds(): readonly number[] {
    return this.#stopIds;
  }

  /**
   * Token ids of `prompt` in the prompt form: `prompt` + `PROMPT_SUFFIX` ("\n"), or the chat
   * template's rendering of one user message holding `prompt` (memoised: prompts repeat within
   * a step).
   * @throws {TokenizerError} when the tokenizer encodes the prompt to no token at all.
   */
  promptIds(prompt: string): number[] {
    let ids = this.#prompts.get(prompt);
    if (!ids) {
      const text = renderPrompt(this.tokenizer, this.form, [{ role: "user", content: prompt }]);
      ids = encodePrompt(this.tokenizer, this.form, text);
      if (ids.length === 0) {
        throw new TokenizerError(
          `Cannot encode a prompt as the model's tokenizer (tokenizer.json) must spell it: it encodes ${
            JSON.stringify(prompt.length > 80 ? `${prompt.slice(0, 80)}…` : prompt)
          } to 0 tokens (its vocabulary lacks the prompt's characters)`,
        );
      }
      if (this.#prompts.size > 20_000) this.#prompts.clear();
      this.#prompts.set(prompt, ids);
    }
    return ids;
  }

  /**
   * Token ids of a response text (no special tokens). Plain form: plus EOS when `eos` (and there
   * is one). Chat template: plus the end-of-turn token, always (`eos` changes nothing).
   */
  responseIds(text: string, eos = false): number[] {
    const ids = this.tokenizer.encode(text, { addSpecialTokens: false });
    if (this.endOfTurnId !== null) return [...ids, this.endOfTurnId];
    const end = this.tokenizer.eosTokenId ?? this.tokenizer.stopTokenIds[0];
    if (eos && end !== undefined && end !== null) ids.push(end);
    return ids;
  }

  /**
   * A (prompt, response) token sample. `response` is a text (encoded by {@link responseIds}) or
   * token ids used as they are (a sampled response: `TextGeneration.responseIds`). `images`
   * (vision models) fill the prompt's `<image>` placeholders in order and are kept only when
   * there are some.
   */
  sample(
    prompt: string,
    response: string | readonly number[],
    eos = false,
    images?: readonly RgbImage[],
  ): Sample {
    const ids = typeof response === "string" ? this.responseIds(response, eos) : [...response];
    const s: Sample = { prompt: this.promptIds(prompt), response: ids };
    if (images && images.length > 0) s.images = [...images];
    return s;
  }

  /**
   * The constrained decoder of `schema` for this tokenizer and model width (built on first use,
   * then reused: building indexes the vocabulary).
   * @throws {TokenizerError} when the vocabulary cannot spell an object of the schema (the
   *   ConstraintError as its cause).
   */
  jsonDecoder(schema: JsonObjectSchema): JsonConstrainedDecoder {
    const key = JSON.stringify(schema);
    let decoder = this.#decoders.get(key);
    if (!decoder) {
      try {
        decoder = new JsonConstrainedDecoder(tokenBytes(this.tokenizer), schema, {
          vocabSize: this.policy.config.vocab_size,
        });
      } catch (e) {
        if (!(e instanceof ConstraintError)) throw e;
        throw new TokenizerError(
          `Cannot decode the analysis as the model's tokenizer (tokenizer.json) must spell its JSON object: ${e.message}`,
          { cause: e },
        );
      }
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
    if (prompts.length === 0) return { texts: [], responseIds: [], tokens: 0 };
    const tok = this.tokenizer;
    const { schema } = options;
    if (Array.isArray(schema) && schema.length !== prompts.length) {
      throw new ConstraintError(
        `Cannot generate as schema must hold one schema per prompt (${prompts.length}): current value holds ${schema.length}`,
      );
    }
    // one decoder lookup per distinct schema object (the lookup serialises the schema)
    const bySchema = new Map<JsonObjectSchema, JsonConstrainedDecoder>();
    const decoderOf = (s: JsonObjectSchema) => {
      let d = bySchema.get(s);
      if (!d) bySchema.set(s, d = this.jsonDecoder(s));
      return d;
    };
    const decoders = schema === undefined
      ? null
      : prompts.map((_, i) =>
        decoderOf(Array.isArray(schema) ? schema[i] : schema as JsonObjectSchema)
      );
    for (const decoder of bySchema.values()) {
      if (options.maxNewTokens < decoder.minTokens) {
        throw new ConstraintError(
          `Cannot generate ${
            JSON.stringify(decoder.exampleObject())
          }-shaped text as maxNewTokens must be ≥ ${decoder.minTokens} for this tokenizer: current value is ${options.maxNewTokens}`,
        );
      }
    }
    const gens = await this.policy.generate(prompts.map((p) => this.promptIds(p)), {
      maxNewTokens: options.maxNewTokens,
      greedy: options.temperature === 0,
      temperature: options.temperature || 1,
      seed: options.seed,
      eosTokenIds: this.#stopIds,
      stop: decoders ? undefined : options.stop,
      constraint: decoders ? (i) => decoders[i].start() : undefined,
      jumpForward: options.jumpForward,
      detokenize: (ids) => tok.decode(ids, { skipSpecialTokens: true }),
      images: options.images?.map((x) => (x ? [...x] : undefined)),
      sharePrefixes: options.sharePrefixes,
    });
    const vision = Boolean(this.policy.config.vision_config);
    const clean = (t: string) => (vision ? withoutImagePlaceholders(t) : t);
    const texts = gens.map((g) => clean(g.text ?? "").trim());
    return {
      texts,
      responseIds: gens.map((g, i) => this.#sampledIds(g, texts[i])),
      tokens: gens.reduce((n, g) => n + g.tokens.length, 0),
    };
  }

  /**
   * The ids a generated response is trained and scored as (module doc): under a chat template the
   * `sampled` ids (an ending EOS included when one was sampled), with the end-of-turn token
   * appended when `stopped` (a stop string or a completed schema ended the answer; a response cut
   * at `maxNewTokens` stays cut); in the plain form `text` (the cut, trimmed response) encoded
   * again. The one rule of local and remote rollouts (remote_rollout.ts).
   */
  trainedIds(sampled: readonly number[], text: string, stopped: boolean): number[] {
    if (this.endOfTurnId === null) return this.responseIds(text);
    const ids = [...sampled];
    if (stopped) ids.push(this.endOfTurnId);
    return ids;
  }

  #sampledIds(g: Generation, text: string): number[] {
    return this.trainedIds(g.tokens, text, g.finishReason === "stop");
  }
}

/**
 * The sampling seed of turn `turn` (1, 2, …) of a rollout sampled with `seed`:
 * (seed + 0x9e3779b1 · turn) mod 2^32, one stream per turn (the golden-ratio stride spreads
 * consecutive turns over the seed space). The one formula of the rollout policies of training,
 * warm-up and evaluation ({@link actionPolicy}).
 */
export function turnSeed(seed: number, turn: number): number {
  return (seed + 0x9e3779b1 * turn) >>> 0;
}

/** Options of {@link actionPolicy}. */
export interface ActionPolicyOptions {
  /** Most tokens of one response. */
  maxNewTokens: number;
  /** Sampling temperature (0: greedy). */
  temperature: number;
  /** The rollout's seed; turn t samples with `turnSeed(seed, t)`. */
  seed: number;
  /** Keep each response's token ids on its turn (what the trainer scores). Default false. */
  keepIds?: boolean;
  /** Told the number of tokens generated at each turn. */
  onTokens?: (tokens: number) => void;
}

/**
 * The batched policy of a rollout (`runRollouts`, rollout.ts) that samples each turn's action
 * responses from `policy`, stopping at `</action>`, turn t seeded with `turnSeed(seed, t)`; the
 * one adapter of training rollouts, warm-up trajectories and evaluation episodes.
 */
export function actionPolicy(
  policy: TextPolicy,
  options: ActionPolicyOptions,
): BatchPolicy {
  let turn = 0;
  return async (prompts, images) => {
    const g = await policy.generate(prompts, {
      maxNewTokens: options.maxNewTokens,
      temperature: options.temperature,
      seed: turnSeed(options.seed, ++turn),
      stop: [ACTION_STOP],
      images,
    });
    options.onTokens?.(g.tokens);
    return options.keepIds ? { texts: g.texts, responseIds: g.responseIds } : g.texts;
  };
}

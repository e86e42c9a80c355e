/**
 * The `builtin:tiny` model and seeded parameter initialisation.
 *
 * builtin:tiny is a Llama decoder of about one million parameters: width 128, 4 layers, 4 query
 * heads of 32 channels sharing 2 KV heads (GQA), SwiGLU width 352, tied input/output embeddings,
 * RoPE θ = 10000 over 2048 positions. Its parameter count is 738,432 + 128·vocab_size, e.g.
 * 900k for the 1,262-token household tokenizer and 995k for a 2,000-token one. Its tokenizer is
 * built from an environment's vocabulary (`buildByteLevelTokenizer`).
 *
 * builtin:tiny-vl is builtin:tiny plus an image encoder (vision.ts): 48×48 RGB images in 8×8
 * patches (36 image tokens per image), a SigLIP-style tower of width 64, 2 blocks of 4 heads,
 * MLP 128, tanh-GELU, and a two-layer projector to width 128. The encoder and projector add
 * 106,560 parameters at image size 48 (81,728 tower, 24,832 projector; each other image size
 * changes only the 64·(size/8)² position embeddings): 844,992 + 128·vocab_size parameters in
 * all. Its tokenizer adds `<image>` as one special token after the builtin ones.
 */
import {
  type DecoderConfig,
  isNormWeight,
  type Parameters,
  parameterSpecs,
  type VisionConfig,
} from "./config.ts";
import { IMAGE_PLACEHOLDER } from "./image.ts";
import type { HfModel } from "./hf.ts";
import { Rng } from "./sampling.ts";
import { buildByteLevelTokenizer, Tokenizer } from "./tokenizer.ts";

/** Thrown on invalid arguments to the builders here. */
export class InitError extends Error {
  override name = "InitError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** Special token ids of a config (all null when not given). */
export interface SpecialTokenIds {
  bosTokenId?: number | null;
  eosTokenId?: number | null;
  padTokenId?: number | null;
}

/**
 * The builtin:tiny Llama config for a tokenizer of `vocabSize` tokens (see the module comment).
 * @throws {InitError} when vocabSize is not a positive integer.
 */
export function builtinTinyConfig(vocabSize: number, tokens: SpecialTokenIds = {}): DecoderConfig {
  if (!Number.isInteger(vocabSize) || vocabSize < 1) {
    throw new InitError(
      `Cannot build the tiny config as vocabSize must be a positive integer: current value is ${vocabSize}`,
    );
  }
  return {
    architecture: "LlamaForCausalLM",
    vocab_size: vocabSize,
    hidden_size: 128,
    intermediate_size: 352,
    num_hidden_layers: 4,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 32,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 2048,
    tie_word_embeddings: true,
    attention_bias: false,
    bos_token_id: tokens.bosTokenId ?? null,
    eos_token_id: tokens.eosTokenId ?? null,
    pad_token_id: tokens.padTokenId ?? null,
  };
}

/** Options of `initParameters`. */
export interface InitParametersOptions {
  /** Standard deviation of weight matrices (HF `initializer_range`); default 0.02. */
  std?: number;
}

/**
 * Fresh parameters as `transformers` initialises a Llama/Qwen2 model (`_init_weights`): every
 * matrix (embeddings, projections, lm_head; for vision models also the patch kernel and position
 * embeddings) ~ N(0, std²), norm weights 1, biases 0. Draws come
 * from one `Rng(seed)` in `parameterSpecs` order, row-major, so the same (config, seed) always
 * gives bit-identical parameters. (HF zeroes the pad row of the embedding; we do not, since
 * builtin tokenizers use EOS as pad and tie the embedding to the output layer.)
 */
export function initParameters(
  config: DecoderConfig,
  seed: number,
  options: InitParametersOptions = {},
): Parameters {
  const std = options.std ?? 0.02;
  const rng = new Rng(seed);
  const params: Parameters = new Map();
  for (const spec of parameterSpecs(config)) {
    const data = new Float32Array(spec.shape.reduce((a, b) => a * b, 1));
    if (spec.shape.length >= 2) {
      for (let i = 0; i < data.length; i++) data[i] = rng.normal() * std;
    } else if (isNormWeight(spec.name)) {
      data.fill(1);
    } // biases stay 0
    params.set(spec.name, data);
  }
  return params;
}

/** Options of `createBuiltinTiny`. */
export interface BuiltinTinyOptions {
  /**
   * Every word the environment's prompts and responses can contain (`Environment.vocabulary()`).
   */
  vocabulary: readonly string[];
  /** Initialisation seed. */
  seed: number;
}

/** generation_config.json of the builtin models: sampling at temperature 1, stop at EOS/pad. */
function sampledGenerationConfig(tokenizer: Tokenizer): HfModel["generationConfig"] {
  return {
    eos_token_id: tokenizer.stopTokenIds,
    pad_token_id: tokenizer.padTokenId,
    do_sample: true,
    temperature: 1.0,
    top_p: 1.0,
  };
}

/**
 * A fresh builtin:tiny model: a tokenizer built from the vocabulary, the tiny config sized to it
 * (EOS = pad = `<|endoftext|>`, no BOS) and parameters initialised from the seed.
 * @throws {TokenizerError} when the vocabulary is empty or too large.
 */
export function createBuiltinTiny(options: BuiltinTinyOptions): HfModel {
  const files = buildByteLevelTokenizer(options.vocabulary);
  const tokenizer = new Tokenizer(files);
  const config = builtinTinyConfig(tokenizer.vocabSize, {
    eosTokenId: tokenizer.eosTokenId,
    padTokenId: tokenizer.padTokenId,
  });
  return {
    config,
    parameters: initParameters(config, options.seed),
    tokenizer: files,
    generationConfig: sampledGenerationConfig(tokenizer),
  };
}

/**
 * The builtin:tiny-vl vision config (see the module comment) for square images of `imageSize`
 * pixels (default 48; a multiple of the patch size 8).
 */
export function builtinTinyVisionConfig(imageSize = 48): VisionConfig {
  return {
    image_size: imageSize,
    patch_size: 8,
    num_channels: 3,
    hidden_size: 64,
    intermediate_size: 128,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    layer_norm_eps: 1e-6,
    hidden_act: "gelu_pytorch_tanh",
    projector_hidden_act: "gelu_pytorch_tanh",
  };
}

/** Options of `createBuiltinTinyVl`. */
export interface BuiltinTinyVlOptions extends BuiltinTinyOptions {
  /** Side of the encoder's square input, pixels (default 48; a multiple of 8). */
  imageSize?: number;
}

/**
 * A fresh builtin:tiny-vl model: builtin:tiny's decoder and tokenizer (plus the `<image>`
 * special token, the config's `image_token_id`) and the tiny image encoder, all initialised
 * from the seed (`initParameters`).
 * @throws {TokenizerError} when the vocabulary is empty or too large.
 * @throws {InitError} when `imageSize` is not a positive multiple of the patch size.
 */
export function createBuiltinTinyVl(options: BuiltinTinyVlOptions): HfModel {
  const imageSize = options.imageSize ?? 48;
  if (!(Number.isInteger(imageSize) && imageSize > 0 && imageSize % 8 === 0)) {
    throw new InitError(
      `Cannot build builtin:tiny-vl as imageSize must be a positive multiple of the patch size 8: current value is ${imageSize}`,
    );
  }
  const files = buildByteLevelTokenizer(options.vocabulary, {
    specialTokens: [IMAGE_PLACEHOLDER],
  });
  const tokenizer = new Tokenizer(files);
  const imageTokenId = tokenizer.encode(IMAGE_PLACEHOLDER, { addSpecialTokens: false });
  const config: DecoderConfig = {
    ...builtinTinyConfig(tokenizer.vocabSize, {
      eosTokenId: tokenizer.eosTokenId,
      padTokenId: tokenizer.padTokenId,
    }),
    vision_config: builtinTinyVisionConfig(imageSize),
    image_token_id: imageTokenId[0],
  };
  return {
    config,
    parameters: initParameters(config, options.seed),
    tokenizer: files,
    generationConfig: sampledGenerationConfig(tokenizer),
  };
}

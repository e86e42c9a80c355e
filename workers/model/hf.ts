/**
 * Hugging Face model directories: `config.json`, `generation_config.json`, `model.safetensors`
 * (or `model.safetensors.index.json` + shards), `tokenizer.json`, `tokenizer_config.json`.
 *
 * The API works on file maps (name → bytes) so the job service can keep directories in S3;
 * `writeHfFolder`/`hfFolderReader` bridge to a local folder. Saved directories load in
 * `transformers` (`LlamaForCausalLM` / `Qwen2ForCausalLM` / `Qwen3ForCausalLM`, with Llama 3's
 * `rope_scaling` when set) and real Hub directories of those architectures load here.
 *
 * Vision-language models (a config with `vision_config`, e.g. `builtin:tiny-vl`) keep the
 * decoder's architecture and names and add to `config.json` a SigLIP-style `vision_config`
 * object (`image_size`, `patch_size`, `num_channels`, `hidden_size`, `intermediate_size`,
 * `num_hidden_layers`, `num_attention_heads`, `layer_norm_eps`, `hidden_act`), a top-level
 * `image_token_id` and LLaVA's `projector_hidden_act`; the `vision_tower.*` and
 * `multi_modal_projector.*` tensors (config.ts) sit beside the decoder's in the safetensors.
 * (`transformers` loading such a folder as `LlamaForCausalLM` gets the text decoder only.)
 */
import { z } from "zod";
import {
  type Architecture,
  type DecoderConfig,
  type Parameters,
  parameterSpecs,
  type RopeScaling,
} from "./config.ts";
import {
  firstNonFinite,
  parseShardIndex,
  readSafetensors,
  readShardedSafetensors,
  type SafetensorsFile,
  type Tensor,
  writeSafetensors,
} from "./safetensors.ts";
import { parseJsonObject, type TokenizerFiles } from "./tokenizer.ts";
import { ImageError } from "./image.ts";
import { addVisionConfig, visionConfigToJson, visionJsonFields } from "./_hf_vision.ts";

/** Thrown when a directory is incomplete, inconsistent, or uses an unsupported architecture. */
export class HfFormatError extends Error {
  override name = "HfFormatError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** A model as a Hugging Face directory holds it. */
export interface HfModel {
  config: DecoderConfig;
  /** Float32 tensors by HF name, exactly `parameterSpecs(config)`. */
  parameters: Parameters;
  tokenizer: TokenizerFiles;
  /** `generation_config.json` as parsed JSON; null → written from the config's token ids. */
  generationConfig: Record<string, unknown> | null;
  /**
   * The `config.json` this model was loaded from, if any: its fields that `DecoderConfig` does
   * not model (e.g. Qwen2's `max_window_layers`) are written back unchanged on save.
   */
  sourceConfig?: Record<string, unknown> | null;
  /**
   * The model's own name where the service knows one besides its config (the name an uploaded
   * model was given at upload): a LoRA adapter names it as `base_model_name_or_path`.
   */
  name?: string;
}

/** File names inside a directory. */
export const HF_FILES = {
  config: "config.json",
  generationConfig: "generation_config.json",
  weights: "model.safetensors",
  weightsIndex: "model.safetensors.index.json",
  tokenizer: "tokenizer.json",
  tokenizerConfig: "tokenizer_config.json",
} as const;

const MODEL_TYPES: Record<Architecture, string> = {
  LlamaForCausalLM: "llama",
  Qwen2ForCausalLM: "qwen2",
  Qwen3ForCausalLM: "qwen3",
};
const TORCH_DTYPES = { F32: "float32", BF16: "bfloat16" } as const;

const tokenId = z.number().int().nonnegative();
/** `rope_scaling` (and transformers ≥ 5's `rope_parameters`) fields we read. */
const ropeScalingFields = {
  type: z.string().optional(),
  rope_type: z.string().optional(),
  factor: z.number().optional(),
  low_freq_factor: z.number().optional(),
  high_freq_factor: z.number().optional(),
  original_max_position_embeddings: z.number().int().optional(),
};
const positive = z.number().int().positive();
/**
 * A positive size with an upper bound far above any published decoder (Llama 3.1 405B: 126 layers,
 * 16,384 hidden, 53,248 intermediate, 128 heads, 128k positions): a config past it is refused
 * before any loop over its layers or allocation sized by it (a 10⁹-layer config once ran the
 * upload check out of memory).
 */
const size = (most: number) => positive.max(most);
const hfConfigSchema = z.looseObject({
  ...visionJsonFields,
  architectures: z.array(z.string()).min(1).optional(),
  model_type: z.string().optional(),
  vocab_size: size(1 << 22),
  hidden_size: size(1 << 16),
  intermediate_size: size(1 << 18),
  num_hidden_layers: size(1024),
  num_attention_heads: size(1024),
  num_key_value_heads: size(1024).nullish(),
  head_dim: size(4096).nullish(),
  rms_norm_eps: z.number().positive().optional(),
  rope_theta: z.number().positive().optional(),
  rope_parameters: z.looseObject({
    ...ropeScalingFields,
    rope_theta: z.number().positive().optional(),
  })
    .nullish(),
  rope_scaling: z.looseObject(ropeScalingFields).nullish(),
  max_position_embeddings: size(1 << 24).optional(),
  tie_word_embeddings: z.boolean().optional(),
  attention_bias: z.boolean().optional(),
  mlp_bias: z.boolean().optional(),
  hidden_act: z.string().optional(),
  use_sliding_window: z.boolean().optional(),
  bos_token_id: z.union([tokenId, z.array(tokenId)]).nullish(),
  eos_token_id: z.union([tokenId, z.array(tokenId)]).nullish(),
  pad_token_id: tokenId.nullish(),
});

const isArchitecture = (name: string | undefined): name is Architecture =>
  name !== undefined && Object.hasOwn(MODEL_TYPES, name);

const unsupported = (what: string, value: unknown) =>
  new HfFormatError(
    `Cannot load config.json as ${what}: current value is ${JSON.stringify(value)}`,
  );

/**
 * Parses a Hugging Face `config.json` (extra fields allowed) into a `DecoderConfig`, filling HF
 * defaults (head_dim = hidden_size / num_attention_heads, or 128 for Qwen3 as its
 * `Qwen3Config` does; num_key_value_heads = heads, eps 1e-6, rope_theta 10000, untied
 * embeddings). A list `eos_token_id` keeps its first id. `rope_scaling` (or `rope_parameters`)
 * of type `llama3` needs all four of its fields.
 * @throws {HfFormatError} on missing/invalid fields or unsupported features (architectures other
 *   than Llama/Qwen2/Qwen3, activation ≠ silu, RoPE scaling other than llama3, MLP bias,
 *   Llama/Qwen3 attention bias, sliding window, a Qwen2 head_dim ≠ hidden_size / heads).
 */
export function configFromJson(json: unknown): DecoderConfig {
  const parsed = hfConfigSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new HfFormatError(
      `Cannot load config.json as ${issue.path.join(".") || "it"} must be valid: ${issue.message}`,
    );
  }
  const c = parsed.data;
  const architecture = c.architectures?.[0] ??
    Object.entries(MODEL_TYPES).find(([, type]) => type === c.model_type)?.[0];
  if (!isArchitecture(architecture)) {
    throw c.architectures === undefined && c.model_type !== undefined
      ? unsupported("model_type must be llama, qwen2 or qwen3", c.model_type)
      : unsupported(
        "architectures must be [LlamaForCausalLM], [Qwen2ForCausalLM] or [Qwen3ForCausalLM]",
        c.architectures ?? null,
      );
  }
  if (c.hidden_act !== undefined && c.hidden_act !== "silu") {
    throw unsupported("hidden_act must be silu", c.hidden_act);
  }
  const ropeScaling = ropeScalingFromJson(c);
  if (c.mlp_bias) throw unsupported("mlp_bias must be false", c.mlp_bias);
  if (c.use_sliding_window) {
    throw unsupported("use_sliding_window must be false", c.use_sliding_window);
  }
  const qwen = architecture === "Qwen2ForCausalLM";
  if (!qwen && c.attention_bias) {
    throw unsupported(
      `attention_bias must be false for ${architecture} (o_proj bias is not supported)`,
      true,
    );
  }
  const heads = c.num_attention_heads;
  const kvHeads = c.num_key_value_heads ?? heads;
  if (heads % kvHeads !== 0) {
    throw unsupported(`num_key_value_heads must divide num_attention_heads (${heads})`, kvHeads);
  }
  // Qwen2's head_dim is hidden_size / heads (workers/model/README.md, Architectures; `configToJson`
  // refuses to save another): a head_dim that disagrees is refused here, naming it, not later as a
  // weight shape or at save time.
  if (qwen && c.head_dim != null && c.head_dim * heads !== c.hidden_size) {
    throw unsupported(
      `head_dim must be hidden_size / num_attention_heads (${c.hidden_size} / ${heads}) for Qwen2ForCausalLM`,
      c.head_dim,
    );
  }
  const headDim = c.head_dim ??
    (architecture === "Qwen3ForCausalLM" ? 128 : c.hidden_size / heads);
  if (!Number.isInteger(headDim)) {
    throw unsupported(
      `hidden_size must be a multiple of num_attention_heads (${heads}) when head_dim is absent`,
      c.hidden_size,
    );
  }
  const first = (
    id: number | number[] | null | undefined,
  ) => (Array.isArray(id) ? id[0] ?? null : id ?? null);
  const config: DecoderConfig = {
    architecture,
    vocab_size: c.vocab_size,
    hidden_size: c.hidden_size,
    intermediate_size: c.intermediate_size,
    num_hidden_layers: c.num_hidden_layers,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: headDim,
    rms_norm_eps: c.rms_norm_eps ?? 1e-6,
    rope_theta: c.rope_theta ?? c.rope_parameters?.rope_theta ?? 10000,
    max_position_embeddings: c.max_position_embeddings ??
      (architecture === "LlamaForCausalLM" ? 2048 : 32768),
    tie_word_embeddings: c.tie_word_embeddings ?? false,
    attention_bias: qwen,
    bos_token_id: first(c.bos_token_id),
    eos_token_id: first(c.eos_token_id),
    pad_token_id: c.pad_token_id ?? null,
  };
  if (ropeScaling) config.rope_scaling = ropeScaling;
  try {
    addVisionConfig(config, c);
  } catch (cause) {
    if (!(cause instanceof ImageError)) throw cause;
    const why = cause.message.replace(/^Cannot use the vision config/, "Cannot load config.json");
    throw new HfFormatError(why, { cause });
  }
  return config;
}

/**
 * The RoPE scaling of a parsed config.json: null for plain RoPE, Llama 3's parameters for
 * `rope_type: "llama3"` (from `rope_scaling`, or `rope_parameters` as transformers ≥ 5 writes).
 * @throws {HfFormatError} naming the field for any other type or a missing llama3 field.
 */
function ropeScalingFromJson(
  c: z.infer<typeof hfConfigSchema>,
): RopeScaling | null {
  const [field, r] = c.rope_scaling
    ? ["rope_scaling", c.rope_scaling] as const
    : ["rope_parameters", c.rope_parameters] as const;
  const type = r?.rope_type ?? r?.type ?? "default";
  if (type === "default") return null;
  if (type !== "llama3") {
    throw unsupported(`${field}.rope_type must be absent, default or llama3`, type);
  }
  const { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } = r!;
  const fields = { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings };
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) throw unsupported(`${field}.${k} must be set for rope_type llama3`, null);
  }
  if (!(factor! >= 1 && low_freq_factor! > 0 && high_freq_factor! > low_freq_factor!)) {
    throw unsupported(
      `${field} must have factor ≥ 1 and 0 < low_freq_factor < high_freq_factor`,
      fields,
    );
  }
  if (!(original_max_position_embeddings! > 0)) {
    throw unsupported(
      `${field}.original_max_position_embeddings must be positive`,
      original_max_position_embeddings,
    );
  }
  return {
    rope_type: "llama3",
    factor: factor!,
    low_freq_factor: low_freq_factor!,
    high_freq_factor: high_freq_factor!,
    original_max_position_embeddings: original_max_position_embeddings!,
  };
}

/**
 * The `config.json` object of a config, with Hugging Face's field names and the defaults
 * `transformers` writes (keys sorted as `save_pretrained` does). Fields of `source` (the
 * config.json it was loaded from) that we do not set are kept; `dtype` (transformers ≥ 4.56's
 * name for `torch_dtype`) follows the saved dtype when present.
 * @throws {HfFormatError} when the config cannot be expressed in its architecture (Llama or
 *   Qwen3 with attention bias, Qwen2 without it or with head_dim ≠ hidden_size /
 *   num_attention_heads).
 */
export function configToJson(
  c: DecoderConfig,
  torchDtype: "float32" | "bfloat16" = "float32",
  source: Record<string, unknown> | null = null,
): Record<string, unknown> {
  const qwen = c.architecture === "Qwen2ForCausalLM";
  if (c.attention_bias !== qwen) {
    throw new HfFormatError(
      `Cannot save config.json as attention_bias must be ${qwen} for ${c.architecture}: current value is ${c.attention_bias}`,
    );
  }
  if (qwen && c.head_dim * c.num_attention_heads !== c.hidden_size) {
    throw new HfFormatError(
      `Cannot save config.json as Qwen2 head_dim must be hidden_size / num_attention_heads (${
        c.hidden_size / c.num_attention_heads
      }): current value is ${c.head_dim}`,
    );
  }
  const json: Record<string, unknown> = {
    ...source,
    ...(source && "dtype" in source ? { dtype: torchDtype } : {}),
    architectures: [c.architecture],
    attention_dropout: 0.0,
    bos_token_id: c.bos_token_id,
    eos_token_id: c.eos_token_id,
    hidden_act: "silu",
    hidden_size: c.hidden_size,
    initializer_range: 0.02,
    intermediate_size: c.intermediate_size,
    max_position_embeddings: c.max_position_embeddings,
    model_type: MODEL_TYPES[c.architecture],
    num_attention_heads: c.num_attention_heads,
    num_hidden_layers: c.num_hidden_layers,
    num_key_value_heads: c.num_key_value_heads,
    pad_token_id: c.pad_token_id,
    rms_norm_eps: c.rms_norm_eps,
    rope_scaling: c.rope_scaling ? { ...c.rope_scaling } : null,
    rope_theta: c.rope_theta,
    tie_word_embeddings: c.tie_word_embeddings,
    torch_dtype: torchDtype,
    use_cache: true,
    vocab_size: c.vocab_size,
  };
  Object.assign(json, visionConfigToJson(c));
  if (qwen) {
    json.max_window_layers ??= c.num_hidden_layers;
    json.sliding_window ??= c.max_position_embeddings;
    json.use_sliding_window = false;
  } else if (c.architecture === "Qwen3ForCausalLM") {
    Object.assign(json, { attention_bias: false, head_dim: c.head_dim, use_sliding_window: false });
    json.max_window_layers ??= c.num_hidden_layers;
    if (!("sliding_window" in json)) json.sliding_window = null;
  } else {
    Object.assign(json, {
      attention_bias: false,
      head_dim: c.head_dim,
      mlp_bias: false,
      pretraining_tp: 1,
    });
  }
  return Object.fromEntries(Object.entries(json).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** Options of `saveHfDirectory`. */
export interface HfSaveOptions {
  /** Weight dtype: `F32` (default, exact) or `BF16` (half the bytes; `torch_dtype` follows). */
  dtype?: "F32" | "BF16";
  /** Split weights into shards of at most this many bytes (plus an index); default: one file. */
  maxShardBytes?: number;
}

const jsonBytes = (value: unknown) =>
  new TextEncoder().encode(JSON.stringify(value, null, 2) + "\n");

/**
 * Fields that `transformers` and `peft` hold as Python floats: written with a decimal point even
 * when whole (`8.0`, `1000000.0`), as Python's `json` writes them. Read back as an int, Llama 3's
 * `rope_scaling.factor` and `low_freq_factor`/`high_freq_factor` fail `transformers`'
 * `_validate_llama3_parameters` `isinstance(x, float)` checks (a warning in
 * modeling_rope_utils.py).
 */
const FLOAT_FIELDS = new Set([
  "attention_dropout",
  "factor",
  "high_freq_factor",
  "initializer_range",
  "lora_dropout",
  "low_freq_factor",
  "rms_norm_eps",
  "rope_theta",
  "temperature",
  "top_p",
]);

/**
 * A config file's bytes as Python's `json.dumps(indent=2)` writes them for its floats: whole
 * numbers in {@link FLOAT_FIELDS} keep a `.0`.
 */
export function configJsonBytes(value: unknown): Uint8Array {
  const mark = "\u0000float:";
  const text = JSON.stringify(
    value,
    (key, v) => FLOAT_FIELDS.has(key) && Number.isInteger(v) ? `${mark}${v}` : v,
    2,
  );
  return new TextEncoder().encode(
    text.replace(/"\\u0000float:(-?\d+)"/g, "$1.0") + "\n",
  );
}

/**
 * Serialises a model into the files of a Hugging Face directory (name → bytes).
 * @throws {HfFormatError} when a parameter is missing or has the wrong size, or the config cannot
 *   be saved (see `configToJson`).
 */
export function saveHfDirectory(
  model: HfModel,
  options: HfSaveOptions = {},
): Map<string, Uint8Array> {
  const dtype = options.dtype ?? "F32";
  const c = model.config;
  const files = new Map<string, Uint8Array>();
  files.set(
    HF_FILES.config,
    configJsonBytes(configToJson(c, TORCH_DTYPES[dtype], model.sourceConfig ?? null)),
  );
  files.set(
    HF_FILES.generationConfig,
    configJsonBytes(
      model.generationConfig ?? {
        bos_token_id: c.bos_token_id,
        eos_token_id: c.eos_token_id,
        pad_token_id: c.pad_token_id,
        do_sample: true,
        temperature: 1.0,
        top_p: 1.0,
      },
    ),
  );
  const shards: Map<string, Tensor>[] = [new Map()];
  const width = dtype === "F32" ? 4 : 2;
  let shardBytes = 0;
  for (const spec of parameterSpecs(c)) {
    const data = model.parameters.get(spec.name);
    const n = spec.shape.reduce((a, b) => a * b, 1);
    if (!data || data.length !== n) {
      throw new HfFormatError(
        `Cannot save model.safetensors as parameter ${spec.name} must hold ${n} values: current length is ${
          data?.length ?? "missing"
        }`,
      );
    }
    if (options.maxShardBytes && shardBytes > 0 && shardBytes + n * width > options.maxShardBytes) {
      shards.push(new Map());
      shardBytes = 0;
    }
    shards.at(-1)!.set(spec.name, { shape: spec.shape, data });
    shardBytes += n * width;
  }
  const metadata = { format: "pt" };
  if (shards.length === 1) {
    files.set(HF_FILES.weights, writeSafetensors(shards[0], { dtype, metadata }));
  } else {
    const pad = (i: number) => String(i).padStart(5, "0");
    const weightMap: Record<string, string> = {};
    let total = 0;
    shards.forEach((shard, i) => {
      const name = `model-${pad(i + 1)}-of-${pad(shards.length)}.safetensors`;
      files.set(name, writeSafetensors(shard, { dtype, metadata }));
      for (const [tensor, t] of shard) {
        weightMap[tensor] = name;
        total += t.data.length * width;
      }
    });
    files.set(
      HF_FILES.weightsIndex,
      jsonBytes({ metadata: { total_size: total }, weight_map: weightMap }),
    );
  }
  for (const [name, bytes] of saveTokenizerFiles(model.tokenizer)) files.set(name, bytes);
  return files;
}

/**
 * `tokenizer.json` and (when there is one) `tokenizer_config.json`, as `saveHfDirectory` writes
 * them.
 */
export function saveTokenizerFiles(tokenizer: TokenizerFiles): Map<string, Uint8Array> {
  const files = new Map([[HF_FILES.tokenizer as string, jsonBytes(tokenizer.tokenizerJson)]]);
  if (tokenizer.tokenizerConfig) {
    files.set(HF_FILES.tokenizerConfig, jsonBytes(tokenizer.tokenizerConfig));
  }
  return files;
}

/** Reads one file of a directory; null when it does not exist. */
export type FileReader = (name: string) => Promise<Uint8Array | null>;

/**
 * Loads a Hugging Face directory through `read`: the config, the weights (single file or sharded;
 * F32/F16/BF16 → float32), the tokenizer files and the generation config. Tensors not in
 * `parameterSpecs` (e.g. a tied `lm_head.weight`, rotary buffers) are ignored.
 * @throws {HfFormatError} when config.json, the weights or tokenizer.json are missing, the config
 *   is unsupported, or a parameter is missing or has the wrong shape.
 */
export async function loadHfDirectory(read: FileReader): Promise<HfModel> {
  const configBytes = await read(HF_FILES.config);
  if (configBytes === null) {
    throw new HfFormatError("Cannot load the model as config.json must exist: it is missing");
  }
  const sourceConfig = parseJsonObject(configBytes, HF_FILES.config);
  const config = configFromJson(sourceConfig);
  let weights: SafetensorsFile;
  /** The file that holds a tensor, for messages. */
  let fileOf = (_name: string): string => HF_FILES.weights;
  const single = await read(HF_FILES.weights);
  if (single !== null) {
    weights = readSafetensors(single);
  } else {
    const index = await read(HF_FILES.weightsIndex);
    if (index === null) {
      throw new HfFormatError(
        "Cannot load the model as model.safetensors or model.safetensors.index.json must exist: both are missing",
      );
    }
    const shards = parseShardIndex(index);
    fileOf = (name) => shards.weight_map[name] ?? HF_FILES.weightsIndex;
    weights = await readShardedSafetensors(shards, read);
  }
  const parameters: Parameters = new Map();
  for (const spec of parameterSpecs(config)) {
    const t = weights.tensors.get(spec.name);
    if (!t) {
      throw new HfFormatError(
        `Cannot load the model as the weights must hold ${spec.name}: it is missing`,
      );
    }
    if (t.shape.length !== spec.shape.length || t.shape.some((d, i) => d !== spec.shape[i])) {
      throw new HfFormatError(
        `Cannot load ${spec.name} as its shape must be [${spec.shape}]: current value is [${t.shape}]`,
      );
    }
    const bad = firstNonFinite(t.data);
    if (bad >= 0) {
      throw new HfFormatError(
        `Cannot load ${
          fileOf(spec.name)
        } as its tensor ${spec.name} must hold finite numbers: element ${bad} is ${t.data[bad]}`,
      );
    }
    parameters.set(spec.name, t.data);
  }
  const tokenizerJson = await read(HF_FILES.tokenizer);
  if (tokenizerJson === null) {
    throw new HfFormatError("Cannot load the model as tokenizer.json must exist: it is missing");
  }
  const tokenizerConfig = await read(HF_FILES.tokenizerConfig);
  const generation = await read(HF_FILES.generationConfig);
  const generationConfig = generation === null
    ? null
    : parseJsonObject(generation, HF_FILES.generationConfig);
  checkGenerationTokenIds(generationConfig, config.vocab_size);
  return {
    config,
    parameters,
    tokenizer: {
      tokenizerJson: parseJsonObject(tokenizerJson, HF_FILES.tokenizer),
      tokenizerConfig: tokenizerConfig === null
        ? null
        : parseJsonObject(tokenizerConfig, HF_FILES.tokenizerConfig),
    },
    generationConfig,
    sourceConfig,
  };
}

/**
 * Checks `generation_config.json`'s `eos_token_id`, `bos_token_id` and `pad_token_id` (when set):
 * a token id (a whole number in [0, vocab_size)) or, for `eos_token_id`, a list of them, as
 * transformers reads them. A string or an id outside the vocabulary was ignored silently, so
 * generation never stopped on the EOS the file meant.
 * @throws {HfFormatError} naming the file and field.
 */
function checkGenerationTokenIds(json: Record<string, unknown> | null, vocabSize: number): void {
  if (json === null) return;
  const isId = (v: unknown) =>
    Number.isInteger(v) && (v as number) >= 0 && (v as number) < vocabSize;
  for (const field of ["eos_token_id", "bos_token_id", "pad_token_id"]) {
    const v = json[field];
    if (v === undefined || v === null) continue;
    const ok = field === "eos_token_id" && Array.isArray(v) ? v.every(isId) : isId(v);
    if (!ok) {
      throw new HfFormatError(
        `Cannot load ${HF_FILES.generationConfig} as ${field} must be a token id (a whole number from 0 to ${
          vocabSize - 1
        })${field === "eos_token_id" ? " or a list of them" : ""}: current value is ${
          JSON.stringify(v).slice(0, 200)
        }`,
      );
    }
  }
}

/** Checks that a file name stays inside its directory. @throws {HfFormatError} otherwise. */
function plainName(name: string): string {
  if (
    name.length === 0 || name.includes("/") || name.includes("\\") || name === "." || name === ".."
  ) {
    throw new HfFormatError(
      `Cannot use file name as it must be a plain name inside the directory: current value is ${name}`,
    );
  }
  return name;
}

/** Writes a file map into a local folder (created if needed). */
export async function writeHfFolder(dir: string, files: Map<string, Uint8Array>): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  for (const [name, bytes] of files) await Deno.writeFile(`${dir}/${plainName(name)}`, bytes);
}

/** A `FileReader` over a local folder (missing files read as null). */
export function hfFolderReader(dir: string): FileReader {
  return async (name) => {
    try {
      return await Deno.readFile(`${dir}/${plainName(name)}`);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return null;
      throw error;
    }
  };
}

/**
 * Validation of an uploaded Hugging Face folder before it becomes usable (`POST /v1/models`):
 * the checks `loadHfDirectory` would fail on, done from the small files and the safetensors
 * headers only, so an upload of gigabytes is judged without holding its weights. Every failure
 * names the file and the field.
 */
import { Template } from "@huggingface/jinja";
import { z } from "zod";
import { type DecoderConfig, parameterCount, parameterSpecs } from "./config.ts";
import { configFromJson, HF_FILES, HfFormatError } from "./hf.ts";
import { elementCount, parseShardIndex } from "./safetensors.ts";
import { parseJsonObject, Tokenizer } from "./tokenizer.ts";
import tokenizerProbe from "./tokenizer_probe.json" with { type: "json" };

/** An upload that cannot become a model; `file` and `field` say where (field may be "-"). */
export class ModelFileError extends Error {
  override name = "ModelFileError";
  readonly file: string;
  readonly field: string;
  constructor(file: string, field: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.file = file;
    this.field = field;
  }
}

/** One `.safetensors` file as the upload saw it: its parsed header and data section size. */
export interface SafetensorsHeaderInfo {
  /** The JSON header (tensor name → {dtype, shape, data_offsets}, optional `__metadata__`). */
  header: Record<string, unknown>;
  /** Bytes after the header (the data section). */
  dataBytes: number;
}

/** What the checks read: small files whole, weights by header. */
export interface UploadedModelFiles {
  /** `config.json`, `tokenizer.json` and the other small files (name → bytes). */
  small: ReadonlyMap<string, Uint8Array>;
  /** Every `.safetensors` file uploaded. */
  safetensors: ReadonlyMap<string, SafetensorsHeaderInfo>;
}

/** A folder that passed: its config and size. */
export interface CheckedModel {
  config: DecoderConfig;
  /** `config.json` as uploaded. */
  configJson: Record<string, unknown>;
  parameterCount: number;
  /** Tokens the tokenizer knows (≤ config vocab_size). */
  tokenizerVocabSize: number;
}

const WIDTH: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };
const entrySchema = z.object({
  dtype: z.string(),
  shape: z.array(z.number().int().nonnegative()),
  data_offsets: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]),
});

/** The field a `Cannot load config.json as <field> must …` message names. */
function fieldOf(message: string): string {
  return /\bas (?:its )?([A-Za-z_][\w.[\]]*)/.exec(message)?.[1] ?? "-";
}

/**
 * Checks an uploaded folder: `config.json` of a supported architecture (hf.ts `configFromJson`);
 * the weights as `model.safetensors` or a `model.safetensors.index.json` whose every shard is
 * uploaded and whose every entry is in its shard; every header well-formed (byte lengths matching
 * shape × dtype, the tensors' data tiling the data section with no gap, overlap or trailing
 * bytes); every parameter the config needs present
 * with its exact shape and dtype F32/F16/BF16; `tokenizer.json` that loads with no more tokens
 * than `vocab_size` and that spells every probe text ({@link checkTokenizerSpells}); the optional
 * JSON files parse.
 * @throws {ModelFileError} naming the file and the field of the first problem.
 */
export function checkUploadedModel(files: UploadedModelFiles): CheckedModel {
  const configBytes = files.small.get(HF_FILES.config);
  if (!configBytes) {
    throw new ModelFileError(
      HF_FILES.config,
      "-",
      "Cannot use the upload as config.json must exist: it is missing",
    );
  }
  let configJson: Record<string, unknown>, config: DecoderConfig;
  try {
    configJson = parseJsonObject(configBytes, HF_FILES.config);
    config = configFromJson(configJson);
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    throw new ModelFileError(
      HF_FILES.config,
      e instanceof HfFormatError ? fieldOf(message) : "-",
      message,
      { cause: e },
    );
  }
  const tensors = tensorsOf(files);
  for (const spec of parameterSpecs(config)) {
    const t = tensors.get(spec.name);
    if (!t) {
      throw new ModelFileError(
        files.safetensors.has(HF_FILES.weights) ? HF_FILES.weights : HF_FILES.weightsIndex,
        spec.name,
        `Cannot use the upload as the weights must hold ${spec.name} for ${config.architecture}: it is missing`,
      );
    }
    if (t.shape.length !== spec.shape.length || t.shape.some((d, i) => d !== spec.shape[i])) {
      throw new ModelFileError(
        t.file,
        `${spec.name}.shape`,
        `Cannot use ${t.file} as ${spec.name} must have shape [${spec.shape}] (from config.json): current value is [${t.shape}]`,
      );
    }
    if (!(t.dtype in WIDTH)) {
      throw new ModelFileError(
        t.file,
        `${spec.name}.dtype`,
        `Cannot use ${t.file} as ${spec.name} must be F32, F16 or BF16: current value is ${t.dtype}`,
      );
    }
  }
  const tokenizerVocabSize = checkTokenizer(files.small, config);
  for (const name of [HF_FILES.generationConfig, HF_FILES.tokenizerConfig]) {
    const bytes = files.small.get(name);
    if (!bytes) continue;
    try {
      parseJsonObject(bytes, name);
    } catch (e) {
      throw new ModelFileError(name, "-", e instanceof Error ? e.message : String(e), { cause: e });
    }
  }
  return { config, configJson, parameterCount: parameterCount(config), tokenizerVocabSize };
}

interface TensorInfo {
  file: string;
  dtype: string;
  shape: number[];
}

/** Every tensor of the weights (single file or through the index), headers checked. */
function tensorsOf(files: UploadedModelFiles): Map<string, TensorInfo> {
  const out = new Map<string, TensorInfo>();
  const single = files.safetensors.get(HF_FILES.weights);
  if (single) {
    for (const [name, t] of headerTensors(HF_FILES.weights, single)) out.set(name, t);
    return out;
  }
  const indexBytes = files.small.get(HF_FILES.weightsIndex);
  if (!indexBytes) {
    throw new ModelFileError(
      HF_FILES.weights,
      "-",
      "Cannot use the upload as model.safetensors or model.safetensors.index.json must exist: both are missing",
    );
  }
  let weightMap: Record<string, string>;
  try {
    weightMap = parseShardIndex(indexBytes).weight_map;
  } catch (e) {
    throw new ModelFileError(
      HF_FILES.weightsIndex,
      "weight_map",
      e instanceof Error ? e.message : String(e),
      { cause: e },
    );
  }
  const shards = new Map<string, Map<string, TensorInfo>>();
  for (const [tensor, file] of Object.entries(weightMap)) {
    let shard = shards.get(file);
    if (!shard) {
      const info = files.safetensors.get(file);
      if (!info) {
        throw new ModelFileError(
          HF_FILES.weightsIndex,
          `weight_map.${tensor}`,
          `Cannot use the upload as shard ${file} (named by weight_map.${tensor}) must be uploaded: it is missing`,
        );
      }
      shard = headerTensors(file, info);
      shards.set(file, shard);
    }
    const t = shard.get(tensor);
    if (!t) {
      throw new ModelFileError(
        file,
        tensor,
        `Cannot use ${file} as it must hold ${tensor} (model.safetensors.index.json puts it there): it is missing`,
      );
    }
    out.set(tensor, t);
  }
  for (const file of files.safetensors.keys()) {
    if (!shards.has(file)) {
      throw new ModelFileError(
        file,
        "-",
        `Cannot use the upload as every .safetensors file must be named by model.safetensors.index.json: ${file} is not`,
      );
    }
  }
  return out;
}

/** The tensors of one header; offsets and byte lengths checked against the data section. */
function headerTensors(file: string, info: SafetensorsHeaderInfo): Map<string, TensorInfo> {
  const out = new Map<string, TensorInfo>();
  const ranges: { name: string; begin: number; end: number }[] = [];
  for (const [name, raw] of Object.entries(info.header)) {
    if (name === "__metadata__") continue;
    const parsed = entrySchema.safeParse(raw);
    if (!parsed.success) {
      throw new ModelFileError(
        file,
        name,
        `Cannot use ${file} as header entry ${name} must have dtype, shape and data_offsets: ${
          parsed.error.issues[0].message
        }`,
      );
    }
    const { dtype, shape, data_offsets: [begin, end] } = parsed.data;
    const width = WIDTH[dtype];
    if (width !== undefined && end - begin !== elementCount(shape) * width) {
      throw new ModelFileError(
        file,
        `${name}.data_offsets`,
        `Cannot use ${file} as ${name} must span ${
          elementCount(shape) * width
        } bytes ([${shape}] × ${dtype}): current value is ${end - begin}`,
      );
    }
    if (end < begin || end > info.dataBytes) {
      throw new ModelFileError(
        file,
        `${name}.data_offsets`,
        `Cannot use ${file} as ${name}'s data_offsets must lie within the ${info.dataBytes}-byte data section: current value is [${begin}, ${end}]`,
      );
    }
    ranges.push({ name, begin, end });
    out.set(name, { file, dtype, shape });
  }
  checkContiguous(file, info.dataBytes, ranges);
  return out;
}

/**
 * The tensors' data must tile the data section exactly, as the reference implementation
 * (huggingface/safetensors `Metadata::validate`, `read_metadata`) requires: sorted by offset, the
 * first begins at 0, each begins where the one before ends (no gap, no overlap), and the last
 * ends at the end of the file (no trailing bytes, which no loader would read or check).
 * @throws {ModelFileError} naming the tensor whose `data_offsets` break the tiling.
 */
function checkContiguous(
  file: string,
  dataBytes: number,
  ranges: { name: string; begin: number; end: number }[],
): void {
  ranges.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = 0;
  for (const r of ranges) {
    if (r.begin !== at) {
      const why = r.begin < at
        ? `overlaps the tensor before it, which ends at ${at}`
        : `leaves a ${r.begin - at}-byte gap after ${at}`;
      throw new ModelFileError(
        file,
        `${r.name}.data_offsets`,
        `Cannot use ${file} as its tensors' data_offsets must follow one another without gaps or overlaps: ${r.name} begins at ${r.begin} and ${why}`,
      );
    }
    at = r.end;
  }
  if (at !== dataBytes) {
    const last = ranges.at(-1)?.name;
    throw new ModelFileError(
      file,
      last === undefined ? "data_offsets" : `${last}.data_offsets`,
      `Cannot use ${file} as its tensors must fill its ${dataBytes}-byte data section: ${
        last === undefined ? "it has no tensors" : `the last, ${last}, ends at ${at}`
      } (${dataBytes - at} bytes follow)`,
    );
  }
}

/** Loads tokenizer.json (with tokenizer_config.json); answers its vocabulary size. */
function checkTokenizer(small: ReadonlyMap<string, Uint8Array>, config: DecoderConfig): number {
  const bytes = small.get(HF_FILES.tokenizer);
  if (!bytes) {
    throw new ModelFileError(
      HF_FILES.tokenizer,
      "-",
      "Cannot use the upload as tokenizer.json must exist: it is missing",
    );
  }
  let tokenizer: Tokenizer;
  try {
    const configBytes = small.get(HF_FILES.tokenizerConfig);
    tokenizer = new Tokenizer({
      tokenizerJson: parseJsonObject(bytes, HF_FILES.tokenizer),
      tokenizerConfig: configBytes ? parseJsonObject(configBytes, HF_FILES.tokenizerConfig) : null,
    });
  } catch (e) {
    throw new ModelFileError(
      HF_FILES.tokenizer,
      "model",
      e instanceof Error ? e.message : String(e),
      { cause: e },
    );
  }
  if (tokenizer.chatTemplate !== null) {
    // Parsed, not rendered: a template's loops could run for hours, so rendering is left to the
    // job (a syntax error is caught here, before any job is queued on the model).
    try {
      new Template(tokenizer.chatTemplate);
    } catch (e) {
      throw new ModelFileError(
        HF_FILES.tokenizerConfig,
        "chat_template",
        `Cannot use the upload as tokenizer_config.json's chat_template must be a valid Jinja template: ${
          e instanceof Error ? e.message : String(e)
        }`,
        { cause: e },
      );
    }
  }
  if (tokenizer.vocabSize > config.vocab_size) {
    throw new ModelFileError(
      HF_FILES.tokenizer,
      "model.vocab",
      `Cannot use the upload as tokenizer.json must have at most vocab_size (${config.vocab_size}, config.json) tokens: current value is ${tokenizer.vocabSize}`,
    );
  }
  checkTokenizerSpells(tokenizer);
  return tokenizer.vocabSize;
}

/** One text a tokenizer must spell, and where jobs show it (tokenizer_probe.json). */
export interface TokenizerProbeText {
  source: string;
  text: string;
}

/**
 * The texts every job shows a model (`deno task gen:tokenizer-probe` writes them): each built-in
 * environment's first prompt and an analyzer prompt, the analysis schema's JSON object, the
 * teacher's skill block.
 */
export const TOKENIZER_PROBE_TEXTS: readonly TokenizerProbeText[] = tokenizerProbe.texts;

/** A text without whitespace, NFKC-normalised: what a tokenizer must give back unchanged. */
const spelled = (text: string) => text.normalize("NFKC").replace(/\s+/gu, "");

/**
 * Checks that `tokenizer` spells each of `texts` (default {@link TOKENIZER_PROBE_TEXTS}): the
 * text encoded (no special tokens) and decoded again keeps every character other than
 * whitespace (compared NFKC-normalised, so a tokenizer that normalises Unicode, merges spaces or
 * cleans up spaces before punctuation passes). A tokenizer whose vocabulary lacks a character the
 * environments write (a toy vocabulary, a byte-level one with bytes missing) fails here rather
 * than in a job, where the prompt encodes to nothing or the analysis schema cannot be spelled.
 * @throws {ModelFileError} at `tokenizer.json` / `model.vocab`, naming the first text it cannot
 *   spell, the first character lost and what the text decodes to.
 */
export function checkTokenizerSpells(
  tokenizer: Tokenizer,
  texts: readonly TokenizerProbeText[] = TOKENIZER_PROBE_TEXTS,
): void {
  for (const { source, text } of texts) {
    const back = tokenizer.decode(tokenizer.encode(text, { addSpecialTokens: false }));
    const want = spelled(text), got = spelled(back);
    if (want === got) continue;
    let at = 0;
    while (at < want.length && want[at] === got[at]) at++;
    const lost = String.fromCodePoint(want.codePointAt(at) ?? 0x20);
    const cut = (s: string) => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}…` : s);
    throw new ModelFileError(
      HF_FILES.tokenizer,
      "model.vocab",
      `Cannot use the upload as tokenizer.json must spell every text jobs show the model: it cannot spell ${source} ${
        cut(text)
      }, which loses ${JSON.stringify(lost)} (non-space character ${at + 1}) and decodes as ${
        cut(back)
      }`,
    );
  }
}

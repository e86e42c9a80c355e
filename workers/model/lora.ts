/**
 * LoRA adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") on the
 * decoder's linear projections, laid out and saved as Hugging Face PEFT does.
 *
 * A targeted projection y = x·Wᵀ (+ b) becomes
 *   y = x·Wᵀ (+ b) + (α / r) · dropout(x)·Aᵀ·Bᵀ
 * with A (r, in) and B (out, r). As PEFT's `LoraLayer.reset_lora_parameters`: A ~ Kaiming-uniform
 * with a = √5 (bound 1/√in), B = 0, so a fresh adapter leaves the model unchanged. Only A and B
 * are trained; the base weights are graph inputs without gradients, shared with π_ref (the same
 * parameters read by graphs without adapters: no second copy).
 *
 * Names: inside the service the adapter tensors sit beside the base weights in one `Parameters`
 * map as `model.layers.{i}.self_attn.q_proj.lora_A.weight` (and `lora_B`); PEFT's
 * `adapter_model.safetensors` prefixes them with `base_model.model.` (PEFT's save strips the
 * adapter name). `adapter_config.json` holds `peft_type: "LORA"`, `task_type: "CAUSAL_LM"`,
 * `r`, `lora_alpha`, `lora_dropout`, `target_modules`, `bias: "none"` and
 * `base_model_name_or_path`, so `PeftModel.from_pretrained(base, dir)` loads it.
 *
 * Dropout (training graphs only) draws its keep mask in the graph from a hash of the element
 * index and a per-call seed input ({@link LORA_DROPOUT_SEED}), so a run (and a resumed run) is
 * reproducible from its seeds.
 */
import { type Graph, intAttr, nn, type Value } from "../engine/mod.ts";
import { type DecoderConfig, type Parameters, type ParameterSpec } from "./config.ts";
import { firstNonFinite, readSafetensors, type Tensor, writeSafetensors } from "./safetensors.ts";
import { configJsonBytes } from "./hf.ts";
import { Rng } from "./sampling.ts";

/**
 * The projections an adapter can target (PEFT's module names in Llama/Qwen decoders), each with
 * the block of a decoder layer it sits in. The JobSpec's `model.lora.target_modules` enum
 * (`LORA_TARGET_MODULES`, jobs/spec.ts) must list the same names: tests/workers/model/lora_test.ts
 * ties the two.
 */
const MODULE_GROUPS = {
  q_proj: "self_attn",
  k_proj: "self_attn",
  v_proj: "self_attn",
  o_proj: "self_attn",
  gate_proj: "mlp",
  up_proj: "mlp",
  down_proj: "mlp",
} as const;
/** A projection an adapter can target. */
export type LoraModule = keyof typeof MODULE_GROUPS;
/** Every projection an adapter can target, in a decoder layer's order. */
export const LORA_MODULES: readonly LoraModule[] = Object.keys(MODULE_GROUPS) as LoraModule[];

/** An adapter's hyper-parameters (JobSpec `model.lora`). */
export interface LoraConfig {
  /** r: rank of A (r, in) and B (out, r). */
  rank: number;
  /** α: the adapter's output is scaled by α / r. */
  alpha: number;
  /** Dropout probability on the adapter's input in training graphs, in [0, 1). */
  dropout: number;
  target_modules: readonly LoraModule[];
}

/** Name of the train graph's int64 scalar input that seeds LoRA dropout (when dropout > 0). */
export const LORA_DROPOUT_SEED = "lora_dropout_seed";

/** PEFT's prefix of adapter tensor names in `adapter_model.safetensors`. */
export const PEFT_PREFIX = "base_model.model.";

/** File names of a PEFT adapter folder. */
export const ADAPTER_FILES = {
  config: "adapter_config.json",
  weights: "adapter_model.safetensors",
} as const;

/**
 * The folder of a LoRA checkpoint that holds the merged full weights (`model.lora.save_merged`) as
 * a Hugging Face folder of their own, so `from_pretrained("…/merged")` finds no
 * `adapter_config.json` beside `config.json` (transformers would follow the adapter to its base).
 */
export const MERGED_FOLDER = "merged/";

/**
 * How a checkpoint's full model is read, given its file names and a reader of them: from
 * {@link MERGED_FOLDER} when it has one (a LoRA checkpoint with merged weights), else from its top
 * level (a full fine-tune, or a checkpoint written before merged weights had their own folder).
 * Null for an adapter-only checkpoint (no `config.json` at either place).
 */
export function checkpointModelReader(
  names: ReadonlySet<string>,
  read: (name: string) => Promise<Uint8Array>,
): ((name: string) => Promise<Uint8Array | null>) | null {
  const at = names.has(`${MERGED_FOLDER}config.json`)
    ? MERGED_FOLDER
    : names.has("config.json")
    ? ""
    : null;
  if (at === null) return null;
  return (name) => names.has(at + name) ? read(at + name) : Promise.resolve(null);
}

/** An adapter cannot be built, read or applied. */
export class LoraError extends Error {
  override name = "LoraError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** The (α / r) factor of the adapter's output. */
export function loraScale(lora: LoraConfig): number {
  return lora.alpha / lora.rank;
}

/** Where a module sits in a layer: `self_attn` or `mlp`. */
function moduleGroup(m: LoraModule): "self_attn" | "mlp" {
  return MODULE_GROUPS[m];
}

/** (out, in) of a targeted projection's weight, as in `decoderParameterSpecs`. */
function moduleShape(c: DecoderConfig, m: LoraModule): [number, number] {
  const d = c.hidden_size, q = c.num_attention_heads * c.head_dim;
  const kv = c.num_key_value_heads * c.head_dim, f = c.intermediate_size;
  const shapes: Record<LoraModule, [number, number]> = {
    q_proj: [q, d],
    k_proj: [kv, d],
    v_proj: [kv, d],
    o_proj: [d, q],
    gate_proj: [f, d],
    up_proj: [f, d],
    down_proj: [d, f],
  };
  return shapes[m];
}

/** Checks rank, alpha, dropout and modules; throws LoraError naming the field. */
export function validateLora(lora: LoraConfig): void {
  const fail = (why: string) => {
    throw new LoraError(`Cannot use the LoRA adapter as ${why}`);
  };
  if (!(Number.isInteger(lora.rank) && lora.rank > 0)) {
    fail(`rank must be a positive integer: current value is ${lora.rank}`);
  }
  if (!(Number.isFinite(lora.alpha) && lora.alpha >= 0)) {
    fail(`alpha must be finite and ≥ 0: current value is ${lora.alpha}`);
  }
  if (!(lora.dropout >= 0 && lora.dropout < 1)) {
    fail(`dropout must be in [0, 1): current value is ${lora.dropout}`);
  }
  const bad = lora.target_modules.find((m) => !(LORA_MODULES as readonly string[]).includes(m));
  if (bad !== undefined || lora.target_modules.length === 0) {
    fail(
      `target_modules must be a non-empty list of ${LORA_MODULES.join(", ")}: current value is ${
        JSON.stringify(lora.target_modules)
      }`,
    );
  }
}

/**
 * The adapter's parameters in layer order, then `target_modules` order: per targeted projection
 * `<base name>.lora_A.weight` (r, in) and `<base name>.lora_B.weight` (out, r), where the base
 * name is e.g. `model.layers.0.self_attn.q_proj`.
 */
export function loraParameterSpecs(c: DecoderConfig, lora: LoraConfig): ParameterSpec[] {
  validateLora(lora);
  const specs: ParameterSpec[] = [];
  for (let i = 0; i < c.num_hidden_layers; i++) {
    for (const m of lora.target_modules) {
      const [out, inF] = moduleShape(c, m);
      const base = `model.layers.${i}.${moduleGroup(m)}.${m}`;
      specs.push({ name: `${base}.lora_A.weight`, shape: [lora.rank, inF] });
      specs.push({ name: `${base}.lora_B.weight`, shape: [out, lora.rank] });
    }
  }
  return specs;
}

/**
 * A fresh adapter as PEFT initialises one: A ~ U(−1/√in, 1/√in) (`kaiming_uniform_(a=√5)`),
 * B = 0. Draws come from one `Rng(seed)` in `loraParameterSpecs` order.
 */
export function initLoraParameters(c: DecoderConfig, lora: LoraConfig, seed: number): Parameters {
  const rng = new Rng(seed);
  const out: Parameters = new Map();
  for (const s of loraParameterSpecs(c, lora)) {
    const data = new Float32Array(s.shape[0] * s.shape[1]);
    if (s.name.endsWith(".lora_A.weight")) {
      const bound = 1 / Math.sqrt(s.shape[1]);
      for (let i = 0; i < data.length; i++) data[i] = (2 * rng.next() - 1) * bound;
    }
    out.set(s.name, data);
  }
  return out;
}

/**
 * `W + (α / r)·B·A` for every targeted projection of `params` (base and adapter tensors in one
 * map): a new map of the base parameters only (untargeted tensors are shared, not copied).
 * Accumulates in float64 per element.
 * @throws LoraError when an adapter tensor is missing.
 */
export function mergeLora(
  c: DecoderConfig,
  params: Parameters,
  lora: LoraConfig,
  baseSpecs: ParameterSpec[],
): Parameters {
  const adapter = new Set(loraParameterSpecs(c, lora).map((s) => s.name));
  const scale = loraScale(lora), r = lora.rank;
  const out: Parameters = new Map();
  for (const s of baseSpecs) {
    const w = params.get(s.name)!;
    const stem = s.name.replace(/\.weight$/, "");
    if (!adapter.has(`${stem}.lora_A.weight`)) {
      out.set(s.name, w);
      continue;
    }
    const a = mustGet(params, `${stem}.lora_A.weight`),
      b = mustGet(params, `${stem}.lora_B.weight`);
    const [rows, cols] = s.shape;
    const merged = new Float32Array(w.length);
    for (let o = 0; o < rows; o++) {
      for (let i = 0; i < cols; i++) {
        let acc = 0;
        for (let k = 0; k < r; k++) acc += b[o * r + k] * a[k * cols + i];
        merged[o * cols + i] = w[o * cols + i] + scale * acc;
      }
    }
    out.set(s.name, merged);
  }
  return out;
}

function mustGet(p: Parameters, name: string): Float32Array {
  const t = p.get(name);
  if (!t) throw new LoraError(`Cannot merge the LoRA adapter as it must hold ${name}: it does not`);
  return t;
}

/**
 * The adapter's graph inputs (gradients when `requiresGrad`) by name, for the graphs in llama.ts.
 */
export function loraParameterInputs(
  g: Graph,
  c: DecoderConfig,
  lora: LoraConfig,
  requiresGrad: boolean,
): Map<string, Value> {
  return new Map(
    loraParameterSpecs(c, lora).map((s) => [s.name, g.input(s.name, s.shape, { requiresGrad })]),
  );
}

/** What a graph needs to apply an adapter (see {@link loraLinear}). */
export interface LoraGraph {
  lora: LoraConfig;
  /** Adapter parameter inputs by name. */
  params: Map<string, Value>;
  /** Dropout seed input (int64 scalar) of a training graph with dropout > 0; else undefined. */
  dropoutSeed?: Value;
}

/**
 * A projection `stem` (e.g. `model.layers.0.self_attn.q_proj`) of `x` (…, in) with weight W
 * (out, in) and optional bias: x·Wᵀ + b, plus (α/r)·dropout(x)·Aᵀ·Bᵀ when the adapter targets it.
 * `salt` tells the projections apart in the dropout hash. Returns (…, out).
 */
export function loraLinear(
  g: Graph,
  x: Value,
  w: Value,
  bias: Value | undefined,
  opts: { stem: string; adapter?: LoraGraph; salt: number },
): Value {
  const y = nn.linear(g, x, w, bias); // (…, out)
  const a = opts.adapter?.params.get(`${opts.stem}.lora_A.weight`);
  if (!a) return y;
  const ad = opts.adapter!;
  const b = ad.params.get(`${opts.stem}.lora_B.weight`)!;
  const xin = ad.dropoutSeed && ad.lora.dropout > 0
    ? g.mul(x, dropoutMask(g, x, ad.lora.dropout, ad.dropoutSeed, opts.salt)) // (…, in)
    : x;
  // (α/r) scales the rank-r activation, the smallest tensor of the path.
  const down = g.mul(nn.linear(g, xin, a), g.scalar(loraScale(ad.lora))); // (…, r)
  return g.add(y, nn.linear(g, down, b)); // (…, out)
}

/** Park–Miller modulus 2³¹ − 1: every product below stays under 2⁶². */
const HASH_MOD = 2147483647;

/**
 * Inverted-dropout scale of `x`'s static shape: keep/(1 − p) with keep = u ≥ p, u ∈ [0, 1) a hash
 * of (element index, seed, salt): x₁ = (i·48271 + s) mod M, x₂ = (x₁² + 12345) mod M,
 * x₃ = (x₂² + 54321) mod M, u = x₃ / M (M = 2³¹ − 1), with s = (seed + salt·1000003) mod M.
 * Computed without a tape (a constant to autodiff), so forward and backward share one mask.
 */
function dropoutMask(g: Graph, x: Value, p: number, seed: Value, salt: number): Value {
  return g.withoutTape(() => {
    const n = x.shape.reduce<number>((acc, d) => acc * Number(d), 1);
    const i64 = (v: number) => g.constant(BigInt64Array.of(BigInt(v)), [], "int64");
    const op = (type: string, a: Value, b: Value) =>
      g.emit(type, [a, b], [{
        shape: a.shape.length >= b.shape.length ? a.shape : b.shape,
        dtype: "int64",
      }])[0];
    const mod = (v: Value) =>
      g.emit("Mod", [v, i64(HASH_MOD)], [{ shape: v.shape, dtype: "int64" }], [
        intAttr("fmod", 0),
      ])[0];
    const idx = g.emit("Range", [i64(0), i64(n), i64(1)], [{ shape: [n], dtype: "int64" }])[0]; // (N,)
    const s = mod(op("Add", seed, i64((salt * 1000003) % HASH_MOD)));
    const x1 = mod(op("Add", op("Mul", idx, i64(48271)), s));
    const x2 = mod(op("Add", op("Mul", x1, x1), i64(12345)));
    const x3 = mod(op("Add", op("Mul", x2, x2), i64(54321)));
    const u = g.div(g.cast(x3, g.floatType), g.scalar(HASH_MOD)); // (N,) in [0, 1)
    const keep = g.cast(g.compare("GreaterOrEqual", u, g.scalar(p)), g.floatType);
    return g.reshape(g.mul(keep, g.scalar(1 / (1 - p))), x.shape); // (…, in)
  });
}

/**
 * Key of `adapter_model.safetensors`' `__metadata__` holding the service's reference of the base
 * (`builtin:tiny`, `model:<id>`, `job:<id>@<step>`), which jobs and the inference server resolve;
 * `adapter_config.json`'s `base_model_name_or_path` holds the base's own name (what PEFT and
 * `transformers` resolve), so the folder loads as it is.
 */
export const ADAPTER_BASE_METADATA = "seed_base_model";

/** `adapter_config.json` as PEFT writes it for a LoRA adapter on a causal LM. */
export function adapterConfigJson(lora: LoraConfig, baseModel: string): Record<string, unknown> {
  return {
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    base_model_name_or_path: baseModel,
    r: lora.rank,
    lora_alpha: lora.alpha,
    lora_dropout: lora.dropout,
    target_modules: [...lora.target_modules],
    bias: "none",
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    modules_to_save: null,
    layers_to_transform: null,
    layers_pattern: null,
    rank_pattern: {},
    alpha_pattern: {},
    use_rslora: false,
    use_dora: false,
    revision: null,
  };
}

/**
 * A PEFT adapter folder's files: `adapter_config.json` and `adapter_model.safetensors` (F32,
 * PEFT's names) from the adapter tensors of `params`. `baseModel` is the service's reference of
 * the base (kept in the weights' metadata, {@link ADAPTER_BASE_METADATA}); `baseName` the name
 * PEFT is given as `base_model_name_or_path` (default `baseModel`).
 * @throws LoraError when an adapter tensor is missing.
 */
export function saveAdapter(
  c: DecoderConfig,
  lora: LoraConfig,
  params: Parameters,
  baseModel: string,
  baseName: string = baseModel,
): Map<string, Uint8Array> {
  const tensors = new Map<string, Tensor>();
  for (const s of loraParameterSpecs(c, lora)) {
    tensors.set(`${PEFT_PREFIX}${s.name}`, { shape: s.shape, data: mustGet(params, s.name) });
  }
  const config = configJsonBytes(adapterConfigJson(lora, baseName));
  const metadata = { format: "pt", [ADAPTER_BASE_METADATA]: baseModel };
  return new Map([
    [ADAPTER_FILES.config, config],
    [ADAPTER_FILES.weights, writeSafetensors(tensors, { metadata })],
  ]);
}

/** An adapter read from a PEFT folder. */
export interface LoadedAdapter {
  lora: LoraConfig;
  /**
   * The service's reference of the base: the weights' {@link ADAPTER_BASE_METADATA}, else (an
   * adapter written before it, or by PEFT) `base_model_name_or_path` of its config.
   */
  baseModel: string;
  /** Adapter tensors by the service's names (without PEFT's prefix). */
  parameters: Parameters;
}

/** Fields `adapter_config.json` must hold (PEFT's `LoraConfig`, as {@link saveAdapter} writes). */
export const ADAPTER_CONFIG_REQUIRED = ["peft_type", "r", "lora_alpha", "target_modules"] as const;

/**
 * The LoRA config of a parsed `adapter_config.json` object. PEFT reads `r` as an int and
 * `lora_alpha`/`lora_dropout` as numbers, so a string or `null` there is refused rather than
 * coerced (`Number(null)` is 0: the adapter would merge with scale 0, silently).
 * @throws LoraError naming the file and the missing or wrong field(s).
 */
export function adapterConfigFromJson(json: Record<string, unknown>): LoraConfig {
  const fail = (why: string): never => {
    throw new LoraError(`Cannot read ${ADAPTER_FILES.config} as ${why}`);
  };
  const missing = ADAPTER_CONFIG_REQUIRED.filter((k) => json[k] === undefined);
  if (missing.length > 0) {
    fail(
      `it must hold ${ADAPTER_CONFIG_REQUIRED.join(", ")}: it lacks ${missing.join(", ")}`,
    );
  }
  if (json.peft_type !== "LORA") {
    fail(`peft_type must be "LORA": current value is ${JSON.stringify(json.peft_type)}`);
  }
  for (const k of ["r", "lora_alpha", "lora_dropout"]) {
    const v = json[k];
    if (k === "lora_dropout" && v === undefined) continue;
    if (typeof v !== "number") {
      fail(`${k} must be a number (as PEFT reads it): current value is ${JSON.stringify(v)}`);
    }
  }
  const modules = json.target_modules;
  if (!Array.isArray(modules)) fail("target_modules must be a list of module names");
  const declared = json.base_model_name_or_path;
  if (declared !== undefined && declared !== null && typeof declared !== "string") {
    fail(
      `base_model_name_or_path must be a string: current value is ${
        JSON.stringify(declared).slice(0, 200)
      }`,
    );
  }
  const lora: LoraConfig = {
    rank: json.r as number,
    alpha: json.lora_alpha as number,
    dropout: (json.lora_dropout as number | undefined) ?? 0,
    target_modules: modules as LoraModule[],
  };
  try {
    validateLora(lora);
  } catch (e) {
    fail((e as Error).message.replace(/^Cannot use the LoRA adapter as /, ""));
  }
  return lora;
}

/**
 * Reads `adapter_config.json` and `adapter_model.safetensors` bytes (as {@link saveAdapter}
 * writes them, or PEFT does for a LoRA adapter without rank/alpha patterns) and checks every
 * tensor against `c`.
 * @throws LoraError naming the file and field that is wrong.
 */
export function readAdapter(
  c: DecoderConfig,
  configBytes: Uint8Array,
  weightBytes: Uint8Array,
): LoadedAdapter {
  const json = JSON.parse(new TextDecoder().decode(configBytes)) as Record<string, unknown>;
  const lora = adapterConfigFromJson(json);
  const file = readSafetensors(weightBytes);
  const parameters: Parameters = new Map();
  for (const s of loraParameterSpecs(c, lora)) {
    const t = file.tensors.get(`${PEFT_PREFIX}${s.name}`);
    if (!t || t.shape.join() !== s.shape.join()) {
      throw new LoraError(
        `Cannot read ${ADAPTER_FILES.weights} as it must hold ${PEFT_PREFIX}${s.name} of shape [${s.shape}]: current is ${
          t ? `[${t.shape}]` : "missing"
        }`,
      );
    }
    const bad = firstNonFinite(t.data);
    if (bad >= 0) {
      throw new LoraError(
        `Cannot read ${ADAPTER_FILES.weights} as its tensor ${PEFT_PREFIX}${s.name} must hold finite numbers: element ${bad} is ${
          t.data[bad]
        }`,
      );
    }
    parameters.set(s.name, t.data);
  }
  return {
    lora,
    baseModel: file.metadata[ADAPTER_BASE_METADATA] ??
      String(json.base_model_name_or_path ?? ""),
    parameters,
  };
}

/**
 * The service's reference of an adapter's base from its files' bytes (see
 * {@link LoadedAdapter.baseModel}); "" when neither file names one.
 */
export function adapterBaseReference(configBytes: Uint8Array, weightBytes: Uint8Array): string {
  const meta = readSafetensors(weightBytes).metadata[ADAPTER_BASE_METADATA];
  if (meta) return meta;
  const json = JSON.parse(new TextDecoder().decode(configBytes)) as Record<string, unknown>;
  return String(json.base_model_name_or_path ?? "");
}

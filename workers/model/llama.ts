/**
 * Llama-style decoder as ONNX graphs, matching Hugging Face `LlamaForCausalLM`,
 * `Qwen2ForCausalLM` and `Qwen3ForCausalLM`: RMSNorm, rotary position embeddings (RoPE, Su et
 * al. 2021, with HF's rotate_half convention and optional Llama 3 frequency scaling, rope.ts),
 * grouped-query attention (Ainslie et al. 2023), SwiGLU MLP (Shazeer 2020), optional QKV bias
 * (Qwen2), per-head query/key RMSNorm before RoPE (Qwen3) and tied embeddings.
 *
 * Parameters are graph inputs named as `parameterSpecs()` (HF names and layouts), so one
 * session serves every training step. Shape letters: B batch, T tokens in the graph, P cached
 * past tokens, K = P + T keys, R scored tokens, C hidden size, H query heads, Hkv key/value heads,
 * G = H / Hkv, D head dim, F intermediate size, V vocabulary.
 *
 * Graphs:
 * - `train`: (B, T) ids, mask and positions, R scored positions with their targets and
 *   per-token RL inputs → loss terms, per-token log-probs and entropy, and the gradient of
 *   every parameter (`grad.<name>`). With a bucket of I > 0 images (vision models), also
 *   `pixel_values` (I, P, K) and `merge_index` (B, T): the vision encoder (vision.ts) runs in
 *   the graph and its outputs replace the embeddings at image positions, so the vision
 *   parameters get gradients too. With I = 0 the graph reads only the decoder's parameters.
 * - `score`: per-token log-probs and entropy of the R scored targets, no gradient.
 * - `decode`: symbolic (B, T, P); reads the KV cache (`past.<l>.key`) and returns only the
 *   new tokens' keys and values (`new.<l>.key`), which the caller writes into its cache; for
 *   prefill (P = 0) and single-token steps.
 */
import {
  type DType,
  gradients,
  type Graph,
  Graph as G,
  intAttr,
  nn,
  type Value,
} from "../engine/mod.ts";
import { type DecoderConfig, decoderParameterSpecs, hasQkNorm, patchesPerImage } from "./config.ts";
import { ropeInverseFrequencies } from "./rope.ts";
import { mergeImageEmbeds, visionEncoder, visionParameterInputs } from "./vision.ts";
import type { AnyObjective } from "./objective.ts";
import {
  LORA_DROPOUT_SEED,
  type LoraConfig,
  type LoraGraph,
  loraLinear,
  loraParameterInputs,
} from "./lora.ts";

/** Float type of a graph: float32 in production, float64 for gradient checks. */
export type FloatType = "float32" | "float64";

/** Static shape of a train or score graph: B rows of T tokens, R scored tokens, I images. */
export interface Bucket {
  batch: number;
  length: number;
  /** R: scored (response) positions, listed flat by `token_index`. */
  tokens: number;
  /** I: image slots (vision models); absent or 0 for a text-only graph. */
  images?: number;
}

/** Additive attention bias for masked keys (finite, so fully masked rows stay finite). */
const MASKED = -1e9;

/** Inputs every train graph has; an objective's input names must differ from these. */
export const TRAIN_GRAPH_INPUTS = [
  "input_ids",
  "position_ids",
  "attention_mask",
  "token_index",
  "targets",
  "loss_mask",
  "pixel_values",
  "merge_index",
] as const;

/** A decoder config the graphs cannot be built for. */
export class DecoderConfigError extends Error {
  override name = "DecoderConfigError";
}

/** Check the config fields the graphs depend on; throws DecoderConfigError naming the field. */
export function validateConfig(c: DecoderConfig): void {
  const fail = (why: string) => {
    throw new DecoderConfigError(`Cannot build a decoder graph as ${why}`);
  };
  const positive = [
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
  ] as const;
  for (const k of positive) {
    if (!(Number.isInteger(c[k]) && c[k] > 0)) {
      fail(`${k} must be a positive integer: current value is ${c[k]}`);
    }
  }
  if (c.num_attention_heads % c.num_key_value_heads !== 0) {
    fail(
      `num_attention_heads must be a multiple of num_key_value_heads: current values are ${c.num_attention_heads} and ${c.num_key_value_heads}`,
    );
  }
  if (c.head_dim % 2 !== 0) fail(`head_dim must be even for RoPE: current value is ${c.head_dim}`);
  const r = c.rope_scaling;
  if (
    r && !(r.factor >= 1 && r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor &&
      r.original_max_position_embeddings > 0)
  ) {
    fail(
      `rope_scaling must have factor ≥ 1 and 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0: current value is ${
        JSON.stringify(r)
      }`,
    );
  }
  if (!(c.rms_norm_eps > 0 && c.rope_theta > 0)) {
    fail(
      `rms_norm_eps and rope_theta must be > 0: current values are ${c.rms_norm_eps} and ${c.rope_theta}`,
    );
  }
}

/**
 * Every decoder parameter as a graph input, in HF order (and the vision ones when asked), or,
 * given `weights`, the decoder's as constants holding them.
 */
function parameterInputs(
  g: Graph,
  c: DecoderConfig,
  requiresGrad: boolean,
  vision = false,
  weights?: ReadonlyMap<string, Float32Array>,
): Map<string, Value> {
  validateConfig(c);
  const p = new Map(
    decoderParameterSpecs(c).map((s) => [
      s.name,
      weights
        ? g.constant(weightOf(weights, s.name, s.shape), s.shape, g.floatType)
        : g.input(s.name, s.shape, { requiresGrad }),
    ]),
  );
  if (vision) { for (const [k, v] of visionParameterInputs(g, c, requiresGrad)) p.set(k, v); }
  return p;
}

/**
 * The adapter's parameter inputs (lora.ts), and in a training graph with dropout the
 * `lora_dropout_seed` input.
 */
function adapterInputs(
  g: Graph,
  c: DecoderConfig,
  lora: LoraConfig,
  training: boolean,
): LoraGraph {
  const params = loraParameterInputs(g, c, lora, training);
  const dropoutSeed = training && lora.dropout > 0
    ? g.input(LORA_DROPOUT_SEED, [], { dtype: "int64" })
    : undefined;
  return { lora, params, dropoutSeed };
}

/**
 * The float32 data of parameter `name` in `weights`.
 * @throws {RangeError} when it is missing or its length does not match `shape`.
 */
function weightOf(
  weights: ReadonlyMap<string, Float32Array>,
  name: string,
  shape: readonly number[],
): Float32Array {
  const data = weights.get(name), size = shape.reduce((n, d) => n * d, 1);
  if (data?.length !== size) {
    throw new RangeError(
      `Cannot build the decode graph as weight ${name} must hold ${size} floats: current length is ${data?.length}`,
    );
  }
  return data;
}

/** cos/sin of RoPE angles at int64 `positions` (B, T) → two (B, 1, T, D/2) tensors. */
function ropeAngles(g: Graph, c: DecoderConfig, positions: Value): [Value, Value] {
  const half = c.head_dim / 2;
  // HF: inv_freq[i] = 1 / θ^(2i/D) (Llama 3-scaled when configured); angle = position ·
  // inv_freq; emb = cat(angle, angle).
  const invFreq = ropeInverseFrequencies(c);
  const [b, t] = positions.shape;
  const pos = g.reshape(g.cast(positions, g.floatType), [b, 1, t, 1]); // (B, 1, T, 1)
  const angle = g.mul(pos, g.floats(invFreq, [half])); // (B, 1, T, D/2)
  const cos = g.emit("Cos", [angle], [angle])[0];
  const sin = g.emit("Sin", [angle], [angle])[0];
  return [cos, sin];
}

/** Rotate (B, h, T, D) by RoPE: x·cos + rotate_half(x)·sin with rotate_half(x) = [−x₂, x₁]. */
function rope(g: Graph, x: Value, cos: Value, sin: Value): Value {
  const half = Number(x.shape[3]) / 2;
  const [x1, x2] = g.split(x, -1, [half, half]); // (B, h, T, D/2) each
  const lo = g.sub(g.mul(x1, cos), g.mul(x2, sin)); // (B, h, T, D/2)
  const hi = g.add(g.mul(x2, cos), g.mul(x1, sin)); // (B, h, T, D/2)
  return g.concat([lo, hi], -1); // (B, h, T, D)
}

/** `a·b` for dims that may be symbolic. */
function mulDim(a: number, b: number | string): number | string {
  return typeof b === "number" ? a * b : a === 1 ? b : `${a}*${b}`;
}

/** Per-layer KV cache tensors, each (B, Hkv, P, D). */
export interface KvValues {
  keys: Value[];
  values: Value[];
}

/**
 * The decoder body: token ids (B, T) → final hidden states (B, T, C), plus each layer's keys
 * (after RoPE) and values of the T new tokens, (B, Hkv, T, D). `bias` (B, 1, T, K) is added to
 * attention scores; with a `past` cache (B, Hkv, P, D) the keys are the P cached ones then the
 * T new ones (K = P + T). With `image` embeddings (M, C) and their `mergeIndex` (B, T), the
 * input embeddings at image positions are replaced by them (vision.ts `mergeImageEmbeds`).
 */
function decoder(
  g: Graph,
  c: DecoderConfig,
  p: Map<string, Value>,
  x: {
    ids: Value;
    positions: Value;
    bias: Value;
    past?: KvValues;
    image?: { embeds: Value; mergeIndex: Value };
    /** LoRA adapters on the targeted projections (lora.ts). */
    adapter?: LoraGraph;
  },
): { hidden: Value; fresh: KvValues } {
  const [B, T] = x.ids.shape;
  const H = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
  const G = H / Hkv;
  const w = (name: string) => p.get(name)!;
  const [cos, sin] = ropeAngles(g, c, x.positions);
  const fresh: KvValues = { keys: [], values: [] };
  let h = g.gather(w("model.embed_tokens.weight"), x.ids); // (B, T, C)
  if (x.image) h = mergeImageEmbeds(g, h, x.image.embeds, x.image.mergeIndex); // (B, T, C)
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const pre = `model.layers.${l}`;
    const bias = (n: string) => (c.attention_bias ? w(`${pre}.self_attn.${n}.bias`) : undefined);
    // Every projection is x·Wᵀ (+ b), plus the LoRA adapter's term where one targets it.
    let salt = l * 8;
    const linear = (stem: string, src: Value, b?: Value) =>
      loraLinear(g, src, w(`${stem}.weight`), b, { stem, adapter: x.adapter, salt: salt++ });
    const proj = (n: string, src: Value) => linear(`${pre}.self_attn.${n}`, src, bias(n));
    const heads = (v: Value, n: number) => g.transpose(g.reshape(v, [B, T, n, D]), [0, 2, 1, 3]);
    // Qwen3: RMSNorm over each head's D channels (one (D,) gain shared by all heads), before RoPE.
    const qkNorm = (v: Value, n: "q_norm" | "k_norm") =>
      hasQkNorm(c) ? nn.rmsNorm(g, v, w(`${pre}.self_attn.${n}.weight`), c.rms_norm_eps) : v;

    // ---- attention
    const a = nn.rmsNorm(g, h, w(`${pre}.input_layernorm.weight`), c.rms_norm_eps); // (B, T, C)
    const q = rope(g, qkNorm(heads(proj("q_proj", a), H), "q_norm"), cos, sin); // (B, H, T, D)
    const k = rope(g, qkNorm(heads(proj("k_proj", a), Hkv), "k_norm"), cos, sin); // (B, Hkv, T, D)
    const v = heads(proj("v_proj", a), Hkv); // (B, Hkv, T, D)
    fresh.keys.push(k);
    fresh.values.push(v);
    // GQA: the G query heads that share a KV head are stacked along the token axis, so one
    // batched MatMul serves them without repeating K and V.
    const qg = g.reshape(q, [B, Hkv, mulDim(G, T), D]); // (B, Hkv, G·T, D)
    const scores = (keys: Value) => g.matmul(qg, g.transpose(keys, [0, 1, 3, 2])); // (B, Hkv, G·T, ·)
    const past = x.past && { k: x.past.keys[l], v: x.past.values[l] };
    // With a cache, scores against cached and new keys are joined, never the cache itself
    // (copying it every step would cost more than the step's arithmetic).
    let s = past ? g.concat([scores(past.k), scores(k)], -1) : scores(k); // (B, Hkv, G·T, K)
    const K = s.shape[3];
    s = g.mul(s, g.scalar(1 / Math.sqrt(D)));
    s = g.add(g.reshape(s, [B, H, T, K]), x.bias); // (B, H, T, K)
    const att = g.reshape(g.softmax(s, -1), [B, Hkv, mulDim(G, T), K]); // (B, Hkv, G·T, K)
    let o: Value;
    if (past) {
      const [aPast, aNew] = splitKeys(g, att, past.k, k); // (B, Hkv, G·T, P), (B, Hkv, G·T, T)
      o = g.add(g.matmul(aPast, past.v), g.matmul(aNew, v)); // (B, Hkv, G·T, D)
    } else o = g.matmul(att, v); // (B, Hkv, G·T, D)
    o = g.reshape(o, [B, H, T, D]); // (B, H, T, D)
    const merged = g.reshape(g.transpose(o, [0, 2, 1, 3]), [B, T, H * D]); // (B, T, H·D)
    h = g.add(h, linear(`${pre}.self_attn.o_proj`, merged)); // (B, T, C)

    // ---- SwiGLU MLP: down(silu(gate(x)) ⊙ up(x))
    const m = nn.rmsNorm(g, h, w(`${pre}.post_attention_layernorm.weight`), c.rms_norm_eps);
    const gate = nn.silu(g, linear(`${pre}.mlp.gate_proj`, m)); // (B, T, F)
    const up = linear(`${pre}.mlp.up_proj`, m); // (B, T, F)
    h = g.add(h, linear(`${pre}.mlp.down_proj`, g.mul(gate, up))); // (B, T, C)
  }
  const hidden = nn.rmsNorm(g, h, w("model.norm.weight"), c.rms_norm_eps); // (B, T, C)
  return { hidden, fresh };
}

/** Split attention weights (…, P + T) into the cached (…, P) and new (…, T) key parts. */
function splitKeys(g: Graph, att: Value, pastK: Value, newK: Value): [Value, Value] {
  const sizes =
    g.emit("Concat", [dimOf(g, pastK, 2), dimOf(g, newK, 2)], [{ shape: [2], dtype: "int64" }], [
      intAttr("axis", 0),
    ])[0];
  const lead = att.shape.slice(0, -1);
  const [a, b] = g.emit("Split", [att, sizes], [
    { shape: [...lead, pastK.shape[2]], dtype: att.dtype },
    { shape: [...lead, newK.shape[2]], dtype: att.dtype },
  ], [intAttr("axis", 3)]);
  return [a, b];
}

/** The run-time size of `v`'s dim `axis` as a (1,) int64 tensor. */
function dimOf(g: Graph, v: Value, axis: number): Value {
  return g.emit("Shape", [v], [{ shape: [1], dtype: "int64" }], [
    intAttr("start", axis),
    intAttr("end", axis + 1),
  ])[0];
}

/** LM head: hidden (…, C) → logits (…, V) (tied: `embed_tokens` is the head). */
function lmHead(g: Graph, c: DecoderConfig, p: Map<string, Value>, hidden: Value): Value {
  const head = p.get(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight")!;
  return nn.linear(g, hidden, head); // (…, V)
}

/** Static causal ∧ key-padding bias (B, 1, T, T) from float `mask` (B, T) (1 = real token). */
function causalBias(g: Graph, mask: Value, b: number, t: number): Value {
  const causal = new Uint8Array(t * t);
  for (let i = 0; i < t; i++) for (let j = 0; j <= i; j++) causal[i * t + j] = 1;
  const keep = g.and(
    g.constant(causal, [1, 1, t, t], "bool"),
    g.reshape(g.compare("Greater", mask, g.scalar(0.5)), [b, 1, 1, t]),
  ); // (B, 1, T, T)
  return g.where(keep, g.scalar(0), g.scalar(MASKED));
}

/**
 * Logits divided by the sampling temperature T (`logits / T`, as the reference code's actor does
 * in every log-prob pass: verl `dp_actor.py` `_forward_micro_batch`, `logits.div_(temperature)`),
 * so log-probs and entropy are those of the distribution the tokens were sampled from. T = 1
 * leaves the graph unchanged. (…, V) → (…, V).
 */
function tempered(g: Graph, logits: Value, temperature: number): Value {
  return temperature === 1 ? logits : g.div(logits, g.scalar(temperature)); // (…, V)
}

/** Throws DecoderConfigError unless T is a finite number > 0. */
function checkTemperature(temperature: number): void {
  if (!(Number.isFinite(temperature) && temperature > 0)) {
    throw new DecoderConfigError(
      `Cannot build a scoring graph as the temperature must be a finite number > 0: current value is ${temperature}`,
    );
  }
}

/**
 * Log-probs of the targets and entropy at the R scored positions, each (R,), of softmax(logits /
 * T). Only those positions go through the LM head and the vocabulary softmax (prompts are not
 * scored).
 */
function tokenStats(
  g: Graph,
  c: DecoderConfig,
  p: Map<string, Value>,
  bucket: Bucket,
  adapter?: LoraGraph,
  temperature = 1,
) {
  const { batch: b, length: t, tokens: r } = bucket;
  const ids = g.input("input_ids", [b, t], { dtype: "int64" });
  const mask = g.input("attention_mask", [b, t]);
  const positions = g.input("position_ids", [b, t], { dtype: "int64" });
  const index = g.input("token_index", [r], { dtype: "int64" });
  const targets = g.input("targets", [r], { dtype: "int64" });
  const bias = g.withoutTape(() => causalBias(g, mask, b, t));
  let image: { embeds: Value; mergeIndex: Value } | undefined;
  if (bucket.images) {
    const v = c.vision_config!, np = patchesPerImage(v), k = v.num_channels * v.patch_size ** 2;
    const pixels = g.input("pixel_values", [bucket.images, np, k]); // (I, P, K)
    const embeds = g.reshape(visionEncoder(g, c, p, pixels), [bucket.images * np, c.hidden_size]); // (I·P, C)
    image = { embeds, mergeIndex: g.input("merge_index", [b, t], { dtype: "int64" }) };
  }
  const { hidden } = decoder(g, c, p, { ids, positions, bias, image, adapter });
  const scored = g.gather(g.reshape(hidden, [b * t, c.hidden_size]), index); // (R, C)
  const logits = tempered(g, lmHead(g, c, p, scored), temperature); // (R, V)
  const { logp, picked } = nn.logSoftmaxPick(g, logits, targets); // (R, V), (R,)
  return { logp: picked, entropy: nn.entropy(g, logp) }; // (R,)
}

/**
 * The train graph of one bucket for `objective` (objective.ts). Inputs: `input_ids`,
 * `position_ids` (B, T) int64, `attention_mask` (B, T) float; `token_index`, `targets` (R,)
 * int64 and `loss_mask` (R,) float (batch.ts); the objective's token inputs (R,) float, its
 * scalar inputs (scalars) and counts ((R,) float: each token's divisor, objective.ts); every
 * parameter. ℓθ and H are those of softmax(logits / `temperature`) (default 1). Outputs: the
 * objective's outputs (scalars,
 * `loss` among them), `logprobs` and `token_entropy` (R,), and `grad.<name>` (d loss / d
 * parameter) per parameter. With `lora` (lora.ts), also the adapter's parameters, and only they
 * get gradients (the base parameters are inputs without `grad.` outputs); with LoRA dropout > 0,
 * also `lora_dropout_seed` (int64 scalar) seeding the dropout masks. Throws DecoderConfigError
 * when an objective's name collides with a graph input.
 */
export function buildTrainGraph(
  c: DecoderConfig,
  bucket: Bucket,
  opts: { objective: AnyObjective; dtype?: FloatType; lora?: LoraConfig; temperature?: number },
): Graph {
  const objective = opts.objective;
  const temperature = opts.temperature ?? 1;
  checkTemperature(temperature);
  const g = new G(`train_${objective.name}`, opts.dtype ?? "float32");
  const p = parameterInputs(g, c, !opts.lora, !!bucket.images);
  const adapter = opts.lora && adapterInputs(g, c, opts.lora, true);
  const { logp, entropy } = tokenStats(g, c, p, bucket, adapter, temperature);
  const shape = [bucket.tokens];
  const mask = g.input("loss_mask", shape);
  const inputs: Record<string, Value> = {};
  const declare = (name: string, dims: number[]) => {
    if (
      (TRAIN_GRAPH_INPUTS as readonly string[]).includes(name) || name in inputs || p.has(name) ||
      name === LORA_DROPOUT_SEED
    ) {
      throw new DecoderConfigError(
        `Cannot build the train graph of objective ${objective.name} as its input names must be new: ${name} is taken`,
      );
    }
    inputs[name] = g.input(name, dims);
  };
  for (const name of objective.tokenInputs) declare(name, shape); // (R,)
  for (const name of objective.scalarInputs) declare(name, []);
  for (const name of Object.keys(objective.counts)) declare(name, shape); // (R,) divisors
  const outputs = objective.build(g, { logp, entropy, mask }, inputs);
  for (const name of Object.keys(objective.outputs)) g.output(outputs[name], name);
  g.output(logp, "logprobs");
  g.output(entropy, "token_entropy");
  const params = adapter ? [...adapter.params.values()] : [...p.values()];
  gradients(g, outputs.loss, params).forEach((d, i) => g.output(d, `grad.${params[i].name}`));
  return g;
}

/**
 * The score graph of one bucket: inputs as `train` without losses → `logprobs`, `token_entropy`
 * (R,) of softmax(logits / `temperature`) (default 1). With `lora`, also the adapter's parameters
 * (no dropout: scoring is evaluation).
 */
export function buildScoreGraph(
  c: DecoderConfig,
  bucket: Bucket,
  opts: { dtype?: FloatType; lora?: LoraConfig; temperature?: number } = {},
): Graph {
  const temperature = opts.temperature ?? 1;
  checkTemperature(temperature);
  const g = new G("score", opts.dtype ?? "float32");
  const p = parameterInputs(g, c, false, !!bucket.images);
  const adapter = opts.lora && adapterInputs(g, c, opts.lora, false);
  const { logp, entropy } = tokenStats(g, c, p, bucket, adapter, temperature);
  g.output(logp, "logprobs");
  g.output(entropy, "token_entropy");
  return g;
}

/**
 * The score graph over a KV cache (symbolic B, T, P, R): each row continues its own cached
 * prefix, so prompts that share a prefix have it computed once (`Policy.scoreSharedPrefixes`).
 * Inputs: `input_ids`, `position_ids` (B, T) int64 (positions continue the prefix's);
 * `attention_mask` (B, P + T) float over cached and new keys (1 = attend); `past.<l>.key|value`
 * (B, Hkv, P, D) as the decode graph's `new.<l>.*`; `token_index`, `targets` (R,) int64 (flat
 * B·T positions and the tokens there, batch.ts); every decoder parameter. Outputs: `logprobs`
 * and `token_entropy` (R,), as the score graph's (at `temperature`, default 1). Text-only (no
 * image inputs). With `lora`, also the adapter's parameters (no dropout).
 */
export function buildPrefixScoreGraph(
  c: DecoderConfig,
  opts: { dtype?: FloatType; lora?: LoraConfig; temperature?: number } = {},
): Graph {
  const temperature = opts.temperature ?? 1;
  checkTemperature(temperature);
  const g = new G("score_prefixed", opts.dtype ?? "float32");
  const p = parameterInputs(g, c, false);
  const adapter = opts.lora && adapterInputs(g, c, opts.lora, false);
  const ids = g.input("input_ids", ["B", "T"], { dtype: "int64" });
  const positions = g.input("position_ids", ["B", "T"], { dtype: "int64" });
  const { past, bias } = pastInputs(g, c, ids);
  const index = g.input("token_index", ["R"], { dtype: "int64" });
  const targets = g.input("targets", ["R"], { dtype: "int64" });
  const { hidden } = decoder(g, c, p, { ids, positions, bias, past, adapter }); // (B, T, C)
  const flat = g.reshape(hidden, ["B*T", c.hidden_size]); // (B·T, C)
  const scored = g.gather(flat, index); // (R, C)
  const logp = g.logSoftmax(tempered(g, lmHead(g, c, p, scored), temperature), -1); // (R, V)
  g.output(nn.pickLogProbs(g, logp, targets), "logprobs"); // (R,)
  g.output(nn.entropy(g, logp), "token_entropy"); // (R,)
  return g;
}

/**
 * The decode graph (symbolic B, T, P). Inputs: `input_ids`, `position_ids` (B, T) int64;
 * `attention_mask` (B, P + T) float over cached and new keys (1 = attend; cache slots not yet
 * filled are 0); `past.<l>.key`, `past.<l>.value` (B, Hkv, P, D) (P = 0 for a prefill); every
 * parameter. Outputs: `new.<l>.key|value` (B, Hkv, T, D), the new tokens' keys (after RoPE)
 * and values, and `logits`: (B, T, V), or (B, V) at the last
 * position only when `lastOnly` (left-padded generation). With `images` (vision models, for
 * prefills that hold image tokens) also `image_embeds` (M, C) from the encode graph and
 * `merge_index` (B, T) int64 (b·T + t at text positions, B·T + k at the k-th image token of
 * this call); the graph still reads only the decoder's parameters. With `lora`, also the
 * adapter's parameters (no dropout). With `weights` (float32, by HF name; float32 graphs only)
 * the decoder's parameters are constants of the graph instead of inputs: onnxruntime then
 * pre-packs the weight matrices once at load (no per-call transpose and packing of every
 * weight), so one session serves one checkpoint (the inference server's sessions).
 */
export function buildDecodeGraph(
  c: DecoderConfig,
  opts: {
    lastOnly: boolean;
    dtype?: FloatType;
    images?: boolean;
    lora?: LoraConfig;
    weights?: ReadonlyMap<string, Float32Array>;
  },
): Graph {
  if (opts.weights && (opts.dtype ?? "float32") !== "float32") {
    throw new RangeError(
      `Cannot build the decode graph as constant weights need dtype float32: current value is ${opts.dtype}`,
    );
  }
  const g = new G(opts.images ? "decode_images" : "decode", opts.dtype ?? "float32");
  const f: DType = g.floatType;
  const p = parameterInputs(g, c, false, false, opts.weights);
  const adapter = opts.lora && adapterInputs(g, c, opts.lora, false);
  const ids = g.input("input_ids", ["B", "T"], { dtype: "int64" });
  const image = opts.images
    ? {
      embeds: g.input("image_embeds", ["M", c.hidden_size]),
      mergeIndex: g.input("merge_index", ["B", "T"], { dtype: "int64" }),
    }
    : undefined;
  const positions = g.input("position_ids", ["B", "T"], { dtype: "int64" });
  const { past, bias } = pastInputs(g, c, ids);
  const { hidden, fresh } = decoder(g, c, p, { ids, positions, bias, past, image, adapter });
  for (let l = 0; l < c.num_hidden_layers; l++) {
    g.output(fresh.keys[l], `new.${l}.key`);
    g.output(fresh.values[l], `new.${l}.value`);
  }
  const last = opts.lastOnly
    ? g.emit("Gather", [hidden, g.constant(BigInt64Array.from([-1n]), [], "int64")], [{
      shape: ["B", c.hidden_size],
      dtype: f,
    }], [
      intAttr("axis", 1),
    ])[0] // (B, C)
    : hidden; // (B, T, C)
  g.output(lmHead(g, c, p, last), "logits");
  return g;
}

/**
 * The inputs of a graph that reads a KV cache: `attention_mask` (B, P + T) float (1 = attend) and
 * `past.<l>.key|value` (B, Hkv, P, D), and the additive attention bias (B, 1, T, P + T) they give
 * with causality over absolute indices: query i (at P + i) sees key j iff j ≤ P + i.
 */
function pastInputs(g: Graph, c: DecoderConfig, ids: Value): { past: KvValues; bias: Value } {
  const f: DType = g.floatType;
  const K = "P+T";
  const mask = g.input("attention_mask", ["B", K]);
  const cacheShape = ["B", c.num_key_value_heads, "P", c.head_dim];
  const past: KvValues = { keys: [], values: [] };
  for (let l = 0; l < c.num_hidden_layers; l++) {
    past.keys.push(g.input(`past.${l}.key`, cacheShape));
    past.values.push(g.input(`past.${l}.value`, cacheShape));
  }
  // causal over absolute indices: query i (at P + i) sees key j iff j ≤ P + i.
  const P1 = dimOf(g, past.keys[0], 2), T1 = dimOf(g, ids, 1); // (1,) each
  const zero = g.ints([0]), oneI = g.ints([1]);
  const range = (a: Value, b: Value, n: string) =>
    g.emit("Range", [scalarOf(g, a), scalarOf(g, b), scalarOf(g, oneI)], [{
      shape: [n],
      dtype: "int64",
    }])[0];
  const end = g.emit("Add", [P1, T1], [{ shape: [1], dtype: "int64" }])[0];
  const qPos = g.reshape(range(P1, end, "T"), ["T", 1]); // (T, 1)
  const kPos = g.reshape(range(zero, end, K), [1, K]); // (1, K)
  const keep = g.and(
    g.emit("Unsqueeze", [g.compare("LessOrEqual", kPos, qPos), g.ints([0, 1])], [
      { shape: [1, 1, "T", K], dtype: "bool" },
    ])[0],
    g.reshape(g.compare("Greater", mask, g.scalar(0.5, f)), ["B", 1, 1, K]),
  ); // (B, 1, T, K)
  const bias = g.where(keep, g.scalar(0, f), g.scalar(MASKED, f));
  return { past, bias };
}

/** A (1,) int64 tensor as a scalar (Range takes scalars). */
function scalarOf(g: Graph, v: Value): Value {
  return g.emit("Squeeze", [v, g.ints([0])], [{ shape: [], dtype: "int64" }])[0];
}

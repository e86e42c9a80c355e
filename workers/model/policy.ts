/**
 * The policy a trainer calls (e.g. workers/seed): a decoder config, its parameters (mutated in
 * place by the optimizer) and cached onnxruntime sessions for the train, score and decode graphs.
 *
 * Samples are (prompt, response) token ids of any lengths; they are packed into shape buckets
 * and micro-batches of at most `maxTokensPerCall` padded tokens (so each `run()` stays short),
 * and per-token results come back per sample with one entry per response token. A train step
 * evaluates a training objective (objective.ts) given by the caller: the objective's counts are
 * computed over the step's samples (or over each of its micro-batches, `microBatches`) and fed
 * to every call as per-token divisors, so each call returns sums over its tokens divided by those
 * counts, and the calls' outputs and gradients add with weight 1 (exact for any split: how the
 * samples are packed into calls for memory never changes the result).
 *
 * Temperature: every pass that scores tokens (`score`, `scoreSharedPrefixes`, `trainStep`) takes
 * a `temperature` T and computes ℓ and H of softmax(logits / T), as the reference code's actor
 * does in each of its log-prob passes (default 1: the logits as they are).
 *
 * Vision models (a config with `vision_config`): samples may carry `images`, one per `<image>`
 * placeholder of the prompt (expanded here with `expandImageTokens`). A micro-batch with images
 * runs the graphs whose bucket has image slots (the encoder in the graph, trained end to end);
 * one without images runs the text-only graphs, and the vision parameters get zero gradient
 * from it. Text-only models behave exactly as before.
 *
 * LoRA (`opts.lora`, lora.ts): `params` holds the base weights and the adapter's tensors in one
 * map; every graph applies the adapter, and a train step returns gradients of the adapter's
 * tensors only (`trainableSpecs()`). A policy over the same map without `lora` is the base with
 * the adapter off (π_ref), sharing every buffer.
 */
import type * as ort from "onnxruntime-node";
import { type EngineOptions, SessionCache, tensor, yieldToEventLoop } from "../engine/mod.ts";
import {
  type DecoderConfig,
  decoderParameterSpecs,
  parameterCount,
  type Parameters,
  type ParameterSpec,
  parameterSpecs,
} from "./config.ts";
import {
  bucketOf,
  distinctSamples,
  type PackedBatch,
  packSamples,
  packTokens,
  planMicroBatches,
  prepareSamples,
  type Sample,
  sampleLength,
  unpackTokens,
} from "./batch.ts";
import {
  type Bucket,
  buildDecodeGraph,
  buildPrefixScoreGraph,
  buildScoreGraph,
  buildTrainGraph,
} from "./llama.ts";
import type {
  AnyObjective,
  CountName,
  OutputName,
  ScalarName,
  TokenInputName,
} from "./objective.ts";
import { generate, type GenerateOptions, type Generation } from "./generate.ts";
import { buildEncodeGraph } from "./vision.ts";
import { preprocessImage, type RgbImage } from "./image.ts";
import { LORA_DROPOUT_SEED, type LoraConfig, loraParameterSpecs } from "./lora.ts";

/**
 * A sample of a train step: token ids plus the objective's per-token inputs by name, each one
 * value per response token or one number broadcast to all of them.
 */
export interface TrainSample extends Sample {
  inputs?: Readonly<Record<string, number | Float32Array>>;
}

/** Per-sample, per-response-token log-probs and entropies. */
export interface TokenScores {
  logprobs: Float32Array[];
  entropy: Float32Array[];
}

/** The result of one train step of objective `X`. */
export interface TrainStepResult<X extends AnyObjective> {
  /** Each output of the objective (`loss` among them) over the whole step. */
  outputs: Record<OutputName<X>, number>;
  /** Each count of the objective over the whole step (the true count, 0 when empty). */
  counts: Record<CountName<X>, number>;
  /** Response tokens of the step. */
  tokens: number;
  /**
   * d loss / d parameter for every trainable parameter (`Policy.trainableSpecs`; zeros where no
   * call reached it).
   */
  grads: Parameters;
  /** ℓθ per sample, one per response token. */
  logprobs: Float32Array[];
}

/** Policy options: engine settings plus call sizing. */
export interface PolicyOptions extends EngineOptions {
  /**
   * Most padded tokens (rows × bucket length) per onnxruntime train call; score calls and
   * generation prefill windows take 3× as many (forward only). Default: a ~10¹¹ FLOP train call
   * (≈ 1–2 s on 2 cores), `1e11 / (6 · parameters)`, within [256, {@link MAX_TOKENS_PER_CALL}].
   */
  maxTokensPerCall?: number;
  /** Most rows per call (default 64). */
  maxBatch?: number;
  /**
   * Threads that draw generated tokens (generate.ts `samplerThreads`; the same tokens on any
   * number). Default: `threads`, as the draws run while onnxruntime's threads wait.
   */
  samplerThreads?: number;
  /** Share sessions with other policies of the same config (e.g. θ_old and π_ref). */
  sessions?: SessionCache;
  /**
   * A LoRA adapter on the base weights: `params` must also hold its tensors
   * (`loraParameterSpecs`), and only they are trained.
   */
  lora?: LoraConfig;
}

/** Options of one {@link Policy.trainStep}. */
export interface TrainStepOptions {
  /**
   * Seed of the LoRA dropout masks (uint32; call k of the step uses seed + k). Default 0. Ignored
   * without LoRA dropout.
   */
  dropoutSeed?: number;
  /**
   * The step's micro-batches: a partition of the sample indices (each index in exactly one).
   * Every count is taken within a micro-batch and every output is the mean, over the M
   * micro-batches, of the micro-batch's own token means: (1/M)·Σ_m Σ_{t∈m} x_t / N_m (objective.ts,
   * module doc). Default: one micro-batch of every sample (a token mean over the step).
   */
  microBatches?: readonly (readonly number[])[];
  /** Temperature T: ℓθ and H of softmax(logits / T) (default 1; finite, > 0). */
  temperature?: number;
}

/** Options of {@link Policy.score}. */
export interface ScoreOptions {
  /** Temperature T: ℓ and H of softmax(logits / T) (default 1; finite, > 0). */
  temperature?: number;
}

/**
 * The most padded tokens of a default train call, whatever the FLOP budget allows (small models).
 * A call's activations grow with its tokens (≈ 150–220 KB per token for builtin:tiny, more with
 * longer buckets), and they are the worker's peak memory: 8,192-token calls made a demo-sized job
 * peak at 4.8 GB with onnxruntime's arena on; 2,048 with the arena off kept it at 0.6 GB, with no
 * loss of speed measured (bench/memory.ts, bench/README.md Benchmarks).
 */
export const MAX_TOKENS_PER_CALL = 2048;

/**
 * Most bytes of prefix KV caches `Policy.scoreSharedPrefixes` holds at once (groups beyond it
 * are prefilled and scored in later rounds): 128 MiB. The demo's teacher pass needs ~9 MB; a
 * 24-layer model with 2 KV heads of 64 channels needs 24 KB per prefix token. A worker's
 * `WORKER_PREFIX_CACHE_MB` sets another budget for its trainer (workers/worker/config.ts).
 */
export const PREFIX_CACHE_BYTES = 128 * 2 ** 20;

/** A policy cannot be built from the given config and parameters. */
export class PolicyError extends Error {
  override name = "PolicyError";
}

/** A Llama/Qwen2 policy on onnxruntime. */
export class Policy {
  readonly sessions: SessionCache;
  private readonly key: string;
  /** The adapter's parameters (empty without LoRA). */
  private readonly adapterSpecs: ParameterSpec[];

  constructor(
    readonly config: DecoderConfig,
    readonly params: Parameters,
    readonly opts: PolicyOptions = {},
  ) {
    this.adapterSpecs = opts.lora ? loraParameterSpecs(config, opts.lora) : [];
    for (const s of [...parameterSpecs(config), ...this.adapterSpecs]) {
      const p = params.get(s.name);
      const n = s.shape.reduce((a, b) => a * b, 1);
      if (!p || p.length !== n) {
        throw new PolicyError(
          `Cannot create a Policy as parameter ${s.name} must have ${n} values: current is ${
            p?.length ?? "missing"
          }`,
        );
      }
    }
    this.sessions = opts.sessions ?? new SessionCache(opts);
    this.key = JSON.stringify(config) + (opts.lora ? `:lora${JSON.stringify(opts.lora)}` : "");
  }

  /**
   * The parameters a train step returns gradients for and an optimizer updates: the adapter's
   * with LoRA, else every parameter.
   */
  trainableSpecs(): ParameterSpec[] {
    return this.opts.lora ? this.adapterSpecs : parameterSpecs(this.config);
  }

  /**
   * The same model with other parameters (θ_old, π_ref, a teacher), sharing this policy's
   * options and compiled sessions (parameters are graph inputs, so graphs are identical).
   */
  withParameters(params: Parameters): Policy {
    return new Policy(this.config, params, { ...this.opts, sessions: this.sessions });
  }

  /**
   * Per-token log-probs and entropies of each sample's response (no gradient), at
   * `opts.temperature` (default 1). Samples that are the same input (`distinctSamples`) are
   * scored once; each gets its own arrays.
   */
  async score(input: Sample[], opts: ScoreOptions = {}): Promise<TokenScores> {
    // checked and expanded before dropping twins, so an error names the caller's sample index
    const samples = prepareSamples(input, this.config);
    const t = temperatureOf(opts.temperature);
    const { distinct, slot } = distinctSamples(samples);
    if (distinct.length === samples.length) return await this.#scoreEach(samples, t);
    return spreadScores(await this.#scoreEach(distinct.map((i) => samples[i]), t), slot);
  }

  /** `score` of every sample, duplicates included; `samples` already `prepareSamples`d. */
  async #scoreEach(samples: Sample[], temperature: number): Promise<TokenScores> {
    const out: TokenScores = {
      logprobs: new Array(samples.length),
      entropy: new Array(samples.length),
    };
    for (const group of this.plan(samples, true)) {
      const packed = this.pack(samples, group);
      const lora = this.opts.lora;
      const session = await this.session(
        `score${temperatureKey(temperature)}`,
        packed.bucket,
        () => buildScoreGraph(this.config, packed.bucket, { lora, temperature }).toModel(),
      );
      const r = await session.run({
        ...this.parameterFeeds(this.specsOf(packed)),
        ...this.baseFeeds(packed),
      });
      await yieldToEventLoop();
      const lp = unpackTokens(packed, r.logprobs.data as Float32Array),
        h = unpackTokens(packed, r.token_entropy.data as Float32Array);
      group.forEach((i, k) => ((out.logprobs[i] = lp[k]), (out.entropy[i] = h[k])));
    }
    return out;
  }

  /**
   * Per-token log-probs and entropies as {@link score}, for samples in `groups` (lists of sample
   * indices; each sample in at most one, samples in none are scored alone) whose prompts share a
   * prefix: each group's longest common prompt prefix (in tokens, leaving every prompt at least
   * one token of its own) is run once through the decode graph, and its samples' remaining
   * tokens are scored over that KV cache (`buildPrefixScoreGraph`). Same values as `score` up to
   * float rounding (different matmul shapes: |Δ| ~1e-6), at the cost of the shared prefix once
   * per group instead of once per sample. Groups are taken in turn while their caches fit
   * `opts.cacheBytes` (default {@link PREFIX_CACHE_BYTES}), so memory stays bounded for large
   * models. Vision models and samples with images fall back to `score`. At `opts.temperature`
   * (default 1), as `score`.
   * @throws {PolicyError} when a group holds an index that is not a sample's, or a sample is in
   *   two groups.
   */
  async scoreSharedPrefixes(
    input: Sample[],
    groups: readonly (readonly number[])[],
    opts: { cacheBytes?: number } & ScoreOptions = {},
  ): Promise<TokenScores> {
    checkGroups(groups, input.length);
    const temperature = temperatureOf(opts.temperature);
    if (
      input.length === 0 || this.config.vision_config ||
      input.some((s) => (s.images?.length ?? 0) > 0)
    ) return await this.score(input, { temperature });
    const { distinct, slot } = distinctSamples(input);
    if (distinct.length < input.length) {
      // each input once, in the group of its first sample (a later equal sample leaves its group)
      const kept = groups.map((g) => g.filter((i) => distinct[slot[i]] === i).map((i) => slot[i]))
        .filter((g) => g.length > 0);
      const scores = await this.scoreSharedPrefixes(distinct.map((i) => input[i]), kept, opts);
      return spreadScores(scores, slot);
    }
    const c = this.config;
    const { groupOf, prefixLength, members } = sharedPrefixes(input, groups);
    // Cache bytes per prefix token: layers × (key, value) × Hkv × D float32.
    const perToken = c.num_hidden_layers * 2 * c.num_key_value_heads * c.head_dim * 4;
    const budget = opts.cacheBytes ?? PREFIX_CACHE_BYTES;
    const out: TokenScores = {
      logprobs: new Array(input.length),
      entropy: new Array(input.length),
    };
    for (let a = 0; a < members.length;) {
      let e = a, bytes = 0;
      while (e < members.length && (e === a || bytes + prefixLength[e] * perToken <= budget)) {
        bytes += prefixLength[e++] * perToken;
      }
      const caches = await this.prefill(
        members.slice(a, e).map((g, k) => input[g[0]].prompt.slice(0, prefixLength[a + k])),
      );
      const samples = members.slice(a, e).flat().sort((x, y) => x - y);
      const prefixOf = (i: number) => ({
        length: prefixLength[groupOf[i]],
        cache: caches[groupOf[i] - a],
      });
      await this.scoreSuffixes(input, samples, { prefixOf, temperature }, out);
      a = e;
    }
    return out;
  }

  /**
   * Scores samples `indices` of `input` over their prefixes' caches (`prefixOf`: the prefix's
   * length in tokens and its cache) at `temperature`: only each prompt's tokens after its prefix
   * are fed, with positions continuing the prefix's. Writes into `out` at the samples' indices.
   */
  private async scoreSuffixes(
    input: Sample[],
    indices: number[],
    opts: { prefixOf: (i: number) => { length: number; cache: PrefixCache }; temperature: number },
    out: TokenScores,
  ): Promise<void> {
    const c = this.config, { prefixOf, temperature } = opts;
    const suffixes: Sample[] = indices.map((i) => ({
      prompt: input[i].prompt.slice(prefixOf(i).length),
      response: input[i].response,
    }));
    const session = await this.sessions.get(
      `score_prefixed${temperatureKey(temperature)}:${this.key}`,
      () => buildPrefixScoreGraph(c, { lora: this.opts.lora, temperature }).toModel(),
    );
    const parameters = this.inferenceFeeds();
    for (const group of this.plan(suffixes, true)) {
      const rows = group.map((j) => suffixes[j]);
      const b = rows.length, t = Math.max(1, ...rows.map(sampleLength));
      const packed = packSamples(rows, {
        batch: b,
        length: t,
        tokens: rows.reduce((n, s) => n + s.response.length, 0),
      }, c.pad_token_id ?? 0);
      const prefixes = group.map((j) => prefixOf(indices[j]));
      const p = Math.max(...prefixes.map((x) => x.length)), k = p + t;
      const keyMask = new Float32Array(b * k); // (B, P + T)
      prefixes.forEach(({ length: n }, r) => {
        keyMask.fill(1, r * k, r * k + n);
        keyMask.set(packed.attentionMask.subarray(r * t, (r + 1) * t), r * k + p);
        for (let j = 0; j < t; j++) packed.positionIds[r * t + j] += BigInt(n);
      });
      const r = await session.run({
        ...parameters,
        ...this.pastFeeds(prefixes.map((x) => x.cache), p),
        input_ids: tensor("int64", packed.inputIds, [b, t]),
        position_ids: tensor("int64", packed.positionIds, [b, t]),
        attention_mask: tensor("float32", keyMask, [b, k]),
        token_index: tensor("int64", packed.tokenIndex, [packed.bucket.tokens]),
        targets: tensor("int64", packed.targets, [packed.bucket.tokens]),
      });
      await yieldToEventLoop();
      const lp = unpackTokens(packed, r.logprobs.data as Float32Array),
        h = unpackTokens(packed, r.token_entropy.data as Float32Array);
      group.forEach((
        j,
        m,
      ) => ((out.logprobs[indices[j]] = lp[m]), (out.entropy[indices[j]] = h[m])));
    }
  }

  /**
   * `past.<l>.key|value` feeds (B, Hkv, P, D) whose row r holds `rows[r]`'s cached prefix (per
   * layer, (Hkv, n, D) with n ≤ P) in its first n slots, zeros after.
   */
  private pastFeeds(rows: PrefixCache[], p: number): Record<string, ort.Tensor> {
    const c = this.config, hkv = c.num_key_value_heads, d = c.head_dim;
    const past: Record<string, ort.Tensor> = {};
    for (let l = 0; l < c.num_hidden_layers; l++) {
      for (const kind of ["key", "value"] as const) {
        const buf = new Float32Array(rows.length * hkv * p * d); // (B, Hkv, P, D)
        rows.forEach((cache, r) => {
          const src = cache[l][kind], n = src.length / (hkv * d); // (Hkv, n, D)
          for (let h = 0; h < hkv; h++) {
            buf.set(src.subarray(h * n * d, (h + 1) * n * d), (r * hkv + h) * p * d);
          }
        });
        past[`past.${l}.${kind}`] = tensor("float32", buf, [rows.length, hkv, p, d]);
      }
    }
    return past;
  }

  /**
   * Each prefix's keys (after RoPE) and values per layer, (Hkv, n, D) float32 for a prefix of n
   * tokens, from the decode graph (right-padded rows, positions from 0); empty for n = 0.
   */
  private async prefill(prefixes: number[][]): Promise<PrefixCache[]> {
    const c = this.config, hkv = c.num_key_value_heads, d = c.head_dim;
    const layers = c.num_hidden_layers;
    const empty = () =>
      Array.from({ length: layers }, () => ({
        key: new Float32Array(0),
        value: new Float32Array(0),
      }));
    const out = prefixes.map(empty);
    const todo = prefixes.map((_, i) => i).filter((i) => prefixes[i].length > 0)
      .sort((a, b) => prefixes[a].length - prefixes[b].length);
    if (todo.length === 0) return out;
    const session = await this.sessions.get(
      `decode:${this.key}`,
      () => buildDecodeGraph(c, { lastOnly: true, lora: this.opts.lora }).toModel(),
    );
    const parameters = this.inferenceFeeds();
    const budget = this.tokensPerCall(3), maxBatch = this.opts.maxBatch ?? 64;
    for (let a = 0; a < todo.length;) {
      // Rows sorted by length: take rows while rows × longest stays within the budget.
      let e = a + 1;
      while (
        e < todo.length && e - a < maxBatch && (e + 1 - a) * prefixes[todo[e]].length <= budget
      ) e++;
      const rows = todo.slice(a, e), b = rows.length;
      const t = Math.max(...rows.map((i) => prefixes[i].length));
      const ids = new BigInt64Array(b * t).fill(BigInt(c.pad_token_id ?? 0));
      const positions = new BigInt64Array(b * t), mask = new Float32Array(b * t);
      rows.forEach((i, r) => {
        prefixes[i].forEach((id, j) => {
          ids[r * t + j] = BigInt(id);
          positions[r * t + j] = BigInt(j);
          mask[r * t + j] = 1;
        });
      });
      const r = await session.run({
        ...parameters,
        ...this.pastFeeds(rows.map((i) => out[i]), 0), // empty caches (P = 0): a prefill
        input_ids: tensor("int64", ids, [b, t]),
        position_ids: tensor("int64", positions, [b, t]),
        attention_mask: tensor("float32", mask, [b, t]),
      });
      await yieldToEventLoop();
      for (let l = 0; l < layers; l++) {
        for (const kind of ["key", "value"] as const) {
          const src = r[`new.${l}.${kind}`].data as Float32Array; // (B, Hkv, T, D)
          rows.forEach((i, row) => {
            const n = prefixes[i].length, dst = new Float32Array(hkv * n * d); // (Hkv, n, D)
            for (let h = 0; h < hkv; h++) {
              const at = (row * hkv + h) * t * d;
              dst.set(src.subarray(at, at + n * d), h * n * d);
            }
            out[i][l][kind] = dst;
          });
        }
      }
      a = e;
    }
    return out;
  }

  /**
   * One loss + gradient evaluation of `objective` over `samples`, with its scalar inputs from
   * `scalars` by name, its counts per micro-batch (`options.microBatches`) and ℓθ, H at
   * `options.temperature`. Throws PolicyError naming an input that is missing or has the wrong
   * number of values, or micro-batches that are not a partition of the samples.
   */
  async trainStep<X extends AnyObjective>(
    objective: X,
    input: TrainSample[],
    scalars: Readonly<Record<ScalarName<X>, number>> = {} as Record<ScalarName<X>, number>,
    options: TrainStepOptions = {},
  ): Promise<TrainStepResult<X>> {
    const samples = prepareSamples(input, this.config) as TrainSample[];
    const tokenInputs = objective.tokenInputs as readonly TokenInputName<X>[];
    samples.forEach((s, i) => checkInputs(s, i, tokenInputs));
    for (const name of objective.scalarInputs as readonly string[]) {
      const v = (scalars as Record<string, number>)[name];
      if (typeof v !== "number" || !Number.isFinite(v)) {
        throw new PolicyError(
          `Cannot run a train step of ${objective.name} as scalar input ${name} must be a finite number: current value is ${v}`,
        );
      }
    }
    const temperature = temperatureOf(options.temperature);
    const micro = options.microBatches ?? [samples.map((_, i) => i)];
    checkPartition(micro, samples.length);
    // Each count over the step (reported) and each sample's divisor M·max(1, N_m) (fed per token).
    const counts = {} as Record<string, number>;
    const divisors = {} as Record<string, Float64Array>;
    for (
      const [name, selector] of Object.entries(objective.counts as Record<string, string | null>)
    ) {
      counts[name] = 0;
      divisors[name] = new Float64Array(samples.length);
      for (const batch of micro) {
        const n = batch.reduce((k, i) => k + selectedTokens(samples[i], selector), 0);
        counts[name] += n;
        for (const i of batch) divisors[name][i] = micro.length * Math.max(1, n);
      }
    }
    const outputs = Object.fromEntries(Object.keys(objective.outputs).map((k) => [k, 0]));
    const grads: Parameters = new Map();
    const logprobs: Float32Array[] = new Array(samples.length);
    const scalar = (v: number) => tensor("float32", Float32Array.of(v), []);
    const scalarFeeds = Object.fromEntries(
      Object.entries(scalars as Record<string, number>).map(([k, v]) => [k, scalar(v)]),
    );
    const lora = this.opts.lora;
    let call = 0;
    for (const group of this.plan(samples)) {
      const packed = this.pack(samples, group);
      const rows = group.map((i) => samples[i]);
      const session = await this.session(
        `train_${objective.name}${temperatureKey(temperature)}`,
        packed.bucket,
        () =>
          buildTrainGraph(this.config, packed.bucket, { objective, lora, temperature }).toModel(),
      );
      if (lora && lora.dropout > 0) {
        const seed = ((options.dropoutSeed ?? 0) + call) >>> 0;
        scalarFeeds[LORA_DROPOUT_SEED] = tensor("int64", BigInt64Array.of(BigInt(seed)), []);
      }
      call++;
      const tokenFeeds = Object.fromEntries(tokenInputs.map((name) => [
        name,
        tensor("float32", packTokens(packed, rows.map((s) => s.inputs![name])), [
          packed.bucket.tokens,
        ]),
      ]));
      for (const [name, d] of Object.entries(divisors)) {
        const values = packTokens(packed, group.map((i) => d[i]));
        // the bucket's unused slots (mask 0) get divisor 1, not 0: 0/1, never 0/0
        for (let k = 0; k < values.length; k++) if (values[k] === 0) values[k] = 1;
        tokenFeeds[name] = tensor("float32", values, [packed.bucket.tokens]);
      }
      const r = await session.run({
        ...this.parameterFeeds(this.specsOf(packed)),
        ...this.baseFeeds(packed),
        loss_mask: tensor("float32", packed.lossMask, [packed.bucket.tokens]),
        ...tokenFeeds,
        ...scalarFeeds,
      });
      await yieldToEventLoop();
      for (const k of Object.keys(outputs)) outputs[k] += Number((r[k].data as Float32Array)[0]);
      this.accumulate(grads, r, this.opts.lora ? this.adapterSpecs : this.specsOf(packed));
      unpackTokens(packed, r.logprobs.data as Float32Array).forEach((lp, k) =>
        logprobs[group[k]] = lp
      );
    }
    return {
      outputs: outputs as Record<OutputName<X>, number>,
      counts: counts as Record<CountName<X>, number>,
      tokens: samples.reduce((n, s) => n + s.response.length, 0),
      grads: this.complete(grads),
      logprobs,
    };
  }

  /**
   * Sample continuations of `prompts` with the KV-cache decode graph (see generate.ts). For a
   * vision model, `opts.images[i]` holds the images of prompt i's `<image>` placeholders.
   */
  async generate(prompts: number[][], opts: GenerateOptions): Promise<Generation[]> {
    const session = await this.sessions.get(
      `decode:${this.key}`,
      () => buildDecodeGraph(this.config, { lastOnly: true, lora: this.opts.lora }).toModel(),
    );
    const parameters = this.inferenceFeeds();
    const withImages = opts.images?.some((x) => (x?.length ?? 0) > 0) ?? false;
    const vision = withImages && this.config.vision_config
      ? {
        session: await this.sessions.get(
          `decode_images:${this.key}`,
          () =>
            buildDecodeGraph(this.config, { lastOnly: true, images: true, lora: this.opts.lora })
              .toModel(),
        ),
        encode: (images: RgbImage[]) => this.encodeImages(images),
      }
      : undefined;
    return await generate(
      { config: this.config, session, parameters, vision },
      prompts,
      {
        maxBatch: this.opts.maxBatch,
        maxTokensPerCall: this.tokensPerCall(3), // forward only: ~⅓ of a train token's FLOPs
        samplerThreads: this.opts.samplerThreads ?? this.opts.threads ?? 2,
        ...opts,
      },
    );
  }

  /**
   * The decoder-width embeddings of `images` (vision models): (N·P, hidden_size) float32, image
   * by image, patch by patch — what replaces their image tokens in a prompt.
   */
  async encodeImages(images: RgbImage[]): Promise<Float32Array> {
    const v = this.config.vision_config;
    if (!v) {
      throw new PolicyError("Cannot encode images as the model must have a vision_config");
    }
    const np = (v.image_size / v.patch_size) ** 2, k = v.num_channels * v.patch_size ** 2;
    const pixels = new Float32Array(images.length * np * k);
    images.forEach((img, i) => pixels.set(preprocessImage(img, v), i * np * k));
    const session = await this.sessions.get(
      `encode:${this.key}`,
      () => buildEncodeGraph(this.config).toModel(),
    );
    const specs = parameterSpecs(this.config).slice(decoderParameterSpecs(this.config).length);
    const r = await session.run({
      ...this.parameterFeeds(specs),
      pixel_values: tensor("float32", pixels, [images.length, np, k]),
    });
    await yieldToEventLoop();
    return r.image_embeds.data as Float32Array;
  }

  /** Release this policy's sessions (shared caches are left to their owner). */
  async release(): Promise<void> {
    if (!this.opts.sessions) await this.sessions.release();
  }

  private plan(samples: Sample[], forwardOnly = false): number[][] {
    return planMicroBatches(
      samples,
      this.tokensPerCall(forwardOnly ? 3 : 1),
      this.opts.maxBatch ?? 64,
    );
  }
  /** Tokens per call: the option, or a 10¹¹ FLOP budget at 6·N FLOP per train token (× `scale`). */
  private tokensPerCall(scale: number): number {
    const budget = Math.round((scale * 1e11) / (6 * parameterCount(this.config)));
    return this.opts.maxTokensPerCall ??
      Math.min(MAX_TOKENS_PER_CALL * scale, Math.max(256, budget));
  }
  private pack(samples: Sample[], group: number[]) {
    const rows = group.map((i) => samples[i]);
    return packSamples(rows, bucketOf(rows), this.config.pad_token_id ?? 0, {
      config: this.config,
    });
  }
  private session(kind: string, b: Bucket, build: () => Uint8Array): Promise<ort.InferenceSession> {
    const images = b.images ? `:i${b.images}` : "";
    return this.sessions.get(
      `${kind}:${this.key}:b${b.batch}:t${b.length}:r${b.tokens}${images}`,
      build,
    );
  }
  /**
   * The parameters a packed batch's graph reads: all with image slots, else the decoder's; and
   * the adapter's with LoRA.
   */
  private specsOf(p: PackedBatch): ParameterSpec[] {
    const base = p.bucket.images ? parameterSpecs(this.config) : decoderParameterSpecs(this.config);
    return [...base, ...this.adapterSpecs];
  }
  /** Feeds of the no-gradient graphs (score over a cache, prefill, decode): decoder + adapter. */
  private inferenceFeeds(): Record<string, ort.Tensor> {
    return this.parameterFeeds([...decoderParameterSpecs(this.config), ...this.adapterSpecs]);
  }

  private parameterFeeds(specs: ParameterSpec[]): Record<string, ort.Tensor> {
    return Object.fromEntries(
      specs.map((s) => [s.name, tensor("float32", this.params.get(s.name)!, s.shape)]),
    );
  }
  private baseFeeds(p: PackedBatch): Record<string, ort.Tensor> {
    const dims = [p.bucket.batch, p.bucket.length];
    const feeds: Record<string, ort.Tensor> = {
      input_ids: tensor("int64", p.inputIds, dims),
      position_ids: tensor("int64", p.positionIds, dims),
      token_index: tensor("int64", p.tokenIndex, [p.bucket.tokens]),
      targets: tensor("int64", p.targets, [p.bucket.tokens]),
      attention_mask: tensor("float32", p.attentionMask, dims),
    };
    if (p.bucket.images) {
      const v = this.config.vision_config!;
      const np = (v.image_size / v.patch_size) ** 2, k = v.num_channels * v.patch_size ** 2;
      feeds.pixel_values = tensor("float32", p.pixelValues!, [p.bucket.images, np, k]);
      feeds.merge_index = tensor("int64", p.mergeIndex!, dims);
    }
    return feeds;
  }
  /** Zero gradients for parameters no call reached (an empty sample list). */
  private complete(grads: Parameters): Parameters {
    for (const s of this.trainableSpecs()) {
      if (!grads.has(s.name)) {
        grads.set(
          s.name,
          new Float32Array(s.shape.reduce((a, b) => a * b, 1)),
        );
      }
    }
    return grads;
  }
  /** grads += this call's gradients of `specs` (the first call's are adopted). */
  private accumulate(
    grads: Parameters,
    r: ort.InferenceSession.ReturnType,
    specs: ParameterSpec[],
  ): void {
    for (const s of specs) {
      const d = r[`grad.${s.name}`].data as Float32Array;
      const acc = grads.get(s.name);
      if (!acc) grads.set(s.name, d);
      else for (let i = 0; i < acc.length; i++) acc[i] += d[i];
    }
  }
}

/** A prompt prefix's keys (after RoPE) and values per layer, each (Hkv, n, D) float32. */
type PrefixCache = { key: Float32Array; value: Float32Array }[];

/**
 * For `Policy.scoreSharedPrefixes`: each sample's group index (samples in no group get a group of
 * their own, appended to `members`) and each group's shared prefix length: the longest common
 * token prefix of its prompts, at most every prompt's length − 1 (a suffix keeps ≥ 1 prompt
 * token, the one that predicts the first response token).
 */
function sharedPrefixes(input: Sample[], groups: readonly (readonly number[])[]) {
  const groupOf = new Int32Array(input.length).fill(-1);
  const members: number[][] = groups.map((g) => [...g]);
  members.forEach((g, k) => g.forEach((i) => (groupOf[i] = k)));
  input.forEach((_, i) => {
    if (groupOf[i] < 0) groupOf[i] = members.push([i]) - 1;
  });
  const prefixLength = members.map((g) => {
    const first = input[g[0]].prompt;
    let n = Math.min(...g.map((i) => input[i].prompt.length - 1));
    for (const i of g) {
      const p = input[i].prompt;
      let k = 0;
      while (k < n && p[k] === first[k]) k++;
      n = k;
    }
    return n;
  });
  return { groupOf, prefixLength, members };
}

/** The temperature of a scoring pass: 1 when absent; PolicyError unless finite and > 0. */
function temperatureOf(t: number | undefined): number {
  const value = t ?? 1;
  if (!(Number.isFinite(value) && value > 0)) {
    throw new PolicyError(
      `Cannot score tokens as the temperature must be a finite number > 0: current value is ${value}`,
    );
  }
  return value;
}

/** The session-name suffix of a temperature: "" at 1 (the graph is unchanged), else `@T<t>`. */
function temperatureKey(t: number): string {
  return t === 1 ? "" : `@T${t}`;
}

/** Throws PolicyError unless `batches` holds each of 0..n−1 exactly once, none of them empty. */
function checkPartition(batches: readonly (readonly number[])[], n: number): void {
  const seen = new Uint8Array(n);
  let count = 0;
  batches.forEach((b, k) => {
    if (b.length === 0 && n > 0) {
      throw new PolicyError(
        `Cannot run a train step as micro-batch ${k} must hold at least one sample: it is empty`,
      );
    }
    b.forEach((i) => {
      if (!(Number.isInteger(i) && i >= 0 && i < n) || seen[i]) {
        throw new PolicyError(
          `Cannot run a train step as micro-batch ${k} must hold sample indices in [0, ${n}), each in one micro-batch: current value is ${i}`,
        );
      }
      seen[i] = 1;
      count++;
    });
  });
  if (count !== n) {
    throw new PolicyError(
      `Cannot run a train step as the micro-batches must hold every sample: ${
        n - count
      } of ${n} are in none`,
    );
  }
}

/** Throws PolicyError unless every index of `groups` is a sample's (< n) and in one group only. */
function checkGroups(groups: readonly (readonly number[])[], n: number): void {
  const seen = new Uint8Array(n);
  groups.forEach((g, k) =>
    g.forEach((i) => {
      if (!(Number.isInteger(i) && i >= 0 && i < n) || seen[i]) {
        throw new PolicyError(
          `Cannot score shared prefixes as group ${k} must hold sample indices in [0, ${n}), each in one group: current value is ${i}${
            Number.isInteger(i) && i >= 0 && i < n ? " (already in a group)" : ""
          }`,
        );
      }
      seen[i] = 1;
    })
  );
}

/**
 * Scores of distinct inputs (D,) spread back to the N samples they stand for (`slot[i]`: sample
 * i's input); a repeated input gets a copy, so no two samples share an array.
 */
function spreadScores(scores: TokenScores, slot: Int32Array): TokenScores {
  const used = new Uint8Array(scores.logprobs.length);
  const out: TokenScores = { logprobs: [], entropy: [] };
  for (const k of slot) {
    out.logprobs.push(used[k] ? scores.logprobs[k].slice() : scores.logprobs[k]);
    out.entropy.push(used[k] ? scores.entropy[k].slice() : scores.entropy[k]);
    used[k] = 1;
  }
  return out;
}

/** Throws PolicyError unless sample `i` has every token input with one value per response token. */
function checkInputs(s: TrainSample, i: number, names: readonly string[]): void {
  for (const name of names) {
    const v = s.inputs?.[name];
    const ok = typeof v === "number" ? Number.isFinite(v) : v?.length === s.response.length;
    if (!ok) {
      throw new PolicyError(
        `Cannot run a train step as sample ${i}'s input ${name} must be a number or ${s.response.length} values: current value is ${
          v === undefined ? "missing" : typeof v === "number" ? v : `${v.length} values`
        }`,
      );
    }
  }
}

/** Response tokens of `s` where its input `selector` is > 0 (all of them when null). */
function selectedTokens(s: TrainSample, selector: string | null): number {
  if (selector === null) return s.response.length;
  const v = s.inputs![selector];
  if (typeof v === "number") return v > 0 ? s.response.length : 0;
  return v.reduce((n, x) => n + (x > 0 ? 1 : 0), 0);
}

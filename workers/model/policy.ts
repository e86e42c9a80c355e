/**
 * The policy the SEED trainer calls: a decoder config, its parameters (mutated in place by the
 * optimizer) and cached onnxruntime sessions for the train, score and decode graphs.
 *
 * Samples are (prompt, response) token ids of any lengths; they are packed into shape buckets
 * and micro-batches of at most `maxTokensPerCall` padded tokens (so each `run()` stays short),
 * and per-token results come back per sample with one entry per response token. Losses are
 * token means over all samples of a call; micro-batch gradients are combined with weights
 * (masked tokens in the micro-batch) / (masked tokens in the call), which is exact.
 *
 * Vision models (a config with `vision_config`): samples may carry `images`, one per `<image>`
 * placeholder of the prompt (expanded here with `expandImageTokens`). A micro-batch with images
 * runs the graphs whose bucket has image slots (the encoder in the graph, trained end to end);
 * one without images runs the text-only graphs, and the vision parameters get zero gradient
 * from it. Text-only models behave exactly as before.
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
  type PackedBatch,
  packSamples,
  packTokens,
  planMicroBatches,
  prepareSamples,
  type Sample,
  unpackTokens,
} from "./batch.ts";
import {
  type Bucket,
  buildDecodeGraph,
  buildScoreGraph,
  buildTrainGraph,
  SEED_COEFFICIENT_INPUTS,
  SEED_OUTPUTS,
} from "./llama.ts";
import { generate, type GenerateOptions, type Generation } from "./generate.ts";
import { buildEncodeGraph } from "./vision.ts";
import { preprocessImage, type RgbImage } from "./image.ts";

/** A sample of the RL update, with per-response-token inputs (length = response length). */
export interface RlSample extends Sample {
  /** A, one per sample (broadcast to its tokens) or one per response token. */
  advantage: number | Float32Array;
  /** ℓold per response token. */
  oldLogprobs: Float32Array;
  /** ℓref per response token. */
  refLogprobs: Float32Array;
  /** ℓT per response token, or null when the trajectory has no parsed skill (no OPD signal). */
  teacherLogprobs: Float32Array | null;
}

/** SEED coefficients (DESIGN.md §8 defaults). `opdCoef: 0` is GRPO. */
export interface SeedCoefficientValues {
  clipEps: number;
  dualClip: number;
  gateBeta: number;
  opdCoef: number;
  klCoef: number;
  entropyCoef: number;
}

/** DESIGN.md §8: ε 0.2, c 3, β 5, λ_opd 0.01, kl 0.01, entropy 0.001. */
export const DEFAULT_SEED_COEFFICIENTS: SeedCoefficientValues = {
  clipEps: 0.2,
  dualClip: 3,
  gateBeta: 5,
  opdCoef: 0.01,
  klCoef: 0.01,
  entropyCoef: 0.001,
};

/** Per-sample, per-response-token log-probs and entropies. */
export interface TokenScores {
  logprobs: Float32Array[];
  entropy: Float32Array[];
}

/** Scalar results of a SEED train step (token means over the call's masked tokens). */
export interface SeedStepStats {
  loss: number;
  pgLoss: number;
  opdLoss: number;
  klLoss: number;
  entropy: number;
  clipFrac: number;
  dualClipFrac: number;
  /** Over tokens with a teacher signal. */
  gateMean: number;
  deltaMean: number;
  /** Masked (response) tokens in the step. */
  tokens: number;
}

/** Policy options: engine settings plus call sizing. */
export interface PolicyOptions extends EngineOptions {
  /**
   * Most padded tokens (rows × bucket length) per onnxruntime train call; score calls and
   * generation prefill windows take 3× as many (forward only). Default: a ~10¹¹ FLOP train call
   * (≈ 1–2 s on 2 cores), `1e11 / (6 · parameters)`, within [256, 8192].
   */
  maxTokensPerCall?: number;
  /** Most rows per call (default 64). */
  maxBatch?: number;
  /** Share sessions with other policies of the same config (e.g. θ_old and π_ref). */
  sessions?: SessionCache;
}

/** A policy cannot be built from the given config and parameters. */
export class PolicyError extends Error {
  override name = "PolicyError";
}

/** A Llama/Qwen2 policy on onnxruntime. */
export class Policy {
  readonly sessions: SessionCache;
  private readonly key: string;

  constructor(
    readonly config: DecoderConfig,
    readonly params: Parameters,
    readonly opts: PolicyOptions = {},
  ) {
    for (const s of parameterSpecs(config)) {
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
    this.key = JSON.stringify(config);
  }

  /**
   * The same model with other parameters (θ_old, π_ref, a teacher), sharing this policy's
   * options and compiled sessions (parameters are graph inputs, so graphs are identical).
   */
  withParameters(params: Parameters): Policy {
    return new Policy(this.config, params, { ...this.opts, sessions: this.sessions });
  }

  /** Per-token log-probs and entropies of each sample's response (no gradient). */
  async score(input: Sample[]): Promise<TokenScores> {
    const samples = prepareSamples(input, this.config);
    const out: TokenScores = {
      logprobs: new Array(samples.length),
      entropy: new Array(samples.length),
    };
    for (const group of this.plan(samples, true)) {
      const packed = this.pack(samples, group);
      const session = await this.session(
        "score",
        packed.bucket,
        () => buildScoreGraph(this.config, packed.bucket).toModel(),
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

  /** One SEED (or GRPO, opdCoef 0) loss + gradient evaluation over `samples`. */
  async trainStep(
    input: RlSample[],
    coefs: Partial<SeedCoefficientValues> = {},
  ): Promise<SeedStepStats & { grads: Parameters; logprobs: Float32Array[] }> {
    const samples = prepareSamples(input, this.config);
    const c = { ...DEFAULT_SEED_COEFFICIENTS, ...coefs };
    const total = samples.reduce((n, s) => n + s.response.length, 0);
    const teacherTotal = samples.reduce(
      (n, s) => n + (s.teacherLogprobs ? s.response.length : 0),
      0,
    );
    const stats: SeedStepStats = {
      loss: 0,
      pgLoss: 0,
      opdLoss: 0,
      klLoss: 0,
      entropy: 0,
      clipFrac: 0,
      dualClipFrac: 0,
      gateMean: 0,
      deltaMean: 0,
      tokens: total,
    };
    const grads: Parameters = new Map();
    const logprobs: Float32Array[] = new Array(samples.length);
    const scalar = (v: number) => tensor("float32", Float32Array.of(v), []);
    const coefValues = [c.clipEps, c.dualClip, c.gateBeta, c.opdCoef, c.klCoef, c.entropyCoef];
    for (const group of this.plan(samples)) {
      const packed = this.pack(samples, group);
      const rows = group.map((i) => samples[i]);
      const zeros = (s: RlSample) => new Float32Array(s.response.length);
      const perToken = (vals: (Float32Array | number)[]) =>
        tensor("float32", packTokens(packed, vals), [packed.bucket.tokens]);
      const session = await this.session(
        "train_seed",
        packed.bucket,
        () => buildTrainGraph(this.config, packed.bucket, { objective: "seed" }).toModel(),
      );
      const r = await session.run({
        ...this.parameterFeeds(this.specsOf(packed)),
        ...this.baseFeeds(packed),
        loss_mask: tensor("float32", packed.lossMask, [packed.bucket.tokens]),
        advantages: perToken(rows.map((s) => s.advantage)),
        old_logprobs: perToken(rows.map((s) => s.oldLogprobs)),
        teacher_logprobs: perToken(rows.map((s) => s.teacherLogprobs ?? zeros(s))),
        ref_logprobs: perToken(rows.map((s) => s.refLogprobs)),
        opd_mask: perToken(rows.map((s) => (s.teacherLogprobs ? 1 : 0))),
        ...Object.fromEntries(SEED_COEFFICIENT_INPUTS.map((n, i) => [n, scalar(coefValues[i])])),
      });
      await yieldToEventLoop();
      const n = rows.reduce((a, s) => a + s.response.length, 0);
      const m = rows.reduce((a, s) => a + (s.teacherLogprobs ? s.response.length : 0), 0);
      const w = total > 0 ? n / total : 0, wt = teacherTotal > 0 ? m / teacherTotal : 0;
      const v = (name: string) => Number((r[name].data as Float32Array)[0]);
      const keys = [
        "loss",
        "pgLoss",
        "opdLoss",
        "klLoss",
        "entropy",
        "clipFrac",
        "dualClipFrac",
      ] as const;
      keys.forEach((k, i) => (stats[k] += w * v(SEED_OUTPUTS[i])));
      stats.gateMean += wt * v("gate_mean");
      stats.deltaMean += wt * v("delta_mean");
      this.accumulate(grads, r, w, this.specsOf(packed));
      unpackTokens(packed, r.logprobs.data as Float32Array).forEach((
        lp,
        k,
      ) => (logprobs[group[k]] = lp));
    }
    return { ...stats, grads: this.complete(grads), logprobs };
  }

  /** One SFT loss (mean NLL of response tokens) + gradient evaluation over `samples`. */
  async sftStep(input: Sample[]): Promise<{ loss: number; tokens: number; grads: Parameters }> {
    const samples = prepareSamples(input, this.config);
    const total = samples.reduce((n, s) => n + s.response.length, 0);
    const grads: Parameters = new Map();
    let loss = 0;
    for (const group of this.plan(samples)) {
      const packed = this.pack(samples, group);
      const session = await this.session(
        "train_sft",
        packed.bucket,
        () => buildTrainGraph(this.config, packed.bucket, { objective: "sft" }).toModel(),
      );
      const r = await session.run({
        ...this.parameterFeeds(this.specsOf(packed)),
        ...this.baseFeeds(packed),
        loss_mask: tensor("float32", packed.lossMask, [packed.bucket.tokens]),
      });
      await yieldToEventLoop();
      const w = total > 0 ? group.reduce((a, i) => a + samples[i].response.length, 0) / total : 0;
      loss += w * Number((r.loss.data as Float32Array)[0]);
      this.accumulate(grads, r, w, this.specsOf(packed));
    }
    return { loss, tokens: total, grads: this.complete(grads) };
  }

  /**
   * Sample continuations of `prompts` with the KV-cache decode graph (see generate.ts). For a
   * vision model, `opts.images[i]` holds the images of prompt i's `<image>` placeholders.
   */
  async generate(prompts: number[][], opts: GenerateOptions): Promise<Generation[]> {
    const session = await this.sessions.get(
      `decode:${this.key}`,
      () => buildDecodeGraph(this.config, { lastOnly: true }).toModel(),
    );
    const parameters = this.parameterFeeds(decoderParameterSpecs(this.config));
    const withImages = opts.images?.some((x) => (x?.length ?? 0) > 0) ?? false;
    const vision = withImages && this.config.vision_config
      ? {
        session: await this.sessions.get(
          `decode_images:${this.key}`,
          () => buildDecodeGraph(this.config, { lastOnly: true, images: true }).toModel(),
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
    return this.opts.maxTokensPerCall ?? Math.min(8192 * scale, Math.max(256, budget));
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
  /** The parameters a packed batch's graph reads: all with image slots, else the decoder's. */
  private specsOf(p: PackedBatch): ParameterSpec[] {
    return p.bucket.images ? parameterSpecs(this.config) : decoderParameterSpecs(this.config);
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
    for (const s of parameterSpecs(this.config)) {
      if (!grads.has(s.name)) {
        grads.set(
          s.name,
          new Float32Array(s.shape.reduce((a, b) => a * b, 1)),
        );
      }
    }
    return grads;
  }
  /** grads += w · (this call's gradients of `specs`); the first call's are adopted when w = 1. */
  private accumulate(
    grads: Parameters,
    r: ort.InferenceSession.ReturnType,
    w: number,
    specs: ParameterSpec[],
  ): void {
    for (const s of specs) {
      const d = r[`grad.${s.name}`].data as Float32Array;
      const acc = grads.get(s.name);
      if (!acc) grads.set(s.name, w === 1 ? d : d.map((x) => w * x));
      else for (let i = 0; i < acc.length; i++) acc[i] += w * d[i];
    }
  }
}

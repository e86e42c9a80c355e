/**
 * Batched generation with the decode graph and a KV cache: left-pad the prompts, prefill them
 * in one call, then one call per new token for every unfinished sequence at once. A sequence
 * finishes on an EOS token, a stop string in its decoded text, its own token limit, or (under a
 * `constraint`, e.g. a JSON schema) once its constrained text is complete; finished
 * sequences leave the batch (their rows are dropped from the KV cache once they make up a
 * quarter of it), so later steps cost about what is still running. The cache lives in host
 * buffers the graph reads without a copy (kv_cache.ts). Sampling uses one seeded `Rng` per sequence
 * (derived from the seed and the sequence's index), so a sequence's draws do not depend on which
 * others share its batch.
 *
 * Jump-forward decoding (structured generation, `jumpForward`, on by default): where a row's
 * constraint forces the next text (`TokenConstraint.forcedTokens`, e.g. the fixed words of a
 * skill sentence or the JSON punctuation), its tokens are appended without a draw. Those forced
 * before the first draw join the row's prompt in the prefill; later ones are fed in the next
 * decode call together with the drawn token, each row's pending tokens LEFT-padded to the
 * longest (pad id, position 0, attention mask 0), so that the last column — the only one whose
 * logits the graph returns — is each row's newest token. A row draws again only once all its
 * tokens are in the cache; a call feeds at most `maxTokensPerCall / rows` columns. Decode calls
 * then number about the real choices instead of the tokens (SGLang's compressed finite state
 * machine: Zheng et al. 2024, arXiv 2312.07104, §4). The text changes only where the model
 * would have spelled the forced text in other tokens.
 *
 * Images (vision models): `opts.images[i]` are the images of prompt i's `<image>` placeholders,
 * in order. The prompt's placeholders are expanded (`expandImageTokens`), the group's images
 * are encoded once (`DecodeRunner.vision.encode`), and prefill windows that hold image tokens
 * run the decode graph that takes image embeddings (`vision.session`); the KV cache then holds
 * the images' keys and values, and decoding continues text-only with the plain decode graph.
 */
import type * as ort from "onnxruntime-node";
import { tensor, yieldToEventLoop } from "../engine/mod.ts";
import type { DecoderConfig } from "./config.ts";
import { countImageTokens, expandImageTokens, numImageTokens, type RgbImage } from "./image.ts";
import {
  choiceRng,
  type Rng,
  sampleToken,
  stopStringHit,
  type TokenConstraint,
} from "./sampling.ts";
import { KvCache } from "./kv_cache.ts";
import { SamplerThreads } from "./sampler_threads.ts";

/** Options of `generate`. */
export interface GenerateOptions {
  /** New-token limit, one for all or one per prompt. */
  maxNewTokens: number | number[];
  /** Arg-max decoding (ignores temperature, topP and seed). Default false. */
  greedy?: boolean;
  /** Softmax temperature (default 1). */
  temperature?: number;
  /** Nucleus mass in (0, 1] (default 1: no truncation). */
  topP?: number;
  /** Seed of the sampling streams (default 0). */
  seed?: number;
  /** Token ids that end a sequence (kept as its last token). Default: the config's EOS. */
  eosTokenIds?: number[];
  /** Strings that end a sequence once they appear in its decoded text (needs `detokenize`). */
  stop?: string[];
  /** Token ids → text, for stop strings and `Generation.text`. */
  detokenize?: (ids: number[]) => string;
  /**
   * Most new tokens (rows × columns) per prefill call; longer prompts are prefilled in windows
   * (default: unbounded). Policy sets it from a FLOP budget so each call stays short.
   */
  maxTokensPerCall?: number;
  /**
   * Most sequences decoded together (default 64); more prompts run in consecutive groups of
   * similar prompt length. Results do not depend on the grouping beyond float rounding.
   */
  maxBatch?: number;
  /**
   * Vision models: the images of each prompt's `<image>` placeholders, in order (index i for
   * prompt i; missing, null or empty for a prompt without images). Default: no images.
   */
  images?: (RgbImage[] | null | undefined)[];
  /**
   * Structured generation: the constraint of prompt i's sequence (a fresh one per call), or
   * null for none. Its `maskLogits` runs on the row of logits before each draw (greedy or
   * sampled), and the sequence stops with finish reason `stop` once `accept` says the
   * constrained text is complete. Default: no constraint.
   */
  constraint?: (index: number) => TokenConstraint | null;
  /**
   * Prefill prompts that begin with the same tokens (e.g. the instruction block every analyzer
   * prompt of one outcome starts with) once per common prefix instead of once per prompt
   * (`prefixClasses` picks the prefixes); each row copies its prefix's keys and values. Same
   * results as without it up to float rounding. Ignored for prompts with images. Default false.
   */
  sharePrefixes?: boolean;
  /**
   * Jump-forward decoding under constraints that offer `forcedTokens` (default true): the
   * tokens a constraint forces are appended without a draw — those before the first draw go
   * into the prompt's prefill, later ones are fed in the next decode call together with the
   * drawn token (see module doc). False draws every token.
   */
  jumpForward?: boolean;
  /**
   * Threads that draw a step's tokens (default 1: this one): large batches over a large
   * vocabulary are split between this thread and `samplerThreads − 1` workers
   * (sampler_threads.ts), with the same tokens as on one thread.
   */
  samplerThreads?: number;
}

/** Why a sequence stopped (`stop`: a stop string, or its constraint completed). */
export type FinishReason = "eos" | "stop" | "length";

/** One generated continuation. */
export interface Generation {
  /** New token ids (an EOS that ended it included). */
  tokens: number[];
  finishReason: FinishReason;
  /** Decoded text, cut right after the stop string that ended it (when `detokenize` is given). */
  text?: string;
}

/** Thrown on unusable generation inputs. */
export class GenerateError extends Error {
  override name = "GenerateError";
}

/** What `generate` needs from a policy: the decode session and the parameter feeds. */
export interface DecodeRunner {
  config: DecoderConfig;
  /** Session of `buildDecodeGraph(config, { lastOnly: true })`. */
  session: ort.InferenceSession;
  /** One tensor per decoder parameter, by HF name. */
  parameters: Record<string, ort.Tensor>;
  /** Vision models, needed for prompts with images. */
  vision?: {
    /** Session of `buildDecodeGraph(config, { lastOnly: true, images: true })`. */
    session: ort.InferenceSession;
    /** Images → their embeddings (N·P, hidden_size), image by image, patch by patch. */
    encode: (images: RgbImage[]) => Promise<Float32Array>;
  };
}

/**
 * Generate continuations of prompts `input` (token ids, each non-empty), in prompt order; with
 * `opts.images`, prompts holding `<image>` placeholders are expanded first (`expandImageTokens`).
 * @throws {GenerateError} on empty prompts, bad limits, or images a prompt or model cannot take.
 */
export async function generate(
  runner: DecodeRunner,
  input: number[][],
  opts: GenerateOptions,
): Promise<Generation[]> {
  const prompts = withImageTokens(runner, input, opts.images ?? []);
  const limits = prompts.map((
    _,
    i,
  ) => (Array.isArray(opts.maxNewTokens) ? opts.maxNewTokens[i] : opts.maxNewTokens));
  prompts.forEach((p, i) => {
    if (p.length === 0) {
      throw new GenerateError(
        `Cannot generate from prompt ${i} as prompts must be non-empty: it has 0 tokens`,
      );
    }
    if (!(Number.isInteger(limits[i]) && limits[i] >= 0)) {
      throw new GenerateError(
        `Cannot generate for prompt ${i} as maxNewTokens must be an integer ≥ 0: current value is ${
          limits[i]
        }`,
      );
    }
  });
  if (opts.stop?.length && !opts.detokenize) {
    throw new GenerateError("Cannot check stop strings as detokenize must be given");
  }
  const out: Generation[] = new Array(prompts.length);
  const group = opts.maxBatch ?? 64;
  // prompts of similar length share a group, so left padding wastes little prefill work
  const order = prompts.map((_, i) => i).sort((a, b) => prompts[a].length - prompts[b].length);
  const threads = opts.samplerThreads ?? 1;
  const sampler = threads > 1 ? new SamplerThreads(threads) : null;
  try {
    for (let start = 0; start < order.length; start += group) {
      const idx = order.slice(start, start + group);
      const done = await generateGroup(runner, idx, prompts, limits, { ...opts, sampler });
      idx.forEach((i, k) => (out[i] = done[k]));
    }
  } finally {
    sampler?.close();
  }
  return out;
}

/** One running sequence. */
interface Sequence {
  index: number;
  limit: number;
  rng: Rng;
  tokens: number[];
  /** How many of `tokens` are in the KV cache (the rest are fed in the next call). */
  fed: number;
  constraint: TokenConstraint | null;
  finish?: FinishReason;
  text?: string;
  /** Attention mask of its filled cache slots (1 = real token, 0 = left padding). */
  mask: number[];
  nextPosition: number;
}

async function generateGroup(
  runner: DecodeRunner,
  indices: number[],
  prompts: number[][],
  limits: number[],
  opts: GenerateOptions & { sampler: SamplerThreads | null },
): Promise<Generation[]> {
  const c = runner.config;
  const { sampler } = opts;
  const eos = new Set(opts.eosTokenIds ?? (c.eos_token_id === null ? [] : [c.eos_token_id]));
  const sample = {
    greedy: opts.greedy ?? false,
    temperature: opts.temperature ?? 1,
    topP: opts.topP ?? 1,
  };
  const pad = c.pad_token_id ?? 0;
  const seqs: Sequence[] = indices.map((i) => ({
    index: i,
    limit: limits[i],
    rng: choiceRng(opts.seed ?? 0, i),
    tokens: [],
    fed: 0,
    constraint: opts.constraint?.(i) ?? null,
    mask: [],
    nextPosition: 0,
  }));
  for (const s of seqs) if (s.limit === 0) s.finish = "length";
  /** Appends `token` to `s` (drawn or forced) and notes whether it ends the sequence. */
  const take = (s: Sequence, token: number) => {
    s.tokens.push(token);
    s.finish = s.constraint?.accept(token) ? "stop" : finishReason(s, token, eos, opts);
  };
  /** Jump-forward: appends the tokens `s`'s constraint forces next. */
  const jump = (s: Sequence) => {
    if (opts.jumpForward === false || !s.constraint?.forcedTokens) return;
    for (const token of s.constraint.forcedTokens(s.limit - s.tokens.length)) {
      if (s.finish) break;
      take(s, token);
    }
  };
  for (const s of seqs) if (!s.finish) jump(s); // forced text at the start joins the prefill
  if (seqs.every((s) => s.finish)) return seqs.map((s) => result(s, opts));

  const inputs: number[][] = []; // by prompt index: the prompt and its forced start
  for (const s of seqs) inputs[s.index] = [...prompts[s.index], ...s.tokens];
  const chunk = Math.max(1, Math.floor((opts.maxTokensPerCall ?? Infinity) / seqs.length));
  // ---- shared prefixes (opt-in): each class's prefix is prefilled once, in one row of its own
  // (left-padded to the longest, M slots), and copied into its members' rows: row r then holds
  // [M − p_r empty slots, its prefix's p_r slots] and only its suffix is prefilled below
  const withImages = seqs.some((s) => (opts.images?.[s.index]?.length ?? 0) > 0);
  const classes = opts.sharePrefixes && !withImages
    ? prefixClasses(seqs.map((s) => inputs[s.index]))
    : null;
  let cache = new KvCache(c, seqs.length);
  const prefixLength = seqs.map(() => 0);
  if (classes && classes.prefixes.length > 0) {
    const prefixCache = await prefillRows(runner, classes.prefixes, chunk);
    const none = new KvCache(c, 1); // nothing to copy for a row outside every class
    cache = KvCache.gather(seqs.map((_, r) => {
      const k = classes.classOf[r];
      return k < 0 ? { cache: none, rows: [0] } : { cache: prefixCache, rows: [k] };
    }));
    seqs.forEach((s, r) => {
      const k = classes.classOf[r];
      prefixLength[r] = k < 0 ? 0 : classes.prefixes[k].length;
      s.mask = Array.from(
        { length: cache.used },
        (_, j) => j < cache.used - prefixLength[r] ? 0 : 1,
      );
    });
  }
  // ---- prefill: left-padded prompts (B, W) with their forced starts (their suffixes after a
  // shared prefix), positions counting real tokens only, fed in windows of at most `chunk`
  // columns so each call stays short
  const width = Math.max(...seqs.map((s, r) => inputs[s.index].length - prefixLength[r]));
  const ids: number[][] = [], pos: number[][] = [], mask: number[][] = [];
  seqs.forEach((s, r) => {
    const p = inputs[s.index].slice(prefixLength[r]), padCount = width - p.length;
    const first = prefixLength[r];
    ids.push(Array.from({ length: width }, (_, j) => (j < padCount ? pad : p[j - padCount])));
    pos.push(Array.from({ length: width }, (_, j) => j < padCount ? 0 : first + j - padCount));
    mask.push(Array.from({ length: width }, (_, j) => (j < padCount ? 0 : 1)));
    s.nextPosition = inputs[s.index].length;
    s.fed = s.tokens.length;
  });
  let rows = seqs; // sequences whose rows are in `cache`, in order (finished ones may linger)
  /** Run `t` new columns per row through the graph, append them to the cache → logits (B, V). */
  const feed = async (
    step: { ids: number[][]; pos: number[][]; mask: number[][]; image?: WindowImages },
  ) => {
    const t = step.ids[0].length, k = cache.capacity + t;
    const keyMask = new Float32Array(rows.length * k);
    rows.forEach((
      s,
      b,
    ) => (keyMask.set(s.mask, b * k), keyMask.set(step.mask[b], b * k + cache.capacity)));
    const session = step.image ? runner.vision!.session : runner.session;
    const r = await session.run({
      ...runner.parameters,
      ...cache.feeds(),
      ...(step.image
        ? {
          image_embeds: tensor("float32", step.image.embeds, [step.image.count, c.hidden_size]),
          merge_index: tensor("int64", step.image.index, [rows.length, t]),
        }
        : {}),
      input_ids: tensor("int64", BigInt64Array.from(step.ids.flat(), BigInt), [rows.length, t]),
      position_ids: tensor("int64", BigInt64Array.from(step.pos.flat(), BigInt), [rows.length, t]),
      attention_mask: tensor("float32", keyMask, [rows.length, k]),
    });
    await yieldToEventLoop();
    cache.append(r, t);
    rows.forEach((s, b) => s.mask.push(...step.mask[b]));
    return r.logits.data as Float32Array;
  };
  const images = await encodeGroup(runner, seqs, inputs, opts.images ?? []);
  let logits: Float32Array = new Float32Array(0);
  for (let a = 0; a < width; a += chunk) {
    const cols = (m: number[][]) => m.map((row) => row.slice(a, a + chunk));
    const step = { ids: cols(ids), pos: cols(pos), mask: cols(mask) };
    logits = await feed({ ...step, image: images?.window(a, step.ids[0].length) });
  }
  const v = c.vocab_size;
  while (true) {
    // a row draws once all its tokens are in the cache: its logits are those of its last one
    const drawing = rows.map((s, b) => ({ s, b })).filter(({ s }) =>
      !s.finish && s.fed >= s.tokens.length
    );
    const draws = drawing.map(({ s, b }) => {
      const row = logits.subarray(b * v, (b + 1) * v); // (V,)
      s.constraint?.maskLogits(row, s.limit - s.tokens.length);
      return { logits: row, rng: s.rng };
    });
    // rows are independent (each its own stream): drawn on several threads, the same tokens
    const tokens = sampler
      ? await sampler.draw(draws, sample)
      : draws.map((d) => sampleToken(d.logits, sample, d.rng));
    drawing.forEach(({ s }, k) => {
      take(s, tokens[k]);
      if (!s.finish) jump(s);
    });
    // ---- finished rows leave the cache once they are a quarter of it (each removal copies it)
    const alive = rows.map((s, b) => (s.finish ? -1 : b)).filter((b) => b >= 0);
    if (alive.length === 0) break;
    if (rows.length - alive.length >= Math.max(1, rows.length / 4)) {
      cache.keepRows(alive);
      rows = alive.map((b) => rows[b]);
    }
    logits = await feed(pendingStep(rows, pad, chunk));
  }
  return seqs.map((s) => result(s, opts));
}

/**
 * The next decode call's columns (B, T): each unfinished row's tokens not yet in the cache (a
 * drawn token and the tokens forced after it; at most `most` of them, the rest wait for the
 * next call), LEFT-padded to the longest (pad id, position 0, attention mask 0), so that the last
 * column is each row's newest token (the graph returns last-column logits); finished rows are
 * all padding. T ≥ 1. Advances each row's `fed` and `nextPosition`.
 */
function pendingStep(rows: Sequence[], pad: number, most: number) {
  const pending = rows.map((s) => s.finish ? [] : s.tokens.slice(s.fed, s.fed + Math.max(1, most)));
  const t = Math.max(1, ...pending.map((p) => p.length));
  const ids: number[][] = [], pos: number[][] = [], mask: number[][] = [];
  rows.forEach((s, b) => {
    const p = pending[b], padCount = t - p.length;
    ids.push(Array.from({ length: t }, (_, j) => (j < padCount ? pad : p[j - padCount])));
    pos.push(Array.from({ length: t }, (_, j) => (j < padCount ? 0 : s.nextPosition++)));
    mask.push(Array.from({ length: t }, (_, j) => (j < padCount ? 0 : 1)));
    s.fed += p.length;
  });
  return { ids, pos, mask };
}

/** The `Generation` of a finished sequence. */
function result(s: Sequence, opts: GenerateOptions): Generation {
  return {
    tokens: s.tokens,
    finishReason: s.finish!,
    ...(opts.detokenize ? { text: s.text ?? opts.detokenize(s.tokens) } : {}),
  };
}

/** Prompts with their images' placeholders expanded; checks images against the runner. */
function withImageTokens(
  runner: DecodeRunner,
  prompts: number[][],
  images: (RgbImage[] | null | undefined)[],
): number[][] {
  const c = runner.config;
  return prompts.map((p, i) => {
    const n = images[i]?.length ?? 0;
    if (n === 0) {
      const found = c.vision_config ? countImageTokens(p, c) : 0;
      if (found === 0) return p;
      throw new GenerateError(
        `Cannot generate from prompt ${i} as its ${found} image tokens need images: it has none`,
      );
    }
    if (!c.vision_config || !runner.vision) {
      throw new GenerateError(
        `Cannot generate from prompt ${i} with images as the model must have a vision_config and a vision runner`,
      );
    }
    const expanded = expandImageTokens(p, c), per = numImageTokens(c);
    const found = countImageTokens(expanded, c);
    if (found !== n * per) {
      throw new GenerateError(
        `Cannot generate from prompt ${i} as it must hold ${n} image run(s) of ${per} image tokens for its ${n} image(s): current count is ${found} tokens`,
      );
    }
    return expanded;
  });
}

/** The image embeddings of one prefill window: (count, C) rows and the (B, t) merge index. */
interface WindowImages {
  embeds: Float32Array;
  count: number;
  index: BigInt64Array;
}

/**
 * Encode the images of a decode group once; `window(a, t)` then gives the embeddings of the
 * image tokens in left-padded columns [a, a + t) in row-major order, with their merge index, or
 * undefined when the window holds none. Null when the group has no images.
 */
async function encodeGroup(
  runner: DecodeRunner,
  seqs: Sequence[],
  prompts: number[][],
  images: (RgbImage[] | null | undefined)[],
) {
  const all = seqs.flatMap((s) => images[s.index] ?? []);
  if (all.length === 0) return null;
  const c = runner.config, d = c.hidden_size;
  const embeds = await runner.vision!.encode(all); // (N·P, C)
  const width = Math.max(...seqs.map((s) => prompts[s.index].length));
  // per row and left-padded column: the embedding row of an image token, or -1
  let next = 0;
  const source = seqs.map((s) => {
    const p = prompts[s.index], pad = width - p.length;
    const hasImages = (images[s.index]?.length ?? 0) > 0;
    return Array.from(
      { length: width },
      (_, j) => j >= pad && hasImages && p[j - pad] === c.image_token_id ? next++ : -1,
    );
  });
  return {
    window(a: number, t: number): WindowImages | undefined {
      const b = seqs.length, index = new BigInt64Array(b * t), rows: number[] = [];
      for (let r = 0; r < b; r++) {
        for (let j = 0; j < t; j++) {
          const src = source[r][a + j];
          index[r * t + j] = BigInt(src < 0 ? r * t + j : b * t + rows.length);
          if (src >= 0) rows.push(src);
        }
      }
      if (rows.length === 0) return undefined;
      const out = new Float32Array(rows.length * d);
      rows.forEach((src, k) => out.set(embeds.subarray(src * d, (src + 1) * d), k * d));
      return { embeds: out, count: rows.length, index };
    },
  };
}

/** Why `s` stops after sampling `token`, if it does (sets `s.text` for a stop string). */
function finishReason(
  s: Sequence,
  token: number,
  eos: Set<number>,
  opts: GenerateOptions,
): FinishReason | undefined {
  if (eos.has(token)) return "eos";
  if (opts.stop?.length) {
    const text = opts.detokenize!(s.tokens);
    const hit = stopStringHit(text, opts.stop);
    if (hit >= 0) {
      const stop = opts.stop.filter((x) =>
        x && text.startsWith(x, hit)
      ).sort((a, b) => b.length - a.length)[0];
      s.text = text.slice(0, hit + stop.length);
      return "stop";
    }
  }
  return s.tokens.length >= s.limit ? "length" : undefined;
}

/**
 * Which prompts share a prefix worth prefilling once (`GenerateOptions.sharePrefixes`): the
 * prompts sorted by their tokens, split into runs so that the tokens saved, Σ over runs of
 * (members − 1) × (the run's common prefix), are the most (each run either shares its common
 * prefix or is split at its least common neighbours, recursively). A prefix leaves every prompt
 * at least one token of its own (its last token's logits come from the suffix prefill).
 * @returns `classOf[i]`: prompt i's class (−1 for none); `prefixes[k]`: class k's prefix tokens.
 */
export function prefixClasses(
  prompts: readonly (readonly number[])[],
): { classOf: Int32Array; prefixes: number[][] } {
  const order = prompts.map((_, i) => i).sort((a, b) => compareTokens(prompts[a], prompts[b]));
  // lcp[k]: tokens prompts order[k] and order[k + 1] share, capped at length − 1 of both
  const lcp = order.slice(1).map((b, k) => {
    const x = prompts[order[k]], y = prompts[b];
    const n = Math.min(x.length, y.length) - 1;
    let m = 0;
    while (m < n && x[m] === y[m]) m++;
    return m;
  });
  const runs: { lo: number; hi: number; length: number }[] = [];
  /** Best split of order[lo..hi]: tokens saved, and its runs appended to `out`. */
  const best = (lo: number, hi: number, out: typeof runs): number => {
    if (lo >= hi) return 0;
    let at = lo;
    for (let k = lo; k < hi; k++) if (lcp[k] < lcp[at]) at = k;
    const whole = (hi - lo) * lcp[at];
    const parts: typeof runs = [];
    const split = best(lo, at, parts) + best(at + 1, hi, parts);
    if (split > whole) {
      out.push(...parts);
      return split;
    }
    if (lcp[at] > 0) out.push({ lo, hi, length: lcp[at] });
    return whole;
  };
  best(0, order.length - 1, runs);
  const classOf = new Int32Array(prompts.length).fill(-1);
  const prefixes = runs.map(({ lo, hi, length }, k) => {
    for (let j = lo; j <= hi; j++) classOf[order[j]] = k;
    return prompts[order[lo]].slice(0, length);
  });
  return { classOf, prefixes };
}

/** Lexicographic order of token arrays (a prefix sorts first). */
function compareTokens(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/**
 * A KV cache of `prompts` (one row each, left-padded to the longest, positions from 0), filled
 * in windows of at most `chunk` columns per call; the logits are not kept.
 */
async function prefillRows(
  runner: DecodeRunner,
  prompts: readonly (readonly number[])[],
  chunk: number,
): Promise<KvCache> {
  const c = runner.config, pad = c.pad_token_id ?? 0, b = prompts.length;
  const width = Math.max(...prompts.map((p) => p.length));
  const cache = new KvCache(c, b);
  const masks: number[][] = prompts.map(() => []);
  for (let a = 0; a < width; a += chunk) {
    const t = Math.min(chunk, width - a), k = cache.capacity + t;
    const ids = new BigInt64Array(b * t), pos = new BigInt64Array(b * t);
    const keyMask = new Float32Array(b * k);
    prompts.forEach((p, r) => {
      keyMask.set(masks[r], r * k);
      const padCount = width - p.length;
      for (let j = 0; j < t; j++) {
        const col = a + j, real = col >= padCount;
        ids[r * t + j] = BigInt(real ? p[col - padCount] : pad);
        pos[r * t + j] = BigInt(real ? col - padCount : 0);
        keyMask[r * k + cache.capacity + j] = real ? 1 : 0;
        masks[r].push(real ? 1 : 0);
      }
    });
    const out = await runner.session.run({
      ...runner.parameters,
      ...cache.feeds(),
      input_ids: tensor("int64", ids, [b, t]),
      position_ids: tensor("int64", pos, [b, t]),
      attention_mask: tensor("float32", keyMask, [b, k]),
    });
    await yieldToEventLoop();
    cache.append(out, t);
  }
  return cache;
}

/**
 * Batched generation with the decode graph and a KV cache: left-pad the prompts, prefill them
 * in one call, then one call per new token for every unfinished sequence at once. A sequence
 * finishes on an EOS token, a stop string in its decoded text, or its own token limit; it then
 * leaves the batch (its rows are dropped from the KV cache), so later steps cost only what is
 * still running. Sampling uses one seeded `Rng` per sequence (derived from the seed and the
 * sequence's index), so a sequence's draws do not depend on which others share its batch.
 */
import type * as ort from "onnxruntime-node";
import { tensor } from "../engine/mod.ts";
import type { DecoderConfig } from "./config.ts";
import { Rng, sampleToken, stopStringHit } from "./sampling.ts";

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
   * Most sequences decoded together (default 64); more prompts run in consecutive groups of
   * similar prompt length. Results do not depend on the grouping beyond float rounding.
   */
  maxBatch?: number;
}

/** Why a sequence stopped. */
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
  /** One tensor per parameter, by HF name. */
  parameters: Record<string, ort.Tensor>;
}

/** Generate continuations of `prompts` (token ids, each non-empty), in prompt order. */
export async function generate(
  runner: DecodeRunner,
  prompts: number[][],
  opts: GenerateOptions,
): Promise<Generation[]> {
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
  for (let start = 0; start < order.length; start += group) {
    const idx = order.slice(start, start + group);
    const done = await generateGroup(runner, idx, prompts, limits, opts);
    idx.forEach((i, k) => (out[i] = done[k]));
  }
  return out;
}

/** One running sequence. */
interface Sequence {
  index: number;
  limit: number;
  rng: Rng;
  tokens: number[];
  finish?: FinishReason;
  text?: string;
  /** Key mask of its cache row (1 = real token), grown by one per step. */
  mask: number[];
  nextPosition: number;
}

async function generateGroup(
  runner: DecodeRunner,
  indices: number[],
  prompts: number[][],
  limits: number[],
  opts: GenerateOptions,
): Promise<Generation[]> {
  const c = runner.config;
  const eos = new Set(opts.eosTokenIds ?? (c.eos_token_id === null ? [] : [c.eos_token_id]));
  const sample = {
    greedy: opts.greedy ?? false,
    temperature: opts.temperature ?? 1,
    topP: opts.topP ?? 1,
  };
  const width = Math.max(...indices.map((i) => prompts[i].length));
  const seqs: Sequence[] = indices.map((i) => {
    const pad = width - prompts[i].length;
    return {
      index: i,
      limit: limits[i],
      rng: new Rng(((opts.seed ?? 0) * 0x9e3779b1 + i * 0x85ebca6b) >>> 0),
      tokens: [],
      mask: Array.from({ length: width }, (_, j) => (j < pad ? 0 : 1)),
      nextPosition: prompts[i].length,
    };
  });
  for (const s of seqs) if (s.limit === 0) s.finish = "length";

  // ---- prefill: left-padded prompts (B, W); positions count real tokens only
  const ids = new BigInt64Array(seqs.length * width);
  const pos = new BigInt64Array(seqs.length * width);
  seqs.forEach((s, b) => {
    const p = prompts[s.index], pad = width - p.length;
    for (let j = 0; j < width; j++) {
      ids[b * width + j] = BigInt(j < pad ? (c.pad_token_id ?? 0) : p[j - pad]);
      pos[b * width + j] = BigInt(Math.max(0, j - pad));
    }
  });
  let active = seqs.filter((s) => !s.finish);
  let cache = emptyCache(c, seqs.length);
  let rows = seqs; // sequences whose rows are in `cache`, in order
  let feedIds = ids, feedPos = pos, t = width;
  while (active.length > 0) {
    const r = await runner.session.run({
      ...runner.parameters,
      ...cache,
      input_ids: tensor("int64", feedIds, [rows.length, t]),
      position_ids: tensor("int64", feedPos, [rows.length, t]),
      attention_mask: tensor("float32", Float32Array.from(rows.flatMap((s) => s.mask)), [
        rows.length,
        rows[0].mask.length,
      ]),
    });
    const logits = r.logits.data as Float32Array; // (B, V)
    const v = c.vocab_size;
    rows.forEach((s, b) => {
      if (s.finish) return;
      const token = sampleToken(logits.subarray(b * v, (b + 1) * v), sample, s.rng);
      s.tokens.push(token);
      if (eos.has(token)) s.finish = "eos";
      else if (opts.stop?.length) {
        const text = opts.detokenize!(s.tokens);
        const hit = stopStringHit(text, opts.stop);
        if (hit >= 0) {
          s.finish = "stop";
          const stop = opts.stop.filter((x) =>
            x && text.startsWith(x, hit)
          ).sort((a, b) => b.length - a.length)[0];
          s.text = text.slice(0, hit + stop.length);
        }
      }
      if (!s.finish && s.tokens.length >= s.limit) s.finish = "length";
    });
    // ---- keep the rows still running; their cache rows become the next step's past
    const keep = rows.map((s, b) => (s.finish ? -1 : b)).filter((b) => b >= 0);
    active = keep.map((b) => rows[b]);
    if (active.length === 0) break;
    cache = compactCache(c, r, keep, rows.length);
    rows = active;
    for (const s of rows) s.mask.push(1);
    feedIds = BigInt64Array.from(rows.map((s) => BigInt(s.tokens.at(-1)!)));
    feedPos = BigInt64Array.from(rows.map((s) => BigInt(s.nextPosition++)));
    t = 1;
  }
  return seqs.map((s) => ({
    tokens: s.tokens,
    finishReason: s.finish!,
    ...(opts.detokenize ? { text: s.text ?? opts.detokenize(s.tokens) } : {}),
  }));
}

/** Zero-length past tensors (B, Hkv, 0, D) for a prefill. */
function emptyCache(c: DecoderConfig, b: number): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  for (let l = 0; l < c.num_hidden_layers; l++) {
    for (const kind of ["key", "value"]) {
      feeds[`past.${l}.${kind}`] = tensor("float32", new Float32Array(0), [
        b,
        c.num_key_value_heads,
        0,
        c.head_dim,
      ]);
    }
  }
  return feeds;
}

/** The present KV tensors as the next past, keeping batch rows `keep` (of `b`). */
function compactCache(
  c: DecoderConfig,
  r: ort.InferenceSession.ReturnType,
  keep: number[],
  b: number,
): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  for (let l = 0; l < c.num_hidden_layers; l++) {
    for (const kind of ["key", "value"]) {
      const present = r[`present.${l}.${kind}`];
      const dims = present.dims;
      let data = present.data as Float32Array;
      if (keep.length !== b) {
        const row = data.length / b;
        const next = new Float32Array(keep.length * row);
        keep.forEach((src, dst) => next.set(data.subarray(src * row, (src + 1) * row), dst * row));
        data = next;
      }
      feeds[`past.${l}.${kind}`] = tensor("float32", data, [
        keep.length,
        dims[1],
        dims[2],
        dims[3],
      ]);
    }
  }
  return feeds;
}

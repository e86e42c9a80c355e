/**
 * Packing (prompt, response) samples into fixed-shape buckets for the train and score graphs,
 * and reading per-token results back per sample.
 *
 * Layout (right padding): row = prompt ++ response, (B, T); the graph reads positions 0..L−2.
 * Only response tokens are scored: response token j of a sample with a prompt of length p is
 * predicted at position t = p − 1 + j, and the R scored positions of the whole batch are listed
 * flat (`tokenIndex[k] = row · T + t`, `targets[k]` the token there), so the LM head and the
 * softmax over the vocabulary run on R rows instead of B·T. Positions count from 0 in every
 * row, so a sample's log-probs do not depend on its batch or bucket.
 */
import type { Bucket } from "./llama.ts";

/** A prompt and the response whose tokens are scored (token ids). */
export interface Sample {
  prompt: number[];
  response: number[];
}

/** Thrown on samples that cannot be packed. */
export class BatchError extends Error {
  override name = "BatchError";
}

const LENGTHS = [8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096];
const BATCHES = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];
const TOKENS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768];

/** Smallest ladder value ≥ n (then multiples of the last step). */
function roundUp(n: number, ladder: number[]): number {
  const hit = ladder.find((x) => x >= n);
  if (hit !== undefined) return hit;
  const step = ladder.at(-1)! - ladder.at(-2)!;
  return Math.ceil(n / step) * step;
}

/**
 * The bucket for `rows` samples whose longest (prompt + response − 1) is `length` tokens and
 * whose responses hold `tokens` tokens together.
 */
export function bucketFor(rows: number, length: number, tokens: number): Bucket {
  return {
    batch: roundUp(rows, BATCHES),
    length: roundUp(length, LENGTHS),
    tokens: roundUp(Math.max(tokens, 1), TOKENS),
  };
}

/** The bucket that fits `samples`. */
export function bucketOf(samples: Sample[]): Bucket {
  const length = Math.max(...samples.map(sampleLength));
  return bucketFor(samples.length, length, samples.reduce((n, s) => n + s.response.length, 0));
}

/** Tokens a sample occupies in the graph: prompt + response − 1. */
export function sampleLength(s: Sample): number {
  return s.prompt.length + s.response.length - 1;
}

/**
 * Split sample indices into groups of at most `maxBatch` rows whose padded size (rows ×
 * bucket length) stays within `maxTokens` (a single longer sample still gets its own group).
 * Samples are grouped by length to limit padding.
 */
export function planMicroBatches(
  samples: Sample[],
  maxTokens: number,
  maxBatch: number,
): number[][] {
  const order = samples.map((_, i) => i).sort((a, b) =>
    sampleLength(samples[a]) - sampleLength(samples[b])
  );
  const groups: number[][] = [];
  let cur: number[] = [];
  for (const i of order) {
    const b = bucketFor(cur.length + 1, sampleLength(samples[i]), 1);
    if (cur.length > 0 && (cur.length + 1 > maxBatch || b.batch * b.length > maxTokens)) {
      groups.push(cur);
      cur = [];
    }
    cur.push(i);
  }
  if (cur.length) groups.push(cur);
  return groups;
}

/** A bucket's input tensors and where each sample's response tokens lie. */
export interface PackedBatch {
  bucket: Bucket;
  /** (B, T) int64 each. */
  inputIds: BigInt64Array;
  positionIds: BigInt64Array;
  /** (B, T) float: 1 on real tokens. */
  attentionMask: Float32Array;
  /** (R,) int64: flat (B·T) position of each scored token; `targets` (R,) the token there. */
  tokenIndex: BigInt64Array;
  targets: BigInt64Array;
  /** (R,) float: 1 on scored tokens, 0 on the bucket's unused slots. */
  lossMask: Float32Array;
  /** Per sample: offset of its first response token in (R,), and response length. */
  spans: { offset: number; length: number }[];
}

/** Pack `samples` (each with a non-empty prompt) into `bucket`. */
export function packSamples(samples: Sample[], bucket: Bucket, padId: number): PackedBatch {
  const { batch: b, length: t, tokens: r } = bucket;
  const scored = samples.reduce((n, s) => n + s.response.length, 0);
  if (samples.length > b || scored > r) {
    throw new BatchError(
      `Cannot pack ${samples.length} samples with ${scored} response tokens as they must fit ${b} rows and ${r} tokens`,
    );
  }
  const n = b * t;
  const p: PackedBatch = {
    bucket,
    inputIds: new BigInt64Array(n).fill(BigInt(padId)),
    positionIds: new BigInt64Array(n),
    attentionMask: new Float32Array(n),
    tokenIndex: new BigInt64Array(r),
    targets: new BigInt64Array(r).fill(BigInt(padId)),
    lossMask: new Float32Array(r),
    spans: [],
  };
  let k = 0;
  samples.forEach((s, row) => {
    if (s.prompt.length === 0) {
      throw new BatchError(
        `Cannot pack sample ${row} as its prompt must be non-empty (at least a BOS token)`,
      );
    }
    const tokens = [...s.prompt, ...s.response];
    const len = tokens.length - 1;
    if (len > t) {
      throw new BatchError(
        `Cannot pack sample ${row} as its ${len} tokens must fit the bucket length ${t}`,
      );
    }
    for (let j = 0; j < len; j++) {
      const at = row * t + j;
      p.inputIds[at] = BigInt(tokens[j]);
      p.positionIds[at] = BigInt(j);
      p.attentionMask[at] = 1;
    }
    p.spans.push({ offset: k, length: s.response.length });
    for (let j = s.prompt.length - 1; j < len; j++, k++) {
      p.tokenIndex[k] = BigInt(row * t + j);
      p.targets[k] = BigInt(tokens[j + 1]);
      p.lossMask[k] = 1;
    }
  });
  return p;
}

/** Per-sample response slices of an (R,) per-token output. */
export function unpackTokens(p: PackedBatch, data: Float32Array): Float32Array[] {
  return p.spans.map((s) => data.slice(s.offset, s.offset + s.length));
}

/** An (R,) float input from per-sample response values (a number broadcasts to every token). */
export function packTokens(
  p: PackedBatch,
  values: (Float32Array | number[] | number)[],
): Float32Array {
  const out = new Float32Array(p.bucket.tokens);
  p.spans.forEach((s, i) => {
    const v = values[i];
    if (typeof v === "number") out.fill(v, s.offset, s.offset + s.length);
    else {
      if (v.length !== s.length) {
        throw new BatchError(
          `Cannot pack per-token values of sample ${i} as they must have ${s.length} entries: current length is ${v.length}`,
        );
      }
      out.set(v, s.offset);
    }
  });
  return out;
}

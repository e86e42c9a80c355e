/**
 * Packing (prompt, response) samples into fixed-shape (B, T) buckets for the train and score
 * graphs, and reading per-token results back per sample.
 *
 * Layout (right padding): row = prompt ++ response; the graph reads positions 0..L−2 and
 * predicts tokens 1..L−1, so `targets[t] = row[t + 1]`. Response token j of a sample with a
 * prompt of length p sits at t = p − 1 + j, where `loss_mask` is 1. Positions count from 0 in
 * every row, so a sample's log-probs do not depend on its batch or bucket.
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

/** Smallest ladder value ≥ n (then multiples of the last step). */
function roundUp(n: number, ladder: number[]): number {
  const hit = ladder.find((x) => x >= n);
  if (hit !== undefined) return hit;
  const step = ladder.at(-1)! - ladder.at(-2)!;
  return Math.ceil(n / step) * step;
}

/** The bucket for `rows` samples whose longest (prompt + response − 1) is `length` tokens. */
export function bucketFor(rows: number, length: number): Bucket {
  return { batch: roundUp(rows, BATCHES), length: roundUp(length, LENGTHS) };
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
    const b = bucketFor(cur.length + 1, sampleLength(samples[i]));
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
  targets: BigInt64Array;
  /** (B, T) float each: 1 on real tokens / on response tokens. */
  attentionMask: Float32Array;
  lossMask: Float32Array;
  /** Per sample: flat offset of its first response token in (B, T), and response length. */
  spans: { offset: number; length: number }[];
}

/** Pack `samples` (each with a non-empty prompt) into `bucket`. */
export function packSamples(samples: Sample[], bucket: Bucket, padId: number): PackedBatch {
  const { batch: b, length: t } = bucket;
  if (samples.length > b) {
    throw new BatchError(`Cannot pack ${samples.length} samples as they must fit ${b} rows`);
  }
  const n = b * t;
  const p: PackedBatch = {
    bucket,
    inputIds: new BigInt64Array(n).fill(BigInt(padId)),
    positionIds: new BigInt64Array(n),
    targets: new BigInt64Array(n).fill(BigInt(padId)),
    attentionMask: new Float32Array(n),
    lossMask: new Float32Array(n),
    spans: [],
  };
  samples.forEach((s, r) => {
    if (s.prompt.length === 0) {
      throw new BatchError(
        `Cannot pack sample ${r} as its prompt must be non-empty (at least a BOS token)`,
      );
    }
    const row = [...s.prompt, ...s.response];
    const len = row.length - 1;
    if (len > t) {
      throw new BatchError(
        `Cannot pack sample ${r} as its ${len} tokens must fit the bucket length ${t}`,
      );
    }
    for (let j = 0; j < len; j++) {
      const at = r * t + j;
      p.inputIds[at] = BigInt(row[j]);
      p.targets[at] = BigInt(row[j + 1]);
      p.positionIds[at] = BigInt(j);
      p.attentionMask[at] = 1;
      if (j >= s.prompt.length - 1) p.lossMask[at] = 1;
    }
    p.spans.push({ offset: r * t + s.prompt.length - 1, length: s.response.length });
  });
  return p;
}

/** Per-sample response slices of a (B, T) per-token output. */
export function unpackTokens(p: PackedBatch, data: Float32Array): Float32Array[] {
  return p.spans.map((s) => data.slice(s.offset, s.offset + s.length));
}

/** A (B, T) float input from per-sample response values (a number broadcasts to every token). */
export function packTokens(
  p: PackedBatch,
  values: (Float32Array | number[] | number)[],
): Float32Array {
  const out = new Float32Array(p.bucket.batch * p.bucket.length);
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

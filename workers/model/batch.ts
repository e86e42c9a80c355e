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
 *
 * Images (vision models): a sample's prompt holds one run of P image tokens per image (after
 * `expandImageTokens`, which `prepareSamples` applies). The images of a call are stacked in
 * sample order into `pixelValues` (I, P, K) (I the bucket's image slots; unused slots are zero
 * and never read), and `mergeIndex` (B, T) sends each input position to its embedding row:
 * row·T + t for text, B·T + (image slot)·P + patch for the patch-th token of an image's run.
 * Only prompt positions are image positions: an image token id inside a response is text.
 */
import { type DecoderConfig, patchesPerImage } from "./config.ts";
import { countImageTokens, expandImageTokens, preprocessImage, type RgbImage } from "./image.ts";
import type { Bucket } from "./llama.ts";

/** A prompt and the response whose tokens are scored (token ids), with the prompt's images. */
export interface Sample {
  prompt: number[];
  response: number[];
  /** The images of the prompt's `<image>` placeholders, in order (vision models only). */
  images?: RgbImage[];
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
 * The bucket for `rows` samples whose longest (prompt + response − 1) is `length` tokens, whose
 * responses hold `tokens` tokens together and whose prompts hold `images` images (image slots
 * round up on the batch ladder; 0 stays 0, the text-only graph).
 */
export function bucketFor(rows: number, length: number, tokens: number, images = 0): Bucket {
  const bucket: Bucket = {
    batch: roundUp(rows, BATCHES),
    length: roundUp(length, LENGTHS),
    tokens: roundUp(Math.max(tokens, 1), TOKENS),
  };
  if (images > 0) bucket.images = roundUp(images, BATCHES);
  return bucket;
}

/** The bucket that fits `samples`. */
export function bucketOf(samples: Sample[]): Bucket {
  const length = Math.max(...samples.map(sampleLength));
  return bucketFor(
    samples.length,
    length,
    samples.reduce((n, s) => n + s.response.length, 0),
    samples.reduce((n, s) => n + (s.images?.length ?? 0), 0),
  );
}

/**
 * Samples ready to pack for model `c`: prompts of samples with images get their `<image>`
 * placeholders expanded (`expandImageTokens`; already expanded runs are kept). Text-only
 * models get the samples unchanged. Other fields (e.g. RL inputs) are kept.
 * @throws {BatchError} when a sample has images but the model has no vision part, or when a
 *   prompt's image tokens do not make one run of P per image.
 */
export function prepareSamples<S extends Sample>(samples: S[], c: DecoderConfig): S[] {
  if (!c.vision_config) {
    const i = samples.findIndex((s) => (s.images?.length ?? 0) > 0);
    if (i >= 0) {
      throw new BatchError(
        `Cannot use the images of sample ${i} as the model must have a vision_config: it has none`,
      );
    }
    return samples;
  }
  const p = patchesPerImage(c.vision_config);
  return samples.map((s, i) => {
    const images = s.images?.length ?? 0;
    const prompt = images > 0 ? expandImageTokens(s.prompt, c) : s.prompt;
    const found = countImageTokens(prompt, c);
    if (found !== images * p) {
      throw new BatchError(
        `Cannot pack sample ${i} as its prompt must hold ${
          images * p
        } image tokens (${images} image(s) × ${p}): current count is ${found}`,
      );
    }
    return images > 0 ? { ...s, prompt } : s;
  });
}

/** Which samples of a call are the same input (see {@link distinctSamples}). */
export interface DistinctSamples {
  /** Indices of the first sample of each distinct input, ascending. */
  distinct: number[];
  /** (N,) Per sample, the position in `distinct` of the first sample equal to it. */
  slot: Int32Array;
}

/**
 * Groups samples that are the same input: equal prompt ids and equal response ids, without
 * images (a sample with images is always its own input). A scoring pass needs each input once —
 * a group's rollouts often repeat a turn (the first observation is the same for every copy of a
 * task, and a converged policy repeats whole episodes).
 */
export function distinctSamples(samples: readonly Sample[]): DistinctSamples {
  const firstOf = new Map<string, number>();
  const distinct: number[] = [];
  const slot = new Int32Array(samples.length);
  samples.forEach((s, i) => {
    const key = (s.images?.length ?? 0) > 0
      ? `#${i}`
      : `${s.prompt.join(",")}|${s.response.join(",")}`;
    let k = firstOf.get(key);
    if (k === undefined) firstOf.set(key, k = distinct.push(i) - 1);
    slot[i] = k;
  });
  return { distinct, slot };
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
  /** (I, P, K) float patches of the call's images (when the bucket has image slots). */
  pixelValues?: Float32Array;
  /** (B, T) int64 embedding row of every input position (when the bucket has image slots). */
  mergeIndex?: BigInt64Array;
}

/**
 * Pack `samples` (each with a non-empty prompt; with images, prepared by `prepareSamples`) into
 * `bucket`. A bucket with image slots needs the model config (`opts.config`).
 */
export function packSamples(
  samples: Sample[],
  bucket: Bucket,
  padId: number,
  opts: { config?: DecoderConfig } = {},
): PackedBatch {
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
  if (bucket.images) packImages(p, samples, opts.config);
  else {
    const i = samples.findIndex((s) => (s.images?.length ?? 0) > 0);
    if (i >= 0) {
      throw new BatchError(
        `Cannot pack the images of sample ${i} as the bucket must have image slots: it has none`,
      );
    }
  }
  return p;
}

/** Fill `pixelValues` and `mergeIndex` of a packed batch whose bucket has image slots. */
function packImages(p: PackedBatch, samples: Sample[], c: DecoderConfig | undefined): void {
  const v = c?.vision_config;
  if (!c || !v) {
    throw new BatchError("Cannot pack images as the model config must have a vision_config");
  }
  const { batch: b, length: t, images: slots = 0 } = p.bucket;
  const np = patchesPerImage(v), k = v.num_channels * v.patch_size ** 2;
  const total = samples.reduce((n, s) => n + (s.images?.length ?? 0), 0);
  if (total > slots) {
    throw new BatchError(
      `Cannot pack ${total} images as they must fit the bucket's ${slots} image slots`,
    );
  }
  p.pixelValues = new Float32Array(slots * np * k);
  p.mergeIndex = BigInt64Array.from({ length: b * t }, (_, i) => BigInt(i));
  let slot = 0;
  samples.forEach((s, row) => {
    const images = s.images ?? [];
    const found = countImageTokens(s.prompt, c);
    if (found !== images.length * np) {
      throw new BatchError(
        `Cannot pack sample ${row} as its prompt must hold ${
          images.length * np
        } image tokens (expand it with expandImageTokens): current count is ${found}`,
      );
    }
    images.forEach((img, i) => p.pixelValues!.set(preprocessImage(img, v), (slot + i) * np * k));
    const fed = Math.min(s.prompt.length, s.prompt.length + s.response.length - 1);
    for (let j = 0, m = 0; j < s.prompt.length; j++) {
      if (s.prompt[j] !== c.image_token_id) continue;
      if (j < fed) p.mergeIndex![row * t + j] = BigInt(b * t + slot * np + m);
      m++;
    }
    slot += images.length;
  });
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

/**
 * Images on the way into a vision-language policy: the `<image>` placeholder, its expansion to
 * one image token per patch, vision config checks, and the CPU preprocessing (nearest resize,
 * scaling to [-1, 1], patchify) whose output the vision tower reads.
 *
 * A prompt holds one `<image>` token per image, in the order of the sample's `images`. Before
 * the model sees it, each placeholder becomes a run of P = (image_size / patch_size)² copies of
 * `image_token_id` (`expandImageTokens`); the decoder's input embeddings at the k-th run are
 * replaced, patch by patch, by the encoder's outputs for the k-th image.
 */
import { type DecoderConfig, patchesPerImage, type VisionConfig } from "./config.ts";

/** The text of the image placeholder token in prompts. */
export const IMAGE_PLACEHOLDER = "<image>";

/**
 * An RGB image: row-major pixels, 3 bytes (R, G, B) each, `height · width · 3` bytes in all.
 * Structurally the `Observation.image` type of workers/envs.
 */
export interface RgbImage {
  width: number;
  height: number;
  rgb: Uint8Array;
}

/** Thrown on images, image token runs or vision configs that cannot be used. */
export class ImageError extends Error {
  override name = "ImageError";
}

const ACTIVATIONS = ["gelu_pytorch_tanh", "gelu", "quick_gelu"];

/**
 * Check a vision config and the decoder fields it needs (`image_token_id` in the vocabulary).
 * @throws {ImageError} naming the field when it is not usable.
 */
export function validateVisionConfig(c: DecoderConfig): VisionConfig {
  const v = c.vision_config;
  const fail = (why: string): never => {
    throw new ImageError(`Cannot use the vision config as ${why}`);
  };
  if (!v) return fail("the model config must have a vision_config: it has none");
  const positive = [
    "image_size",
    "patch_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
  ] as const;
  for (const k of positive) {
    if (!(Number.isInteger(v[k]) && v[k] > 0)) {
      fail(`vision_config.${k} must be a positive integer: current value is ${v[k]}`);
    }
  }
  if (v.num_channels !== 3) {
    fail(`vision_config.num_channels must be 3 (RGB): current value is ${v.num_channels}`);
  }
  if (v.image_size % v.patch_size !== 0) {
    fail(
      `vision_config.patch_size must divide image_size (${v.image_size}): current value is ${v.patch_size}`,
    );
  }
  if (v.hidden_size % v.num_attention_heads !== 0) {
    fail(
      `vision_config.num_attention_heads must divide hidden_size (${v.hidden_size}): current value is ${v.num_attention_heads}`,
    );
  }
  if (!(v.layer_norm_eps > 0)) {
    fail(`vision_config.layer_norm_eps must be > 0: current value is ${v.layer_norm_eps}`);
  }
  for (const k of ["hidden_act", "projector_hidden_act"] as const) {
    if (!ACTIVATIONS.includes(v[k])) {
      fail(`${k} must be one of ${ACTIVATIONS.join(", ")}: current value is ${v[k]}`);
    }
  }
  const id = c.image_token_id;
  if (!(Number.isInteger(id) && id! >= 0 && id! < c.vocab_size)) {
    fail(`image_token_id must be a token id below vocab_size (${c.vocab_size}): current is ${id}`);
  }
  return v;
}

/** Image tokens one image takes in a prompt: P = (image_size / patch_size)². */
export function numImageTokens(c: DecoderConfig): number {
  return patchesPerImage(validateVisionConfig(c));
}

/**
 * Expand every `<image>` placeholder (`image_token_id`) of `ids` into P = `numImageTokens(c)`
 * copies. Safe to apply twice: a maximal run of L image tokens with L a multiple of P is taken
 * as L / P images already expanded and kept as it is; any other run is L placeholders and
 * becomes L · P tokens. (So L consecutive unexpanded placeholders with L a multiple of P would
 * be read as already expanded; prompts separate their images by text in practice.)
 * @throws {ImageError} when the config has no vision part.
 */
export function expandImageTokens(ids: number[], c: DecoderConfig): number[] {
  const p = numImageTokens(c), id = c.image_token_id!;
  const out: number[] = [];
  for (let i = 0; i < ids.length;) {
    if (ids[i] !== id) {
      out.push(ids[i++]);
      continue;
    }
    let run = 0;
    while (i + run < ids.length && ids[i + run] === id) run++;
    const length = run % p === 0 ? run : run * p;
    for (let k = 0; k < length; k++) out.push(id);
    i += run;
  }
  return out;
}

/** Number of image tokens in `ids` (`image_token_id` occurrences). */
export function countImageTokens(ids: readonly number[], c: DecoderConfig): number {
  let n = 0;
  for (const t of ids) if (t === c.image_token_id) n++;
  return n;
}

/**
 * One image as the vision tower's input: resized to S×S (S = image_size) by nearest neighbour
 * (source pixel ⌊(y + ½)·H/S⌋, ⌊(x + ½)·W/S⌋, as PIL's NEAREST), scaled to [-1, 1]
 * (v / 127.5 − 1, SigLIP's mean = std = 0.5), and cut into P = (S/p)² patches of p×p pixels.
 * Output (P, C·p·p) float32, row-major: patch n = row · (S/p) + col (raster order), and inside a
 * patch, element ch·p·p + dy·p + dx is channel ch of pixel (row·p + dy, col·p + dx) — the
 * flattening of a Conv2d kernel (Dv, C, p, p), so the patch linear equals SigLIP's conv.
 * @throws {ImageError} when the image's size and bytes disagree or a side is not positive.
 */
export function preprocessImage(image: RgbImage, v: VisionConfig): Float32Array {
  const { width: w, height: h, rgb } = image;
  if (!(Number.isInteger(w) && w > 0 && Number.isInteger(h) && h > 0)) {
    throw new ImageError(
      `Cannot preprocess an image as width and height must be positive integers: current values are ${w} and ${h}`,
    );
  }
  if (rgb.length !== w * h * 3) {
    throw new ImageError(
      `Cannot preprocess a ${w}×${h} image as it must hold ${
        w * h * 3
      } RGB bytes: current length is ${rgb.length}`,
    );
  }
  const s = v.image_size, p = v.patch_size, c = 3, side = s / p;
  const out = new Float32Array(side * side * c * p * p); // (P, C·p·p)
  const srcY = Array.from(
    { length: s },
    (_, y) => Math.min(h - 1, Math.floor(((y + 0.5) * h) / s)),
  );
  const srcX = Array.from(
    { length: s },
    (_, x) => Math.min(w - 1, Math.floor(((x + 0.5) * w) / s)),
  );
  for (let y = 0; y < s; y++) {
    const row = Math.floor(y / p), dy = y % p;
    for (let x = 0; x < s; x++) {
      const col = Math.floor(x / p), dx = x % p;
      const src = (srcY[y] * w + srcX[x]) * 3;
      const base = (row * side + col) * c * p * p + dy * p + dx;
      for (let ch = 0; ch < c; ch++) out[base + ch * p * p] = rgb[src + ch] / 127.5 - 1;
    }
  }
  return out;
}

import assert from "node:assert/strict";
import {
  countImageTokens,
  expandImageTokens,
  ImageError,
  numImageTokens,
  preprocessImage,
  validateVisionConfig,
} from "../../../workers/model/image.ts";
import { BatchError, packSamples, prepareSamples } from "../../../workers/model/batch.ts";
import { createBuiltinTinyVl, IMAGE_PLACEHOLDER, Tokenizer } from "../../../workers/model/mod.ts";
import { randomImage, TINY_LLAMA, TINY_VL } from "./_tiny.ts";

const V = TINY_VL.vision_config!; // 8×8 images, 4×4 patches → P = 4, K = 48
const IMG = 10; // TINY_VL.image_token_id

Deno.test("preprocessing puts channel ch of pixel (row·p + dy, col·p + dx) at ch·p·p + dy·p + dx of patch row·2 + col", () => {
  const img = randomImage(8, 8, 1); // already 8×8: nearest resize is the identity
  const out = preprocessImage(img, V);
  assert.equal(out.length, 4 * 48);
  for (const [y, x, ch] of [[0, 0, 0], [3, 5, 1], [6, 2, 2], [7, 7, 0], [4, 4, 2]]) {
    const patch = Math.floor(y / 4) * 2 + Math.floor(x / 4);
    const at = patch * 48 + ch * 16 + (y % 4) * 4 + (x % 4);
    assert.equal(out[at], Math.fround(img.rgb[(y * 8 + x) * 3 + ch] / 127.5 - 1));
  }
  assert.ok(out.every((v) => v >= -1 && v <= 1));
});

Deno.test("nearest resizing samples the source pixel under each target pixel's centre", () => {
  // 2×2 source → 8×8: each source pixel fills one 4×4 quadrant, i.e. exactly one patch
  const rgb = Uint8Array.from([0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0, 255]);
  const out = preprocessImage({ width: 2, height: 2, rgb }, V);
  const patchValue = (patch: number, ch: number) =>
    out.slice(patch * 48 + ch * 16, patch * 48 + (ch + 1) * 16);
  assert.ok(patchValue(0, 0).every((v) => v === -1));
  assert.ok(patchValue(1, 1).every((v) => v === 1));
  assert.ok(patchValue(2, 0).every((v) => v === 1) && patchValue(2, 2).every((v) => v === -1));
  assert.ok(patchValue(3, 2).every((v) => v === 1) && patchValue(3, 0).every((v) => v === -1));
  // 16×16 → 8×8 keeps pixel (2y + 1, 2x + 1)
  const big = randomImage(16, 16, 4);
  const small = preprocessImage(big, V);
  const at = (1 * 2 + 0) * 48 + 0 * 16 + 1 * 4 + 2; // patch (1, 0), channel 0, dy 1, dx 2
  assert.equal(small[at], Math.fround(big.rgb[(11 * 16 + 5) * 3] / 127.5 - 1));
});

Deno.test("an image whose bytes disagree with its size is rejected", () => {
  assert.throws(
    () => preprocessImage({ width: 3, height: 2, rgb: new Uint8Array(17) }, V),
    (e: Error) =>
      e instanceof ImageError && /must hold 18 RGB bytes: current length is 17/.test(e.message),
  );
});

Deno.test("a placeholder expands to P image tokens, and expanding twice changes nothing", () => {
  assert.equal(numImageTokens(TINY_VL), 4);
  const once = expandImageTokens([1, IMG, 5, IMG, 6], TINY_VL);
  assert.deepEqual(once, [1, IMG, IMG, IMG, IMG, 5, IMG, IMG, IMG, IMG, 6]);
  assert.deepEqual(expandImageTokens(once, TINY_VL), once);
  // two adjacent placeholders are two images (a run of 2 is not a multiple of P = 4)
  const two = expandImageTokens([1, IMG, IMG, 5], TINY_VL);
  assert.equal(countImageTokens(two, TINY_VL), 8);
  assert.deepEqual(expandImageTokens(two, TINY_VL), two);
});

Deno.test("vision config checks name the field at fault", () => {
  const bad = (vision: Partial<typeof V>, extra: Record<string, unknown> = {}) => () =>
    validateVisionConfig({ ...TINY_VL, ...extra, vision_config: { ...V, ...vision } });
  assert.throws(
    bad({ patch_size: 3 }),
    /patch_size must divide image_size \(8\): current value is 3/,
  );
  assert.throws(bad({ num_channels: 4 }), /num_channels must be 3/);
  assert.throws(bad({ num_attention_heads: 3 }), /num_attention_heads must divide hidden_size/);
  assert.throws(
    bad({}, { image_token_id: 99 }),
    /image_token_id must be a token id below vocab_size/,
  );
  assert.throws(() => numImageTokens(TINY_LLAMA), /must have a vision_config/);
});

Deno.test("samples are checked: one run of P image tokens per image, and images need a vision model", () => {
  const img = randomImage(8, 8, 2);
  const [s] = prepareSamples([{ prompt: [1, IMG, 5], response: [6, 2], images: [img] }], TINY_VL);
  assert.deepEqual(s.prompt, [1, IMG, IMG, IMG, IMG, 5]);
  assert.throws(
    () => prepareSamples([{ prompt: [1, IMG, 5], response: [6], images: [img, img] }], TINY_VL),
    (e: Error) =>
      e instanceof BatchError && /must hold 8 image tokens .*current count is 4/.test(e.message),
  );
  assert.throws(
    () => prepareSamples([{ prompt: [1, IMG], response: [6] }], TINY_VL),
    /must hold 0 image tokens/,
  );
  assert.throws(
    () => prepareSamples([{ prompt: [1, 5], response: [6], images: [img] }], TINY_LLAMA),
    /must have a vision_config/,
  );
});

Deno.test("packing sends the k-th image token of each row to its image's patch embedding row", () => {
  const a = randomImage(8, 8, 1), b = randomImage(8, 8, 2), c = randomImage(8, 8, 3);
  const samples = prepareSamples([
    { prompt: [1, IMG, 5, IMG], response: [6], images: [a, b] },
    { prompt: [1, 4], response: [7, 2] },
    { prompt: [IMG, 3], response: [8], images: [c] },
  ], TINY_VL);
  const bucket = { batch: 4, length: 16, tokens: 8, images: 4 };
  const p = packSamples(samples, bucket, 0, { config: TINY_VL });
  const bt = 4 * 16, at = (row: number, t: number) => Number(p.mergeIndex![row * 16 + t]);
  assert.deepEqual([1, 2, 3, 4].map((t) => at(0, t)), [bt, bt + 1, bt + 2, bt + 3]); // image a
  assert.deepEqual([6, 7, 8, 9].map((t) => at(0, t)), [bt + 4, bt + 5, bt + 6, bt + 7]); // b
  assert.deepEqual([0, 1, 2, 3].map((t) => at(2, t)), [bt + 8, bt + 9, bt + 10, bt + 11]); // c
  assert.equal(at(0, 5), 5);
  assert.equal(at(1, 1), 16 + 1);
  assert.deepEqual(p.pixelValues!.slice(2 * 192, 3 * 192), preprocessImage(c, V));
  assert.ok(p.pixelValues!.slice(3 * 192).every((x) => x === 0)); // the unused slot
});

Deno.test("builtin:tiny-vl tokenizes <image> as its image token", () => {
  const model = createBuiltinTinyVl({ vocabulary: ["red", "blue"], seed: 1 });
  const tok = new Tokenizer(model.tokenizer);
  const ids = tok.encode(`${IMAGE_PLACEHOLDER} red`);
  assert.equal(ids[0], model.config.image_token_id);
  assert.equal(ids.filter((t) => t === model.config.image_token_id).length, 1);
  assert.equal(tok.decode(ids), `${IMAGE_PLACEHOLDER} red`);
  assert.equal(numImageTokens(model.config), 36);
});

import assert from "node:assert/strict";
import { decode } from "fast-png";
import { encodePng, RasterError } from "../../../workers/envs/mod.ts";
import {
  drawText,
  GLYPHS,
  MissingGlyphError,
  textWidth,
} from "../../../workers/envs/bitmap_font.ts";
import { createImage, drawBitmap, fillRect, pixelAt } from "../../../workers/envs/raster.ts";

Deno.test("a new image is filled with its colour, row-major, three bytes per pixel", () => {
  const image = createImage(3, 2, [1, 2, 3]);
  assert.equal(image.rgb.length, 18);
  assert.deepEqual([...image.rgb.subarray(15, 18)], [1, 2, 3]);
  fillRect(image, { x: 2, y: 1, w: 5, h: 5 }, [9, 8, 7]); // clipped to the one corner pixel
  assert.deepEqual(pixelAt(image, 2, 1), [9, 8, 7]);
  assert.deepEqual([...image.rgb.subarray(15, 18)], [9, 8, 7]);
  assert.deepEqual(pixelAt(image, 1, 1), [1, 2, 3]);
  assert.deepEqual(pixelAt(image, 2, 0), [1, 2, 3]);
});

Deno.test("image sides outside 1..4096 are refused with RasterError", () => {
  for (const [w, h] of [[0, 4], [4, 4097], [2.5, 3]]) {
    assert.throws(() => createImage(w, h, [0, 0, 0]), RasterError);
  }
});

Deno.test("a bitmap is drawn as scale x scale blocks where it has ink and nowhere else", () => {
  const image = createImage(6, 4, [0, 0, 0]);
  drawBitmap(image, ["#.", ".#"], { x: 1, y: 0, scale: 2 }, [255, 0, 0]);
  const ink = [];
  for (let y = 0; y < 4; y++) {
    for (let x = 0; x < 6; x++) if (pixelAt(image, x, y)[0] === 255) ink.push(`${x},${y}`);
  }
  assert.deepEqual(ink, ["1,0", "2,0", "1,1", "2,1", "3,2", "4,2", "3,3", "4,3"]);
  assert.throws(
    () => drawBitmap(image, ["#", "##"], { x: 0, y: 0, scale: 1 }, [1, 1, 1]),
    RasterError,
  );
  assert.throws(() => drawBitmap(image, ["#"], { x: 0, y: 0, scale: 0 }, [1, 1, 1]), RasterError);
});

Deno.test("text is drawn glyph by glyph with one blank column between glyphs", () => {
  assert.equal(textWidth("10", 2), 22);
  const image = createImage(11, 7, [255, 255, 255]);
  drawText(image, "10", { x: 0, y: 0, scale: 1 }, [0, 0, 0]);
  for (let y = 0; y < 7; y++) {
    let row = "";
    for (let x = 0; x < 11; x++) row += pixelAt(image, x, y)[0] === 0 ? "#" : ".";
    assert.equal(row, `${GLYPHS["1"][y]}.${GLYPHS["0"][y]}`);
  }
  assert.throws(() => drawText(image, "Z", { x: 0, y: 0, scale: 1 }, [0, 0, 0]), MissingGlyphError);
});

Deno.test("encodePng writes a PNG that decodes back to the same RGB bytes", () => {
  const image = createImage(5, 3, [10, 20, 30]);
  fillRect(image, { x: 1, y: 1, w: 2, h: 1 }, [200, 100, 0]);
  const png = encodePng(image);
  assert.deepEqual([...png.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10]);
  const back = decode(png);
  assert.equal(back.width, 5);
  assert.equal(back.height, 3);
  assert.equal(back.channels, 3);
  assert.deepEqual([...back.data], [...image.rgb]);
});

Deno.test("encodePng refuses rgb bytes that do not match width x height x 3", () => {
  assert.throws(
    () => encodePng({ width: 2, height: 2, rgb: new Uint8Array(11) }),
    /must hold width \* height \* 3 = 12 bytes: current value is 11/,
  );
});

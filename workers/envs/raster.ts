/**
 * A tiny RGB raster for the vision environments: the image type of `Observation.image`, a
 * canvas filled with one colour, axis-aligned rectangles and 1-bit bitmaps drawn at an integer
 * scale. No anti-aliasing and no floating point, so the same drawing gives the same bytes on
 * every machine (the rendering tests pin them).
 */
import type { Observation } from "./types.ts";

/** An RGB image: row-major, `height * width * 3` bytes, pixel (x, y) at `3 * (y * width + x)`. */
export type RgbImage = NonNullable<Observation["image"]>;

/** A colour as `[r, g, b]`, each 0–255. */
export type Rgb = readonly [number, number, number];

/** Thrown when an image size or drawing argument is out of range. */
export class RasterError extends Error {
  /** @param message "Cannot X as Y must be Z: current value is V". */
  constructor(message: string) {
    super(message);
    this.name = "RasterError";
  }
}

/** Largest side (pixels) of an image the environments create. */
export const MAX_IMAGE_SIDE = 4096;

/**
 * A `width` × `height` image filled with `fill`.
 * @throws RasterError when a side is not an integer in 1..{@link MAX_IMAGE_SIDE}.
 */
export function createImage(width: number, height: number, fill: Rgb): RgbImage {
  for (const [name, side] of [["width", width], ["height", height]] as const) {
    if (!Number.isInteger(side) || side < 1 || side > MAX_IMAGE_SIDE) {
      throw new RasterError(
        `Cannot create image as ${name} must be an integer in 1..${MAX_IMAGE_SIDE}: ` +
          `current value is ${side}`,
      );
    }
  }
  const rgb = new Uint8Array(width * height * 3); // (H, W, 3) uint8
  for (let i = 0; i < rgb.length; i += 3) rgb.set(fill, i);
  return { width, height, rgb };
}

/**
 * Fills the rectangle with top-left corner (x, y) and size w × h with `colour`; the part outside
 * the image is clipped.
 */
export function fillRect(
  image: RgbImage,
  rect: { x: number; y: number; w: number; h: number },
  colour: Rgb,
): void {
  const x0 = Math.max(0, rect.x);
  const y0 = Math.max(0, rect.y);
  const x1 = Math.min(image.width, rect.x + rect.w);
  const y1 = Math.min(image.height, rect.y + rect.h);
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) image.rgb.set(colour, 3 * (y * image.width + x));
  }
}

/**
 * Draws a 1-bit bitmap (rows of `#` for ink and `.` for transparent, all of one length) with its
 * top-left corner at (x, y), each bitmap pixel as a `scale` × `scale` block of `colour`.
 * @throws RasterError when `scale` is not a positive integer or rows differ in length.
 */
export function drawBitmap(
  image: RgbImage,
  bitmap: readonly string[],
  at: { x: number; y: number; scale: number },
  colour: Rgb,
): void {
  if (!Number.isInteger(at.scale) || at.scale < 1) {
    throw new RasterError(
      `Cannot draw bitmap as scale must be a positive integer: current value is ${at.scale}`,
    );
  }
  const width = bitmap[0]?.length ?? 0;
  bitmap.forEach((row, r) => {
    if (row.length !== width) {
      throw new RasterError(
        `Cannot draw bitmap as every row must have ${width} pixels: current value is ${row.length}`,
      );
    }
    for (let c = 0; c < row.length; c++) {
      if (row[c] !== "#") continue;
      fillRect(image, {
        x: at.x + c * at.scale,
        y: at.y + r * at.scale,
        w: at.scale,
        h: at.scale,
      }, colour);
    }
  });
}

/** The colour of pixel (x, y) as `[r, g, b]`. */
export function pixelAt(image: RgbImage, x: number, y: number): [number, number, number] {
  const i = 3 * (y * image.width + x);
  return [image.rgb[i], image.rgb[i + 1], image.rgb[i + 2]];
}

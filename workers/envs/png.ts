/**
 * PNG encoding of observation images, so the API, tests and people can look at what a vision
 * policy sees. Uses the npm package `fast-png` (pinned in deno.json): 8-bit RGB, no interlace.
 */
import { encode } from "fast-png";
import { RasterError, type RgbImage } from "./raster.ts";

/**
 * The PNG file of `image` (8-bit truecolour, 3 channels).
 * @throws RasterError when `rgb` does not hold exactly `width * height * 3` bytes.
 */
export function encodePng(image: RgbImage): Uint8Array {
  const expected = image.width * image.height * 3;
  if (image.rgb.length !== expected) {
    throw new RasterError(
      `Cannot encode PNG as rgb must hold width * height * 3 = ${expected} bytes: ` +
        `current value is ${image.rgb.length}`,
    );
  }
  return encode({
    width: image.width,
    height: image.height,
    data: image.rgb,
    channels: 3,
    depth: 8,
  });
}

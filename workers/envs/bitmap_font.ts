/**
 * A small hand-drawn bitmap font: 5 × 7 glyphs for the card ranks (digits, A, J, Q, K) and 7 × 7
 * suit symbols (♥ ♦ ♠ ♣), drawn with {@link drawBitmap} from raster.ts. `#` is ink, `.` is paper.
 */
import { drawBitmap, type Rgb, type RgbImage } from "./raster.ts";

/** Width and height (bitmap pixels) of a rank glyph. */
export const GLYPH_SIZE = { width: 5, height: 7 } as const;

/** 5 × 7 glyphs, one per character. */
export const GLYPHS: Readonly<Record<string, readonly string[]>> = {
  "0": [".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."],
  "1": ["..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."],
  "2": [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"],
  "3": ["####.", "....#", "....#", ".###.", "....#", "....#", "####."],
  "4": ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."],
  "5": ["#####", "#....", "####.", "....#", "....#", "#...#", ".###."],
  "6": ["..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."],
  "7": ["#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."],
  "8": [".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."],
  "9": [".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."],
  A: ["..#..", ".#.#.", "#...#", "#...#", "#####", "#...#", "#...#"],
  J: ["..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."],
  Q: [".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"],
  K: ["#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"],
};

/** 7 × 7 suit symbols. */
export const SUIT_GLYPHS: Readonly<
  Record<"hearts" | "diamonds" | "spades" | "clubs", readonly string[]>
> = {
  hearts: [".##.##.", "#######", "#######", "#######", ".#####.", "..###..", "...#..."],
  diamonds: ["...#...", "..###..", ".#####.", "#######", ".#####.", "..###..", "...#..."],
  spades: ["...#...", "..###..", ".#####.", "#######", "#######", "..#.#..", ".#####."],
  clubs: ["..###..", "..###..", "##.#.##", "#######", "##.#.##", "...#...", "..###.."],
};

/** Thrown when text holds a character the font has no glyph for. */
export class MissingGlyphError extends Error {
  /** @param ch the character without a glyph. */
  constructor(ch: string) {
    super(
      `Cannot draw text as every character must be one of ${Object.keys(GLYPHS).join(" ")}: ` +
        `current value is ${JSON.stringify(ch)}`,
    );
    this.name = "MissingGlyphError";
  }
}

/**
 * Width in image pixels of `text` drawn by {@link drawText} at `scale` (one blank column between
 * glyphs).
 */
export function textWidth(text: string, scale: number): number {
  return text.length === 0 ? 0 : (text.length * (GLYPH_SIZE.width + 1) - 1) * scale;
}

/**
 * Draws `text` with its top-left corner at (x, y), glyphs `scale` pixels per bitmap pixel and one
 * blank bitmap column between them.
 * @throws MissingGlyphError for a character outside {@link GLYPHS}.
 */
export function drawText(
  image: RgbImage,
  text: string,
  at: { x: number; y: number; scale: number },
  colour: Rgb,
): void {
  [...text].forEach((ch, i) => {
    const glyph = GLYPHS[ch];
    if (glyph === undefined) throw new MissingGlyphError(ch);
    const x = at.x + i * (GLYPH_SIZE.width + 1) * at.scale;
    drawBitmap(image, glyph, { x, y: at.y, scale: at.scale }, colour);
  });
}

/** Reads the cards back from an EZPoints image, independently of the observation text. */
import { GLYPHS, SUIT_GLYPHS } from "../../../../workers/envs/bitmap_font.ts";
import { CARD_COLOURS, CARD_LAYOUT, cardOrigin } from "../../../../workers/envs/ezpoints/render.ts";
import { pixelAt, type RgbImage } from "../../../../workers/envs/raster.ts";

/** A card as seen in the image: the printed rank, the suit symbol and the ink colour. */
export interface SeenCard {
  rank: string;
  suit: string;
  ink: "red" | "black";
}

/** The `cols` × 7 bitmap at (x, y) sampled every `scale` pixels (`#` where not white). */
function sample(image: RgbImage, x: number, y: number, cols: number, scale: number): string[] {
  const rows: string[] = [];
  for (let r = 0; r < 7; r++) {
    let row = "";
    for (let c = 0; c < cols; c++) {
      const [red, green, blue] = pixelAt(image, x + c * scale, y + r * scale);
      row += red === 255 && green === 255 && blue === 255 ? "." : "#";
    }
    rows.push(row);
  }
  return rows;
}

function match(bitmap: string[], glyphs: Readonly<Record<string, readonly string[]>>): string {
  const hit = Object.entries(glyphs).find(([, g]) => g.join("|") === bitmap.join("|"));
  return hit === undefined ? "?" : hit[0];
}

/** The cards of an EZPoints image, left to right; `?` where a glyph matches nothing. */
export function readCards(image: RgbImage, count: number): SeenCard[] {
  const out: SeenCard[] = [];
  const { rank, suit } = CARD_LAYOUT;
  for (let i = 0; i < count; i++) {
    const { x, y } = cardOrigin(i);
    let text = "";
    for (let g = 0; g < 2; g++) {
      const gx = x + rank.x + g * 6 * rank.scale;
      const bitmap = sample(image, gx, y + rank.y, 5, rank.scale);
      if (bitmap.every((row) => !row.includes("#"))) continue;
      text += match(bitmap, GLYPHS);
    }
    const suitBitmap = sample(image, x + suit.x, y + suit.y, 7, suit.scale);
    const centre = pixelAt(image, x + suit.x + 3 * suit.scale + 1, y + suit.y + 3 * suit.scale + 1);
    out.push({
      rank: text,
      suit: match(suitBitmap, SUIT_GLYPHS),
      ink: centre.join(",") === CARD_COLOURS.red.join(",") ? "red" : "black",
    });
  }
  return out;
}

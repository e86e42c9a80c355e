/**
 * EZPoints as an image: the cards side by side on a green table (RL4VLM's gym-cards colour),
 * each a white 40 × 56 card with a grey border, its rank in the top-left corner (5 × 7 glyphs at
 * scale 2) and its suit symbol below the middle (7 × 7 at scale 3), both in the suit's colour
 * (red hearts and diamonds, black spades and clubs). Image size: `cards · 48 + 8` × 72 pixels
 * (104 × 72 for 2 cards). The formula is not drawn: it stays in the observation text.
 */
import { drawText, SUIT_GLYPHS } from "../bitmap_font.ts";
import { createImage, drawBitmap, fillRect, type Rgb, type RgbImage } from "../raster.ts";
import { type Card, rankSymbol, type Suit } from "./cards.ts";

/** Geometry of the card image (pixels). */
export const CARD_LAYOUT = {
  /** Card width and height. */
  width: 40,
  height: 56,
  /** Table margin around and between cards. */
  gap: 8,
  /** Rank glyphs: top-left offset inside the card and scale. */
  rank: { x: 3, y: 3, scale: 2 },
  /** Suit symbol: top-left offset inside the card and scale (21 × 21 pixels). */
  suit: { x: 10, y: 28, scale: 3 },
} as const;

/** Colours of the card image. */
export const CARD_COLOURS = {
  table: [53, 101, 77] as Rgb,
  card: [255, 255, 255] as Rgb,
  border: [150, 150, 150] as Rgb,
  red: [200, 30, 30] as Rgb,
  black: [0, 0, 0] as Rgb,
} as const;

/** The ink colour of a suit. */
export function suitColour(suit: Suit): Rgb {
  return suit === "hearts" || suit === "diamonds" ? CARD_COLOURS.red : CARD_COLOURS.black;
}

/** Top-left pixel of card `i` on the table. */
export function cardOrigin(i: number): { x: number; y: number } {
  return { x: CARD_LAYOUT.gap + i * (CARD_LAYOUT.width + CARD_LAYOUT.gap), y: CARD_LAYOUT.gap };
}

/** The image of `hand`: `(cards · 48 + 8)` × 72 RGB pixels, cards left to right in hand order. */
export function renderCardsImage(hand: readonly Card[]): RgbImage {
  const { width, height, gap } = CARD_LAYOUT;
  const image = createImage(
    hand.length * (width + gap) + gap,
    height + 2 * gap,
    CARD_COLOURS.table,
  );
  hand.forEach((card, i) => {
    const { x, y } = cardOrigin(i);
    fillRect(image, { x, y, w: width, h: height }, CARD_COLOURS.border);
    fillRect(image, { x: x + 1, y: y + 1, w: width - 2, h: height - 2 }, CARD_COLOURS.card);
    const ink = suitColour(card.suit);
    const { rank, suit } = CARD_LAYOUT;
    drawText(
      image,
      rankSymbol(card.rank),
      { x: x + rank.x, y: y + rank.y, scale: rank.scale },
      ink,
    );
    drawBitmap(
      image,
      SUIT_GLYPHS[card.suit],
      { x: x + suit.x, y: y + suit.y, scale: suit.scale },
      ink,
    );
  });
  return image;
}

/**
 * Sokoban as an image (the vision variant, `render: "image"`): one square tile of
 * {@link SOKOBAN_TILE_PX} pixels per cell, filled with the colour of what stands there, so a
 * 6 × 6 room is a 48 × 48 RGB image. Solid tiles, no anti-aliasing: every pixel of a tile has
 * exactly the colour of its cell's symbol in the text grid.
 */
import { createImage, fillRect, type Rgb, type RgbImage } from "../raster.ts";
import { type Room, type SokobanState, SYMBOLS } from "./room.ts";

/** Side of one cell's tile in pixels. */
export const SOKOBAN_TILE_PX = 8;

/** What a cell shows, named as in {@link SYMBOLS}. */
export type CellKind = keyof typeof SYMBOLS;

/** Tile colour and its name (used in the system line) for each kind of cell. */
export const SOKOBAN_PALETTE: Readonly<Record<CellKind, { name: string; rgb: Rgb }>> = {
  wall: { name: "grey", rgb: [96, 96, 96] },
  floor: { name: "black", rgb: [0, 0, 0] },
  target: { name: "red", rgb: [220, 40, 40] },
  box: { name: "yellow", rgb: [240, 200, 40] },
  boxOnTarget: { name: "green", rgb: [40, 190, 70] },
  player: { name: "blue", rgb: [50, 100, 240] },
  playerOnTarget: { name: "purple", rgb: [170, 60, 210] },
};

/** The kind of cell `i` in `state` (the same rule as `renderGrid`). */
export function cellKindAt(room: Room, state: SokobanState, i: number): CellKind {
  const target = room.targets.includes(i);
  if (room.walls[i]) return "wall";
  if (state.player === i) return target ? "playerOnTarget" : "player";
  if (state.boxes.includes(i)) return target ? "boxOnTarget" : "box";
  return target ? "target" : "floor";
}

/**
 * The image of `state` in `room`: `size * SOKOBAN_TILE_PX` pixels square, the cell in row r,
 * column c covering x in [c·8, c·8 + 8) and y in [r·8, r·8 + 8).
 */
export function renderSokobanImage(room: Room, state: SokobanState): RgbImage {
  const side = room.size * SOKOBAN_TILE_PX;
  const image = createImage(side, side, SOKOBAN_PALETTE.floor.rgb); // (side, side, 3)
  for (let r = 0; r < room.size; r++) {
    for (let c = 0; c < room.size; c++) {
      const kind = cellKindAt(room, state, r * room.size + c);
      if (kind === "floor") continue;
      fillRect(image, {
        x: c * SOKOBAN_TILE_PX,
        y: r * SOKOBAN_TILE_PX,
        w: SOKOBAN_TILE_PX,
        h: SOKOBAN_TILE_PX,
      }, SOKOBAN_PALETTE[kind].rgb);
    }
  }
  return image;
}

/**
 * Sokoban rules on a square grid: rooms, states, moves, rendering and parsing.
 *
 * Cells are indexed row-major, `index = row * size + col`, row 0 at the top. The border is
 * always wall. Symbols are RAGEN/verl-agent's: `#` wall, `_` floor, `O` target, `X` box,
 * `√` box on target, `P` player, `S` player on target. Rendered rows put one space between
 * cells so each cell is its own token.
 */
import { ObservationParseError } from "../errors.ts";

/** The four moves, also the admissible actions (in this order). */
export const DIRECTIONS = ["up", "down", "left", "right"] as const;

/** One move of the player. */
export type Direction = typeof DIRECTIONS[number];

/** The static part of a level: walls and targets. */
export interface Room {
  /** Side length in cells, border walls included. */
  size: number;
  /** 1 where there is a wall; length `size * size`. */
  walls: Uint8Array;
  /** Target cells, ascending. */
  targets: number[];
}

/** The moving part of a level. */
export interface SokobanState {
  player: number;
  /** Box cells, ascending. */
  boxes: number[];
}

/** What one move did. */
export interface MoveOutcome {
  state: SokobanState;
  /** The player changed cell. */
  moved: boolean;
  /** A box was pushed: its cell before and after. */
  push?: { from: number; to: number };
}

/** Symbols of the text grid. */
export const SYMBOLS = {
  wall: "#",
  floor: "_",
  target: "O",
  box: "X",
  boxOnTarget: "√",
  player: "P",
  playerOnTarget: "S",
} as const;

/** Thrown when a text grid cannot be read back into a room and state. */
export class GridParseError extends ObservationParseError {
  /** @param message "Cannot parse grid as X must be Y: current value is V". */
  constructor(message: string) {
    super(message);
    this.name = "GridParseError";
  }
}

/** The index offset of one step in `dir` on a grid of side `size`. */
export function offsetOf(dir: Direction, size: number): number {
  switch (dir) {
    case "up":
      return -size;
    case "down":
      return size;
    case "left":
      return -1;
    case "right":
      return 1;
  }
}

/**
 * Moves the player one cell in `dir`, pushing a box when there is one and the cell behind it is
 * free. Moving into a wall or an unpushable box leaves the state as it is (`moved: false`).
 */
export function move(room: Room, state: SokobanState, dir: Direction): MoveOutcome {
  const d = offsetOf(dir, room.size);
  const next = state.player + d;
  if (room.walls[next]) return { state, moved: false };
  const boxAt = state.boxes.indexOf(next);
  if (boxAt < 0) return { state: { player: next, boxes: state.boxes }, moved: true };
  const behind = next + d;
  if (room.walls[behind] || state.boxes.includes(behind)) return { state, moved: false };
  const boxes = state.boxes.slice();
  boxes[boxAt] = behind;
  boxes.sort((a, b) => a - b);
  return { state: { player: next, boxes }, moved: true, push: { from: next, to: behind } };
}

/** Number of boxes standing on targets. */
export function boxesOnTargets(room: Room, state: SokobanState): number {
  let n = 0;
  for (const b of state.boxes) if (room.targets.includes(b)) n++;
  return n;
}

/** True when every box stands on a target. */
export function isSolved(room: Room, state: SokobanState): boolean {
  return boxesOnTargets(room, state) === state.boxes.length;
}

/** The text grid: one row per line, cells separated by one space. */
export function renderGrid(room: Room, state: SokobanState): string {
  const rows: string[] = [];
  for (let r = 0; r < room.size; r++) {
    const cells: string[] = [];
    for (let c = 0; c < room.size; c++) {
      const i = r * room.size + c;
      const target = room.targets.includes(i);
      if (room.walls[i]) cells.push(SYMBOLS.wall);
      else if (state.player === i) cells.push(target ? SYMBOLS.playerOnTarget : SYMBOLS.player);
      else if (state.boxes.includes(i)) cells.push(target ? SYMBOLS.boxOnTarget : SYMBOLS.box);
      else cells.push(target ? SYMBOLS.target : SYMBOLS.floor);
    }
    rows.push(cells.join(" "));
  }
  return rows.join("\n");
}

/**
 * The relative-position line of option `relative_positions`: every box, then every target, as
 * rows and columns from the player, e.g. `box 1 up 0 right target 2 up 1 left` (the box is one
 * row above the player in its column; the target two rows up and one column left). Cells counted
 * as grid steps; 0 is written `0 down` / `0 right`.
 */
export function renderRelativePositions(room: Room, state: SokobanState): string {
  const pr = Math.floor(state.player / room.size);
  const pc = state.player % room.size;
  const offset = (i: number): string => {
    const dr = Math.floor(i / room.size) - pr;
    const dc = (i % room.size) - pc;
    return `${Math.abs(dr)} ${dr >= 0 ? "down" : "up"} ${Math.abs(dc)} ${
      dc >= 0 ? "right" : "left"
    }`;
  };
  return [
    ...state.boxes.map((b) => `box ${offset(b)}`),
    ...room.targets.map((t) => `target ${offset(t)}`),
  ].join(" ");
}

/** The grid rows of an observation text: its leading lines that start with a wall (`#`). */
export function gridLinesOf(text: string): string {
  const lines = text.split("\n");
  const end = lines.findIndex((line) => !line.startsWith(SYMBOLS.wall));
  return (end < 0 ? lines : lines.slice(0, end)).join("\n");
}

/**
 * Reads a grid written by {@link renderGrid} (cell separators optional) back into room and state.
 * @throws GridParseError when rows differ in length, the grid is not square, a symbol is
 *   unknown, there is not exactly one player, or a border cell is not a wall.
 */
export function parseGrid(text: string): { room: Room; state: SokobanState } {
  const rows = text.trim().split("\n").map((row) => [...row.replace(/\s+/g, "")]);
  const size = rows.length;
  for (const row of rows) {
    if (row.length !== size) {
      throw new GridParseError(
        `Cannot parse grid as every row must have ${size} cells: current value is ${row.length}`,
      );
    }
  }
  const walls = new Uint8Array(size * size);
  const targets: number[] = [];
  const boxes: number[] = [];
  const players: number[] = [];
  rows.forEach((row, r) =>
    row.forEach((ch, c) => {
      const i = r * size + c;
      switch (ch) {
        case SYMBOLS.wall:
          walls[i] = 1;
          break;
        case SYMBOLS.floor:
          break;
        case SYMBOLS.target:
          targets.push(i);
          break;
        case SYMBOLS.box:
          boxes.push(i);
          break;
        case SYMBOLS.boxOnTarget:
          boxes.push(i);
          targets.push(i);
          break;
        case SYMBOLS.player:
          players.push(i);
          break;
        case SYMBOLS.playerOnTarget:
          players.push(i);
          targets.push(i);
          break;
        default:
          throw new GridParseError(
            `Cannot parse grid as cells must be one of # _ O X √ P S: current value is ${ch}`,
          );
      }
    })
  );
  if (players.length !== 1) {
    throw new GridParseError(
      `Cannot parse grid as there must be exactly one player: current value is ${players.length}`,
    );
  }
  // Moves index cells as r * size + c with no bounds check, relying on the border walls every
  // generated room has: without them the player walks off the grid, and a planner over such a
  // "room" (the expert, e.g. served over HTTP) searched an unbounded state space.
  for (let k = 0; k < size; k++) {
    for (const i of [k, (size - 1) * size + k, k * size, k * size + size - 1]) {
      if (!walls[i]) {
        const [r, c] = [Math.floor(i / size), i % size];
        throw new GridParseError(
          `Cannot parse grid as every border cell must be a wall (#): current value at row ${
            r + 1
          }, column ${c + 1} is ${rows[r][c]}`,
        );
      }
    }
  }
  return { room: { size, walls, targets }, state: { player: players[0], boxes } };
}

/** A compact key of a state: player and boxes (for BFS and repeat detection). */
export function stateKey(state: SokobanState): string {
  return `${state.player}:${state.boxes.join(",")}`;
}

/** The wall layout as a string of 0/1 (what "layout" means when splits are compared). */
export function layoutKey(room: Room): string {
  return `${room.size}:${room.walls.join("")}`;
}

/** Cells reachable by the player from `from` without crossing walls or `blocked` cells. */
export function reachable(room: Room, from: number, blocked: readonly number[] = []): Set<number> {
  const seen = new Set<number>([from]);
  const queue = [from];
  while (queue.length > 0) {
    const cell = queue.pop()!;
    for (const dir of DIRECTIONS) {
      const next = cell + offsetOf(dir, room.size);
      if (room.walls[next] || blocked.includes(next) || seen.has(next)) continue;
      seen.add(next);
      queue.push(next);
    }
  }
  return seen;
}

/**
 * Cells from which a lone box can still be pushed onto some target (the classic "simple
 * deadlock" table): found by pulling a box backwards from every target over the empty room.
 * A box outside this set, and not on a target, can never be placed; corners and walls
 * without targets are the usual cases.
 */
export function liveCells(room: Room): Set<number> {
  const live = new Set<number>(room.targets);
  const queue = [...room.targets];
  while (queue.length > 0) {
    const cell = queue.pop()!;
    for (const dir of DIRECTIONS) {
      const d = offsetOf(dir, room.size);
      // Pulling the box from `cell` to `cell + d` needs the player at `cell + d` and `cell + 2d`.
      const to = cell + d;
      const playerAfter = cell + 2 * d;
      if (room.walls[to] || room.walls[playerAfter] || live.has(to)) continue;
      live.add(to);
      queue.push(to);
    }
  }
  return live;
}

/** True when the box at `cell` has walls on two orthogonal sides (a corner). */
export function inCorner(room: Room, cell: number): boolean {
  const w = (dir: Direction) => room.walls[cell + offsetOf(dir, room.size)] === 1;
  return (w("up") || w("down")) && (w("left") || w("right"));
}

/**
 * Procedural Sokoban levels, solvable by construction.
 *
 * 1. A wall layout from one of two families (below).
 * 2. Targets and the player on random floor cells; boxes start on the targets.
 * 3. Reverse play (gym-sokoban, Schrader 2018): the player walks randomly and pulls boxes. Every
 *    pull undone is a legal push, so the reached state can be solved by replaying it backwards.
 * 4. The level is kept when no box starts on a target and the BFS solver finds a shortest plan of
 *    at least `minMoves` ({@link MIN_SOLUTION_MOVES} unless asked for more: the harder levels of
 *    the `min_moves` option) and at most {@link MAX_SOLUTION_MOVES} moves (so the default turn
 *    limit leaves slack); otherwise we retry with the next draws of the same seeded generator.
 *
 * Layout families (what makes `test_unseen` held out):
 * - `carved` (splits `train` and `test_seen`): gym-sokoban's random-walk carving of 3×3 patterns
 *   into a solid block; layouts that contain a pillar are rejected.
 * - `pillared` (split `test_unseen`): an open room with one or two pillars (for sizes ≥ 8) plus up
 *   to two wall notches along the border.
 * A pillar is an interior wall cell with floor on all four sides. Every `pillared` layout has one
 * and no `carved` layout does, so no `test_unseen` layout ever appears in `train`/`test_seen`.
 */
import { DIRECTIONS, offsetOf, reachable, type Room, type SokobanState } from "./room.ts";
import { Rng } from "../_rng.ts";
import { solve } from "./solver.ts";

/** The two wall-layout generators. */
export type LayoutFamily = "carved" | "pillared";

/** Longest shortest-solution (moves) a generated level may have. */
export const MAX_SOLUTION_MOVES = 14;

/** Shortest shortest-solution (moves) a generated level may have (no one-move levels). */
export const MIN_SOLUTION_MOVES = 3;

/** Draws before generation gives up (never reached for the bounded options; a guard). */
const MAX_ATTEMPTS = 2000;

/** Thrown when no level could be generated for the given seed and options. */
export class LevelGenerationError extends Error {
  /** @param message "Cannot generate level as …". */
  constructor(message: string) {
    super(message);
    this.name = "LevelGenerationError";
  }
}

/** A generated level. */
export interface Level {
  room: Room;
  start: SokobanState;
  /** A shortest plan from `start` (moves), found by BFS at generation time. */
  solution: string[];
}

/** True when `room` has an interior wall cell with floor on all four sides. */
export function hasPillar(room: Room): boolean {
  const s = room.size;
  for (let r = 1; r < s - 1; r++) {
    for (let c = 1; c < s - 1; c++) {
      const i = r * s + c;
      if (room.walls[i] && DIRECTIONS.every((d) => !room.walls[i + offsetOf(d, s)])) return true;
    }
  }
  return false;
}

/**
 * Generates one level; same `(seed, size, boxes, family, minMoves)` → same level. `minMoves`
 * (default {@link MIN_SOLUTION_MOVES}, at most {@link MAX_SOLUTION_MOVES}) is the fewest moves its
 * shortest plan may take; a level drawn with the default is the one every earlier version gave.
 * @throws LevelGenerationError when no draw of the seed passes (never seen for allowed options).
 */
export function generateLevel(
  seed: number,
  size: number,
  boxes: number,
  family: LayoutFamily,
  minMoves: number = MIN_SOLUTION_MOVES,
): Level {
  if (
    !Number.isInteger(minMoves) || minMoves < MIN_SOLUTION_MOVES || minMoves > MAX_SOLUTION_MOVES
  ) {
    throw new LevelGenerationError(
      `Cannot generate level as minMoves must be an integer in ${MIN_SOLUTION_MOVES}–` +
        `${MAX_SOLUTION_MOVES}: current value is ${minMoves}`,
    );
  }
  const rng = new Rng(seed);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const walls = family === "carved" ? carvedWalls(rng, size) : pillaredWalls(rng, size);
    if (walls === null) continue;
    const floor: number[] = [];
    for (let i = 0; i < walls.length; i++) if (!walls[i]) floor.push(i);
    if (floor.length < 2 * boxes + 4) continue;
    if (reachable({ size, walls, targets: [] }, floor[0]).size !== floor.length) continue;
    const cells = shuffled(rng, floor);
    const targets = cells.slice(0, boxes).sort((a, b) => a - b);
    const room: Room = { size, walls, targets };
    if (hasPillar(room) !== (family === "pillared")) continue;
    const end: SokobanState = { player: cells[boxes], boxes: targets.slice() };
    const start = reversePlay(rng, room, end, 10 * size + rng.int(10 * size));
    if (start.boxes.some((b) => targets.includes(b))) continue;
    const solution = solve(room, start, { maxDepth: MAX_SOLUTION_MOVES, maxStates: 200_000 });
    if (solution === null || solution.length < minMoves) continue;
    return { room, start, solution };
  }
  throw new LevelGenerationError(
    `Cannot generate level as ${MAX_ATTEMPTS} attempts must suffice: current value is seed ` +
      `${seed}, size ${size}, boxes ${boxes}, family ${family}, minMoves ${minMoves}`,
  );
}

/**
 * Random walk with pulls from `end`, `steps` draws long; returns the visited state whose boxes are
 * farthest (sum of Manhattan distances to their own targets) from where they started, as
 * gym-sokoban scores reverse-play states.
 */
function reversePlay(rng: Rng, room: Room, end: SokobanState, steps: number): SokobanState {
  const s = room.size;
  let player = end.player;
  const boxes = end.boxes.slice();
  let best: SokobanState = end;
  let bestScore = 0;
  for (let t = 0; t < steps; t++) {
    const dir = rng.pick(DIRECTIONS);
    const d = offsetOf(dir, s);
    const to = player + d;
    if (room.walls[to] || boxes.includes(to)) continue;
    const behind = boxes.indexOf(player - d);
    // Pull the box behind the player with probability 1/2 (it follows into the player's cell).
    if (behind >= 0 && rng.next() < 0.5) boxes[behind] = player;
    player = to;
    let score = 0;
    boxes.forEach((b, k) => {
      const goal = end.boxes[k];
      score += Math.abs(Math.floor(b / s) - Math.floor(goal / s)) + Math.abs((b % s) - (goal % s));
    });
    if (score > bestScore) {
      bestScore = score;
      best = { player, boxes: boxes.slice().sort((a, b) => a - b) };
    }
  }
  return best;
}

/** gym-sokoban's topology generation: carve 3×3 patterns along a random walk. */
function carvedWalls(rng: Rng, size: number): Uint8Array | null {
  const masks = [
    ["000", "111", "000"],
    ["010", "010", "010"],
    ["000", "110", "010"],
    ["000", "110", "110"],
    ["000", "011", "010"],
  ];
  const walls = new Uint8Array(size * size).fill(1);
  let r = 1 + rng.int(size - 2);
  let c = 1 + rng.int(size - 2);
  let dir = rng.pick(DIRECTIONS);
  const steps = Math.floor(1.5 * (size - 2) * 2);
  for (let t = 0; t < steps; t++) {
    if (rng.next() < 0.35) dir = rng.pick(DIRECTIONS);
    const mask = rng.pick(masks);
    for (let dr = -1; dr <= 1; dr++) {
      for (let dc = -1; dc <= 1; dc++) {
        if (mask[dr + 1][dc + 1] !== "1") continue;
        const rr = r + dr;
        const cc = c + dc;
        if (rr >= 1 && rr <= size - 2 && cc >= 1 && cc <= size - 2) walls[rr * size + cc] = 0;
      }
    }
    const d = offsetOf(dir, size);
    const nr = r + Math.trunc(d / size);
    const nc = c + (Math.abs(d) === 1 ? d : 0);
    if (nr >= 1 && nr <= size - 2 && nc >= 1 && nc <= size - 2) {
      r = nr;
      c = nc;
    }
  }
  return walls;
}

/** An open room with 1–2 pillars and up to two border notches; null when a draw breaks a rule. */
function pillaredWalls(rng: Rng, size: number): Uint8Array | null {
  const walls = new Uint8Array(size * size);
  for (let i = 0; i < size; i++) {
    walls[i] =
      walls[(size - 1) * size + i] =
      walls[i * size] =
      walls[i * size + size - 1] =
        1;
  }
  const pillarCells: number[] = [];
  for (let r = 2; r <= size - 3; r++) {
    for (let c = 2; c <= size - 3; c++) pillarCells.push(r * size + c);
  }
  if (pillarCells.length === 0) return null;
  const pillars = size >= 8 ? 1 + rng.int(2) : 1;
  const near = new Set<number>();
  for (let p = 0; p < pillars; p++) {
    const cell = rng.pick(pillarCells);
    if (near.has(cell)) continue;
    walls[cell] = 1;
    near.add(cell);
    for (const d of DIRECTIONS) near.add(cell + offsetOf(d, size));
    for (const d of DIRECTIONS) near.add(cell + 2 * offsetOf(d, size));
  }
  const notches = rng.int(3);
  for (let n = 0; n < notches; n++) {
    const r = 1 + rng.int(size - 2);
    const c = 1 + rng.int(size - 2);
    const onBorderRing = r === 1 || r === size - 2 || c === 1 || c === size - 2;
    const cell = r * size + c;
    if (onBorderRing && !near.has(cell)) walls[cell] = 1;
  }
  return walls;
}

function shuffled<T>(rng: Rng, items: readonly T[]): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

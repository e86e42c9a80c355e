/**
 * Breadth-first search over Sokoban states (player cell, box cells): shortest move sequences.
 *
 * Each BFS edge is one player move, so the plan found is optimal in moves (the unit of the turn
 * limit). States whose boxes stand on dead cells (see `liveCells`) are pruned; that never removes
 * a solution because a box on a dead cell can never be placed.
 */
import {
  type Direction,
  DIRECTIONS,
  isSolved,
  liveCells,
  move,
  type Room,
  type SokobanState,
} from "./room.ts";

/** Search bounds of {@link solve}. */
export interface SolveOptions {
  /** Longest plan searched, in moves. Default 200. */
  maxDepth?: number;
  /** Most states expanded before giving up. Default 500 000. */
  maxStates?: number;
}

/**
 * The shortest list of moves that solves `state` in `room`; `[]` when already solved; `null` when
 * no plan exists within the bounds (unsolvable, or too deep/too large to search).
 */
export function solve(
  room: Room,
  state: SokobanState,
  options: SolveOptions = {},
): Direction[] | null {
  const maxDepth = options.maxDepth ?? 200;
  const maxStates = options.maxStates ?? 500_000;
  if (isSolved(room, state)) return [];
  const live = liveCells(room);
  const n = room.size * room.size;
  // Numeric key: player + n * (box0 + n * (box1 + …)); exact for n ≤ 144 and up to 6 boxes.
  const keyOf = (s: SokobanState) => {
    let k = 0;
    for (let i = s.boxes.length - 1; i >= 0; i--) k = k * n + s.boxes[i];
    return k * n + s.player;
  };
  const parent = new Map<number, { prev: number; dir: Direction }>();
  const startKey = keyOf(state);
  parent.set(startKey, { prev: -1, dir: "up" });
  let frontier: { key: number; state: SokobanState }[] = [{ key: startKey, state }];
  for (let depth = 0; depth < maxDepth && frontier.length > 0; depth++) {
    const next: typeof frontier = [];
    for (const node of frontier) {
      for (const dir of DIRECTIONS) {
        const out = move(room, node.state, dir);
        if (!out.moved) continue;
        if (out.push && !live.has(out.push.to)) continue;
        const key = keyOf(out.state);
        if (parent.has(key)) continue;
        parent.set(key, { prev: node.key, dir });
        if (out.push && isSolved(room, out.state)) return pathTo(parent, key);
        next.push({ key, state: out.state });
        if (parent.size > maxStates) return null;
      }
    }
    frontier = next;
  }
  return null;
}

function pathTo(parent: Map<number, { prev: number; dir: Direction }>, key: number): Direction[] {
  const path: Direction[] = [];
  let k = key;
  for (let link = parent.get(k)!; link.prev !== -1; link = parent.get(k)!) {
    path.push(link.dir);
    k = link.prev;
  }
  return path.reverse();
}

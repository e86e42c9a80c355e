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

/**
 * The shortest list of moves that solves `state` in `room` while pushing in the directions of
 * `pushOrder`, in that order: the directions of its pushes, with repeats of the same direction
 * merged, equal `pushOrder` (as the reference analyzer's workflow skill lists them: "push it left
 * then up"). `null` when no such plan exists within the bounds. Breadth-first over (state, how
 * much of `pushOrder` was used), with the same dead-cell pruning as {@link solve}.
 */
export function solveFollowing(
  room: Room,
  state: SokobanState,
  pushOrder: readonly Direction[],
  options: SolveOptions = {},
): Direction[] | null {
  const maxDepth = options.maxDepth ?? 200;
  const maxStates = options.maxStates ?? 500_000;
  if (pushOrder.length === 0) return isSolved(room, state) ? [] : null;
  const live = liveCells(room);
  const n = room.size * room.size;
  const orders = pushOrder.length + 1;
  // Numeric key as in solve(), times the count of pushOrder's directions used so far (0…length).
  const keyOf = (s: SokobanState, used: number) => {
    let k = 0;
    for (let i = s.boxes.length - 1; i >= 0; i--) k = k * n + s.boxes[i];
    return (k * n + s.player) * orders + used;
  };
  const parent = new Map<number, { prev: number; dir: Direction }>();
  const startKey = keyOf(state, 0);
  parent.set(startKey, { prev: -1, dir: "up" });
  let frontier: { key: number; state: SokobanState; used: number }[] = [
    { key: startKey, state, used: 0 },
  ];
  for (let depth = 0; depth < maxDepth && frontier.length > 0; depth++) {
    const next: typeof frontier = [];
    for (const node of frontier) {
      for (const dir of DIRECTIONS) {
        const out = move(room, node.state, dir);
        if (!out.moved) continue;
        let used = node.used;
        if (out.push) {
          if (!live.has(out.push.to)) continue;
          // The last push's direction continues its run; the order's next direction starts one.
          const continues = used > 0 && pushOrder[used - 1] === dir;
          if (!continues && pushOrder[used] !== dir) continue;
          if (!continues) used++;
        }
        const key = keyOf(out.state, used);
        if (parent.has(key)) continue;
        parent.set(key, { prev: node.key, dir });
        if (out.push && used === pushOrder.length && isSolved(room, out.state)) {
          return pathTo(parent, key);
        }
        next.push({ key, state: out.state, used });
        if (parent.size > maxStates) return null;
      }
    }
    frontier = next;
  }
  return null;
}

/**
 * An independent Sokoban solver for tests: plain BFS over the rendered text grid, sharing no code
 * with workers/envs/sokoban (no dead-cell pruning, its own move rules).
 */

/** Shortest number of moves that solves the rendered `grid`, or null within `maxDepth`. */
export function independentShortestSolution(grid: string, maxDepth = 40): number | null {
  const rows = grid.split("\n").map((r) => r.split(" "));
  const h = rows.length;
  const w = rows[0].length;
  const wall = new Set<number>();
  const goals = new Set<number>();
  let player = -1;
  const boxes: number[] = [];
  rows.forEach((row, r) =>
    row.forEach((ch, c) => {
      const i = r * w + c;
      if (ch === "#") wall.add(i);
      if (ch === "O" || ch === "√" || ch === "S") goals.add(i);
      if (ch === "X" || ch === "√") boxes.push(i);
      if (ch === "P" || ch === "S") player = i;
    })
  );
  const key = (p: number, b: number[]) => `${p}|${[...b].sort((x, y) => x - y).join(",")}`;
  const done = (b: number[]) => b.every((x) => goals.has(x));
  if (done(boxes)) return 0;
  const seen = new Set([key(player, boxes)]);
  let frontier: [number, number[]][] = [[player, boxes]];
  for (let depth = 1; depth <= maxDepth && frontier.length > 0; depth++) {
    const next: [number, number[]][] = [];
    for (const [p, b] of frontier) {
      for (const d of [-w, w, -1, 1]) {
        const to = p + d;
        if (wall.has(to) || to < 0 || to >= h * w) continue;
        let nb = b;
        const k = b.indexOf(to);
        if (k >= 0) {
          const beyond = to + d;
          if (wall.has(beyond) || b.includes(beyond)) continue;
          nb = b.slice();
          nb[k] = beyond;
        }
        const s = key(to, nb);
        if (seen.has(s)) continue;
        if (done(nb)) return depth;
        seen.add(s);
        next.push([to, nb]);
      }
    }
    frontier = next;
  }
  return null;
}

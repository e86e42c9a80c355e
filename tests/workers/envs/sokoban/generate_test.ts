import assert from "node:assert/strict";
import {
  generateLevel,
  hasPillar,
  MAX_SOLUTION_MOVES,
} from "../../../../workers/envs/sokoban/generate.ts";
import { layoutKey, renderGrid } from "../../../../workers/envs/sokoban/room.ts";
import { layoutFamilyOf, sokobanEnvironment } from "../../../../workers/envs/sokoban/mod.ts";
import { SPLITS } from "../../../../workers/envs/types.ts";
import { independentShortestSolution } from "./_independent_solver.ts";

Deno.test("the same seed and options give the same level", () => {
  for (const seed of [0, 1, 123456789, 0xffffffff]) {
    const a = generateLevel(seed, 7, 2, "carved");
    const b = generateLevel(seed, 7, 2, "carved");
    assert.equal(renderGrid(a.room, a.start), renderGrid(b.room, b.start));
    assert.deepEqual(a.solution, b.solution);
  }
});

Deno.test("sampleTasks is deterministic for a seed and differs across seeds and splits", () => {
  const a = sokobanEnvironment.sampleTasks("train", 20, 42);
  const b = sokobanEnvironment.sampleTasks("train", 20, 42);
  assert.deepEqual(a, b);
  const c = sokobanEnvironment.sampleTasks("train", 20, 43);
  const d = sokobanEnvironment.sampleTasks("test_seen", 20, 42);
  assert.notDeepEqual(a.map((t) => t.seed), c.map((t) => t.seed));
  assert.notDeepEqual(a.map((t) => t.seed), d.map((t) => t.seed));
  assert.equal(new Set(a.map((t) => t.id)).size, 20);
});

Deno.test("every generated level is solvable and an independent BFS finds the same optimum", () => {
  for (const split of SPLITS) {
    for (const [size, boxes] of [[6, 1], [7, 2]]) {
      const tasks = sokobanEnvironment.sampleTasks(split, 40, 5, { size, boxes });
      for (const task of tasks) {
        const level = generateLevel(task.seed, size, boxes, layoutFamilyOf(split));
        const grid = renderGrid(level.room, level.start);
        const optimum = independentShortestSolution(grid, MAX_SOLUTION_MOVES);
        assert.notEqual(optimum, null, `unsolvable:\n${grid}`);
        assert.equal(optimum, level.solution.length, `not optimal:\n${grid}`);
      }
    }
  }
});

Deno.test("levels generate for every allowed size and box count", () => {
  for (let size = 6; size <= 10; size++) {
    for (let boxes = 1; boxes <= 3; boxes++) {
      for (const family of ["carved", "pillared"] as const) {
        const level = generateLevel(size * 10 + boxes, size, boxes, family);
        assert.equal(level.start.boxes.length, boxes);
        assert.ok(level.solution.length <= MAX_SOLUTION_MOVES);
      }
    }
  }
});

Deno.test("test_unseen shares no wall layout with train or test_seen", () => {
  const layouts = (split: "train" | "test_seen" | "test_unseen") =>
    sokobanEnvironment.sampleTasks(split, 200, 11).map((task) => {
      const level = generateLevel(task.seed, 6, 1, layoutFamilyOf(split));
      assert.equal(hasPillar(level.room), split === "test_unseen");
      return layoutKey(level.room);
    });
  const train = new Set([...layouts("train"), ...layouts("test_seen")]);
  const unseen = layouts("test_unseen");
  assert.ok(new Set(unseen).size > 20, "test_unseen should hold many layouts");
  for (const key of unseen) assert.ok(!train.has(key), `layout ${key} is in train`);
});

import assert from "node:assert/strict";
import {
  generateLevel,
  LevelGenerationError,
  MAX_SOLUTION_MOVES,
} from "../../../../workers/envs/sokoban/generate.ts";
import { renderGrid } from "../../../../workers/envs/sokoban/room.ts";
import {
  layoutFamilyOf,
  sokobanEnvironment,
  sokobanOptionsSchema,
} from "../../../../workers/envs/sokoban/mod.ts";
import { SPLITS } from "../../../../workers/envs/types.ts";
import { independentShortestSolution } from "./_independent_solver.ts";

const HARD = { size: 7, boxes: 2, min_moves: 8 };

Deno.test("min_moves keeps only levels whose shortest plan an independent BFS finds at 8–14 moves", () => {
  for (const split of SPLITS) {
    const tasks = sokobanEnvironment.sampleTasks(split, 30, 9, HARD);
    for (const task of tasks) {
      const level = generateLevel(task.seed, 7, 2, layoutFamilyOf(split), 8);
      const grid = renderGrid(level.room, level.start);
      const optimum = independentShortestSolution(grid, MAX_SOLUTION_MOVES);
      assert.notEqual(optimum, null, `unsolvable:\n${grid}`);
      assert.equal(optimum, level.solution.length, `not optimal:\n${grid}`);
      assert.ok(optimum! >= 8, `too short (${optimum} moves):\n${grid}`);
    }
  }
});

Deno.test("a hard task regenerates the same two-box level from its seed, with its id and options", () => {
  const [task] = sokobanEnvironment.sampleTasks("train", 1, 1, HARD);
  assert.equal(task.id, "sokoban/train/7x7-2-m8/3026545455");
  assert.equal(task.seed, 3026545455);
  assert.equal(task.instruction, "push all 2 boxes onto the targets");
  assert.equal(task.options.min_moves, 8);
  const level = generateLevel(task.seed, 7, 2, "carved", 8);
  assert.equal(
    renderGrid(level.room, level.start),
    [
      "# # # # # # #",
      "# # # _ _ _ #",
      "# # # X _ O #",
      "# # # _ X _ #",
      "# # # _ P # #",
      "# # # O _ # #",
      "# # # # # # #",
    ].join("\n"),
  );
  assert.deepEqual(level.solution, [
    "up",
    "right",
    "up",
    "up",
    "left",
    "left",
    "down",
    "right",
    "left",
    "down",
    "down",
  ]);
  const episode = sokobanEnvironment.createEpisode(task);
  assert.equal(
    episode.reset().text.split("\n").slice(0, 7).join("\n"),
    renderGrid(level.room, level.start),
  );
});

Deno.test("the known solution of the hard level pays -0.1 per move, +1 per box placed and +10 at the end", () => {
  const [task] = sokobanEnvironment.sampleTasks("train", 1, 1, HARD);
  const level = generateLevel(task.seed, 7, 2, "carved", 8);
  const episode = sokobanEnvironment.createEpisode(task);
  episode.reset();
  const rewards = level.solution.map((action) => episode.step(action));
  // The first box reaches its target on move 8 (right), the second on move 11 (down), which ends
  // it.
  assert.deepEqual(
    rewards.map((r) => Math.round(r.reward * 10) / 10),
    [-0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1, 0.9, -0.1, -0.1, 10.9],
  );
  assert.equal(rewards.at(-1)!.done, true);
  assert.equal(rewards.at(-1)!.won, true);
  assert.ok(rewards.slice(0, -1).every((r) => !r.done));
  const total = rewards.reduce((s, r) => s + r.reward, 0);
  assert.ok(Math.abs(total - (11 * -0.1 + 2 + 10)) < 1e-9, `total ${total}`);
});

Deno.test("the default min_moves leaves task ids, options and levels as before", () => {
  const [plain] = sokobanEnvironment.sampleTasks("train", 1, 1, { size: 7, boxes: 2 });
  assert.equal(plain.id, "sokoban/train/7x7-2/3026545455");
  assert.equal("min_moves" in plain.options, false);
  const [explicit] = sokobanEnvironment.sampleTasks("train", 1, 1, {
    size: 7,
    boxes: 2,
    min_moves: 3,
  });
  assert.deepEqual(explicit, plain);
  const a = generateLevel(plain.seed, 7, 2, "carved");
  const b = generateLevel(plain.seed, 7, 2, "carved", 3);
  assert.equal(renderGrid(a.room, a.start), renderGrid(b.room, b.start));
  const hard = generateLevel(plain.seed, 7, 2, "carved", 8);
  assert.ok(a.solution.length < 8, "this seed's default level is short, so min_moves changed it");
  assert.notEqual(renderGrid(hard.room, hard.start), renderGrid(a.room, a.start));
});

Deno.test("min_moves outside 3–14 is refused with its field named", () => {
  for (const bad of [2, 15, 8.5]) {
    const parsed = sokobanOptionsSchema.safeParse({ min_moves: bad });
    assert.equal(parsed.success, false);
    assert.deepEqual(parsed.error!.issues[0].path, ["min_moves"]);
  }
  assert.throws(() => generateLevel(1, 7, 2, "carved", 15), LevelGenerationError);
  assert.throws(
    () => sokobanEnvironment.sampleTasks("train", 1, 1, { min_moves: 2 }),
    /min_moves/,
  );
});

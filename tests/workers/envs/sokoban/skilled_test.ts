import assert from "node:assert/strict";
import { sokobanEnvironment as env } from "../../../../workers/envs/sokoban/mod.ts";
import type { Level } from "../../../../workers/envs/sokoban/generate.ts";
import { isSolved, move, parseGrid } from "../../../../workers/envs/sokoban/room.ts";
import { solve, solveFollowing } from "../../../../workers/envs/sokoban/solver.ts";
import { pushOrderOf, pushPlans } from "../../../../workers/envs/sokoban/skilled.ts";
import { rollout } from "./_rollout.ts";

// Box 2 below and 2 right of the target, the player below-right of the box: pushing up 2 then
// left 2 and pushing left 2 then up 2 both take 7 moves (1 walk + 2 pushes + 2 walk + 2 pushes).
const OPEN_ROOM = [
  "# # # # # # #",
  "# _ _ _ _ _ #",
  "# _ O _ _ _ #",
  "# _ _ _ _ _ #",
  "# _ _ _ X _ #",
  "# _ _ _ _ P #",
  "# # # # # # #",
].join("\n");

function openLevel(): Level {
  const { room, state } = parseGrid(OPEN_ROOM);
  return { room, start: state, solution: solve(room, state)! };
}

function replay(level: Level, moves: readonly string[]) {
  let state = level.start;
  for (const dir of moves) state = move(level.room, state, dir as "up").state;
  return state;
}

Deno.test("a plan that must push in a given order solves the level and pushes in that order", () => {
  const level = openLevel();
  for (const order of [["up", "left"], ["left", "up"]] as const) {
    const moves = solveFollowing(level.room, level.start, order)!;
    assert.equal(moves.length, 7, order.join(" then "));
    assert.ok(isSolved(level.room, replay(level, moves)));
    assert.deepEqual(pushOrderOf(level, moves), order);
  }
  // Left 1, up 2, left 1: one more walk behind the box each time the direction changes (9 moves).
  assert.equal(solveFollowing(level.room, level.start, ["left", "up", "left"])!.length, 9);
  // No plan pushes only down, or only left.
  assert.equal(solveFollowing(level.room, level.start, ["down"]), null);
  assert.equal(solveFollowing(level.room, level.start, ["left"]), null);
});

Deno.test("the push plans of a level are its shortest plan's order first, then the other orders within the move limit", () => {
  const level = openLevel();
  const plans = pushPlans(level, 7);
  assert.deepEqual(plans[0].moves, level.solution);
  assert.deepEqual(
    plans.map((p) => `${p.pushOrder.join(">")} ${p.moves.length}`).sort(),
    ["left>up 7", "up>left 7"],
  );
  // Two more moves allow the orders that change direction twice.
  const wider = pushPlans(level, 9).map((p) => p.pushOrder.join(">"));
  assert.ok(wider.includes("left>up>left") && wider.includes("up>left>up"), wider.join(", "));
});

Deno.test("a skilled demonstration wins, states its own episode's workflow skill, and often pushes in another order than the ordinary expert", () => {
  const options = { relative_positions: true, prompt: "compact" };
  const tasks = env.sampleTasks("train", 100, 3, options);
  let otherOrder = 0;
  for (const task of tasks) {
    const demo = env.skilledDemonstration!(task);
    const played = rollout(env, task, (obs) => `<action>${demo.expert.act(obs)}</action>`);
    assert.ok(played.won, task.id);
    assert.equal(env.referenceAnalysis(played).episode_skill, demo.skill, task.id);
    const expert = env.createExpert(task);
    const ordinary = rollout(env, task, (obs) => `<action>${expert.act(obs)}</action>`);
    if (env.referenceAnalysis(ordinary).episode_skill !== demo.skill) otherOrder++;
  }
  // 29% of 400 such tasks drew another order than the shortest plan's.
  assert.ok(otherOrder >= 15, `${otherOrder} of 100 in another order`);
  // The draw is fixed by the task.
  assert.equal(
    env.skilledDemonstration!(tasks[0]).skill,
    env.skilledDemonstration!(tasks[0]).skill,
  );
});

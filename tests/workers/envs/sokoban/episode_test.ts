import assert from "node:assert/strict";
import { EpisodeNotStartedError } from "../../../../workers/envs/errors.ts";
import { directionOf, SokobanEpisode } from "../../../../workers/envs/sokoban/episode.ts";
import type { Level } from "../../../../workers/envs/sokoban/generate.ts";
import { parseGrid } from "../../../../workers/envs/sokoban/room.ts";
import { sokobanEnvironment } from "../../../../workers/envs/sokoban/mod.ts";
import type { Task } from "../../../../workers/envs/types.ts";

const task: Task = {
  envId: "sokoban",
  id: "sokoban/train/hand",
  split: "train",
  seed: 0,
  family: "sokoban",
  instruction: "push the box onto the target",
  options: {},
};

/** A hand-made level from a grid (rows with spaces between cells). */
function levelOf(rows: string[]): Level {
  const { room, state } = parseGrid(rows.join("\n"));
  return { room, start: state, solution: [] };
}

const corridor = levelOf([
  "# # # # # #",
  "# _ _ _ _ #",
  "# P X _ O #",
  "# _ _ _ _ #",
  "# # # # # #",
  "# # # # # #",
]);

Deno.test("pushing the box onto the target pays -0.1 per step, +1 for the box and +10 on solving", () => {
  const ep = new SokobanEpisode(task, corridor, true);
  ep.reset();
  const first = ep.step("right");
  assert.equal(first.reward, -0.1);
  assert.equal(first.valid, true);
  assert.equal(first.done, false);
  assert.equal(first.info.pushed, true);
  const last = ep.step("right");
  assert.equal(last.reward, -0.1 + 1 + 10);
  assert.equal(last.done, true);
  assert.equal(last.won, true);
  assert.match(last.observation.text, /√/);
});

Deno.test("pushing a box off its target costs 1", () => {
  const level = levelOf([
    "# # # # # #",
    "# _ _ _ _ #",
    "# P √ _ _ #",
    "# _ _ _ _ #",
    "# _ X O _ #",
    "# # # # # #",
  ]);
  const ep = new SokobanEpisode(
    { ...task, instruction: "push all 2 boxes onto the targets" },
    level,
    false,
  );
  ep.reset();
  const r = ep.step("right");
  assert.equal(r.reward, -1.1);
  assert.equal(r.info.boxes_on_targets, 0);
});

Deno.test("garbage and inadmissible actions are invalid, leave the state unchanged and the episode running", () => {
  const ep = new SokobanEpisode(task, corridor, true);
  const start = ep.reset();
  for (const bad of ["", "jump", "up left", "<action>", "north", "🙂"]) {
    const r = ep.step(bad);
    assert.equal(r.valid, false, bad);
    assert.equal(r.done, false);
    assert.equal(r.reward, -0.1);
    assert.equal(r.observation.text, start.text);
  }
  assert.equal(ep.step("  RIGHT. ").valid, true);
});

Deno.test("directionOf accepts case, spaces, punctuation and a move/go/push prefix", () => {
  assert.equal(directionOf(" Up "), "up");
  assert.equal(directionOf("move LEFT"), "left");
  assert.equal(directionOf("push down."), "down");
  assert.equal(directionOf("go right"), "right");
  assert.equal(directionOf("upward"), null);
  assert.equal(directionOf("left right"), null);
});

Deno.test("walking into a wall is valid and changes nothing", () => {
  const ep = new SokobanEpisode(task, corridor, true);
  const start = ep.reset();
  const r = ep.step("left");
  assert.equal(r.valid, true);
  assert.equal(r.info.moved, false);
  assert.equal(r.observation.text, start.text);
});

Deno.test("a box pushed against a wall with no target ends the episode as lost unless end_on_deadlock is off", () => {
  const rows = [
    "# # # # # #",
    "# _ _ _ _ #",
    "# _ _ _ _ #",
    "# _ X P _ #",
    "# _ _ _ O #",
    "# # # # # #",
  ];
  const ended = new SokobanEpisode(task, levelOf(rows), true);
  ended.reset();
  const r = ended.step("left");
  assert.equal(r.info.deadlock, true);
  assert.equal(r.done, true);
  assert.equal(r.won, false);
  const afterEnd = ended.step("up");
  assert.equal(afterEnd.valid, false);
  assert.equal(afterEnd.reward, 0);
  const open = new SokobanEpisode(task, levelOf(rows), false);
  open.reset();
  const kept = open.step("left");
  assert.equal(kept.info.deadlock, true);
  assert.equal(kept.done, false);
});

Deno.test("step before reset throws and reset restarts the same task", () => {
  const ep = sokobanEnvironment.createEpisode(sokobanEnvironment.sampleTasks("train", 1, 1)[0]);
  assert.throws(() => ep.step("up"), EpisodeNotStartedError);
  const first = ep.reset();
  assert.deepEqual(first.admissibleActions, ["up", "down", "left", "right"]);
  ep.step("up");
  ep.step("left");
  assert.deepEqual(ep.reset(), first);
});

Deno.test("feedback says what each move did: walk, wall, push, onto and off the target, dead cell", () => {
  const ep = new SokobanEpisode(task, corridor, false);
  ep.reset();
  const said = (action: string) => ep.step(action).feedback;
  assert.equal(said("left"), "walked left into a wall and changed nothing");
  assert.equal(said("up"), "walked up");
  assert.equal(said("down"), "walked down");
  assert.equal(said("right"), "pushed the box right");
  assert.equal(said("right"), "pushed the box right onto the target");
  assert.equal(ep.step("left").feedback, undefined, "the episode is over: nothing to report");
  const dead = new SokobanEpisode(task, corridor, false);
  dead.reset();
  dead.step("up");
  dead.step("right");
  // From above the box, pushing down moves it against the south wall, away from any target.
  assert.equal(dead.step("down").feedback, "pushed the box down where it can never reach a target");
  // The box is now against the south wall, right under the player.
  assert.equal(dead.step("down").feedback, "walked down into a stuck box and changed nothing");
  assert.equal(dead.step("jump").feedback, undefined, "an invalid action has no effect to report");
  const off = new SokobanEpisode(
    task,
    levelOf([
      "# # # # # #",
      "# _ _ _ _ #",
      "# _ _ P √ #",
      "# _ _ _ _ #",
      "# _ O X _ #",
      "# # # # # #",
    ]),
    false,
  );
  off.reset();
  off.step("up");
  off.step("right");
  // Two boxes: "a box", as the reference analyzer says it.
  assert.equal(off.step("down").feedback, "pushed a box down off its target");
});

/**
 * What one Sokoban move did, as one short sentence (`StepResult.feedback`, workers/envs/types.ts):
 * the analyzer prompt shows it as the step's `Effect:` line. The grid observation shows the new
 * state but not the move, and a tiny analyzer cannot diff two grids; ALFWorld-style environments
 * say the same in their observations ("You pick up the apple"). Every word is in
 * {@link FEEDBACK_TEMPLATES}, so the vocabulary is known in advance.
 */
import { type Direction, type MoveOutcome, offsetOf, type Room } from "./room.ts";

/** Sentence templates of {@link moveFeedback}; `{box}` is `the box` or `a box`. */
export const FEEDBACK_TEMPLATES = {
  walked: "walked {dir}",
  wall: "walked {dir} into a wall and changed nothing",
  stuck: "walked {dir} into a stuck box and changed nothing",
  pushed: "pushed {box} {dir}",
  onto: "pushed {box} {dir} onto the target",
  off: "pushed {box} {dir} off its target",
  dead: "pushed {box} {dir} where it can never reach a target",
} as const;

/**
 * The feedback sentence of one valid move `dir` in `room`, from the player cell `from` before
 * it, with its `outcome` (room.ts `move`); `live` = cells from which a box can still reach a
 * target (room.ts `liveCells`); `manyBoxes` picks `a box` over `the box`.
 */
export function moveFeedback(
  room: Room,
  from: number,
  dir: Direction,
  outcome: MoveOutcome,
  options: { live: ReadonlySet<number>; manyBoxes: boolean },
): string {
  const { push } = outcome;
  if (!outcome.moved) {
    const blocked = room.walls[from + offsetOf(dir, room.size)];
    const template = blocked ? FEEDBACK_TEMPLATES.wall : FEEDBACK_TEMPLATES.stuck;
    return template.replace("{dir}", dir);
  }
  if (push === undefined) return FEEDBACK_TEMPLATES.walked.replace("{dir}", dir);
  const onTarget = (cell: number) => room.targets.includes(cell);
  const template = onTarget(push.to) && !onTarget(push.from)
    ? FEEDBACK_TEMPLATES.onto
    : onTarget(push.from) && !onTarget(push.to)
    ? FEEDBACK_TEMPLATES.off
    : !options.live.has(push.to) && !onTarget(push.to)
    ? FEEDBACK_TEMPLATES.dead
    : FEEDBACK_TEMPLATES.pushed;
  return template.replace("{box}", options.manyBoxes ? "a box" : "the box").replace("{dir}", dir);
}

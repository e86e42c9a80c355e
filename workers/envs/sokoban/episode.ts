/**
 * A live Sokoban episode: rewards, validity, deadlock ending.
 *
 * Rewards (RAGEN/verl-agent): −0.1 every step (invalid ones too), +1 when a box is pushed onto a
 * target, −1 when one is pushed off, +10 when the level is solved.
 *
 * With `render: "image"` every observation also carries the room as an image (render.ts); its
 * text stays the grid, the truthful description the expert and the analyzer read.
 */
import type { Episode, Observation, StepResult, Task } from "../types.ts";
import { EpisodeNotStartedError } from "../errors.ts";
import type { Level } from "./generate.ts";
import { moveFeedback } from "./feedback.ts";
import { renderSokobanImage } from "./render.ts";
import {
  boxesOnTargets,
  type Direction,
  DIRECTIONS,
  isSolved,
  liveCells,
  move,
  renderGrid,
  renderRelativePositions,
  type SokobanState,
} from "./room.ts";

/** Reward of every step. */
export const STEP_REWARD = -0.1;
/** Reward for pushing a box onto a target (negated for pushing one off). */
export const BOX_REWARD = 1;
/** Reward for solving the level. */
export const SOLVE_REWARD = 10;

/**
 * The direction named by an action text (case, surrounding spaces and punctuation ignored,
 * `move up`/`go up`/`push up` accepted); `null` for anything else.
 */
export function directionOf(actionText: string): Direction | null {
  const words = actionText.toLowerCase().match(/[a-z]+/g) ?? [];
  const stripped = words[0] === "move" || words[0] === "go" || words[0] === "push"
    ? words.slice(1)
    : words;
  if (stripped.length !== 1) return null;
  return (DIRECTIONS as readonly string[]).includes(stripped[0]) ? stripped[0] as Direction : null;
}

/** One Sokoban episode; see the module doc for rewards. */
export class SokobanEpisode implements Episode {
  readonly task: Task;
  readonly #level: Level;
  readonly #endOnDeadlock: boolean;
  readonly #relativePositions: boolean;
  readonly #render: "text" | "image";
  readonly #live: Set<number>;
  #state: SokobanState | null = null;
  #done = false;
  #turn = 0;

  /**
   * @param task the task; @param level its generated level; @param endOnDeadlock end when a box
   * is dead; @param render `image` adds the room image to every observation; @param
   * relativePositions adds the line of `renderRelativePositions` under the grid.
   */
  constructor(
    task: Task,
    level: Level,
    endOnDeadlock: boolean,
    render: "text" | "image" = "text",
    relativePositions = false,
  ) {
    this.task = task;
    this.#level = level;
    this.#endOnDeadlock = endOnDeadlock;
    this.#render = render;
    this.#relativePositions = relativePositions;
    this.#live = liveCells(level.room);
  }

  /** The initial grid with the four moves as admissible actions. */
  reset(): Observation {
    this.#state = this.#level.start;
    this.#done = false;
    this.#turn = 0;
    return this.#observe();
  }

  /**
   * One move. Anything but up/down/left/right is invalid (state unchanged, reward −0.1), as is
   * any action after the episode ended. Walking into a wall is valid and changes nothing.
   * @throws EpisodeNotStartedError before `reset()`.
   */
  step(actionText: string): StepResult {
    if (this.#state === null) throw new EpisodeNotStartedError(this.task.id);
    const room = this.#level.room;
    const dir = directionOf(actionText);
    if (this.#done || dir === null) {
      return {
        observation: this.#observe(),
        reward: this.#done ? 0 : STEP_REWARD,
        done: this.#done,
        won: this.#done && isSolved(room, this.#state),
        valid: false,
        info: this.#info({ moved: false, pushed: false, deadlock: false }),
      };
    }
    this.#turn++;
    const before = boxesOnTargets(room, this.#state);
    const from = this.#state.player;
    const out = move(room, this.#state, dir);
    this.#state = out.state;
    const after = boxesOnTargets(room, out.state);
    const won = isSolved(room, out.state);
    const deadlock = !won && out.state.boxes.some((b) => !this.#live.has(b));
    this.#done = won || (deadlock && this.#endOnDeadlock);
    const reward = STEP_REWARD + BOX_REWARD * (after - before) + (won ? SOLVE_REWARD : 0);
    return {
      observation: this.#observe(),
      reward: Math.round(reward * 1e6) / 1e6,
      done: this.#done,
      won,
      valid: true,
      info: this.#info({ moved: out.moved, pushed: out.push !== undefined, deadlock }),
      feedback: moveFeedback(room, from, dir, out, {
        live: this.#live,
        manyBoxes: out.state.boxes.length > 1,
      }),
    };
  }

  #observe(): Observation {
    const grid = renderGrid(this.#level.room, this.#state!);
    const observation: Observation = {
      text: this.#relativePositions
        ? `${grid}\n${renderRelativePositions(this.#level.room, this.#state!)}`
        : grid,
      admissibleActions: [...DIRECTIONS],
    };
    if (this.#render === "image") {
      observation.image = renderSokobanImage(this.#level.room, this.#state!);
    }
    return observation;
  }

  #info(extra: { moved: boolean; pushed: boolean; deadlock: boolean }): Record<string, unknown> {
    return {
      ...extra,
      turn: this.#turn,
      boxes_on_targets: boxesOnTargets(this.#level.room, this.#state!),
      boxes: this.#state!.boxes.length,
    };
  }
}

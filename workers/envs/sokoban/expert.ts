/**
 * Sokoban's scripted expert: a BFS planner over (player, boxes) states.
 *
 * It reads the grid from each observation, so it also recovers when it is handed a state it
 * did not plan for (the plan is recomputed whenever the observed state is not the expected one).
 */
import type { Expert, Observation } from "../types.ts";
import { type Direction, gridLinesOf, move, parseGrid, stateKey } from "./room.ts";
import { solve } from "./solver.ts";

/** Search bounds of the expert's planner (moves, states). */
const PLAN_LIMITS = { maxDepth: 200, maxStates: 1_000_000 };

/** The expert of one task (any task: it plans from the observed grid). */
export class SokobanExpert implements Expert {
  #plan: Direction[] = [];
  #expectedKey = "";

  /**
   * The next move of a shortest plan from the observed grid; `up` when the level cannot be
   * solved any more (a deadlock), so the episode still advances.
   * @throws GridParseError when the observation is not a Sokoban grid.
   */
  act(observation: Observation): string {
    const { room, state } = parseGrid(gridLinesOf(observation.text));
    if (this.#plan.length === 0 || stateKey(state) !== this.#expectedKey) {
      this.#plan = solve(room, state, PLAN_LIMITS) ?? [];
    }
    const next = this.#plan.shift();
    if (next === undefined) {
      this.#expectedKey = "";
      return "up";
    }
    this.#expectedKey = stateKey(move(room, state, next).state);
    return next;
  }
}

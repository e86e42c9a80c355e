/**
 * Sokoban's demonstrations that need their skill (Environment.skilledDemonstration).
 *
 * The ordinary expert plays one shortest plan, which the grid alone determines, so a policy taught
 * on its demonstrations with their own workflow skill in the prompt learns to ignore the skill.
 * Most levels can also be solved by pushing in another order ("push it up then left" instead of
 * "left then up") in a few more moves. A skilled demonstration draws one of the orders that solve
 * the level within {@link PLAN_SLACK_MOVES} moves of the shortest plan, states it as the workflow
 * skill, and follows the shortest plan that pushes in that order: where the orders part, only the
 * skill tells which way the demonstration goes.
 */
import type { Expert, Observation, SkilledDemonstration } from "../types.ts";
import { Rng, seedOf } from "../_rng.ts";
import { workflowSkill } from "./analyzer.ts";
import { SokobanExpert } from "./expert.ts";
import type { Level } from "./generate.ts";
import { MAX_PUSH_DIRECTIONS } from "./judge.ts";
import { type Direction, DIRECTIONS, gridLinesOf, move, parseGrid, stateKey } from "./room.ts";
import { solveFollowing } from "./solver.ts";

/** Most moves a skilled demonstration's plan may take beyond the level's shortest plan. */
export const PLAN_SLACK_MOVES = 8;

/** Most moves of a skilled demonstration's plan: two turns under the 20-turn default. */
export const MAX_PLAN_MOVES = 18;

/** Search bounds of one order's plan (moves, states). */
const PLAN_LIMITS = { maxDepth: 200, maxStates: 200_000 };

/** One way to solve a level: the push order its workflow skill names, and the moves. */
export interface PushPlan {
  /** Push directions in order, repeats merged. */
  pushOrder: Direction[];
  /** Moves from the level's start. */
  moves: Direction[];
}

/** The push directions of `moves` played from `level`'s start, repeats merged. */
export function pushOrderOf(level: Level, moves: readonly Direction[]): Direction[] {
  const order: Direction[] = [];
  let state = level.start;
  for (const dir of moves) {
    const out = move(level.room, state, dir);
    if (out.push && order[order.length - 1] !== dir) order.push(dir);
    state = out.state;
  }
  return order;
}

/**
 * Every push order over the directions of the shortest plan's pushes, up to one direction longer
 * than its order (at most MAX_PUSH_DIRECTIONS, the skill grammar's bound), whose shortest plan
 * takes at most `maxMoves` moves; the level's own shortest plan (`level.solution`) first.
 */
export function pushPlans(level: Level, maxMoves: number): PushPlan[] {
  const shortest = level.solution as Direction[];
  const first = pushOrderOf(level, shortest);
  const plans: PushPlan[] = [{ pushOrder: first, moves: shortest }];
  const used = [...DIRECTIONS];
  const longest = Math.min(first.length + 1, MAX_PUSH_DIRECTIONS);
  for (const order of ordersOver(used, longest)) {
    if (order.join() === first.join()) continue;
    const moves = solveFollowing(level.room, level.start, order, {
      ...PLAN_LIMITS,
      maxDepth: maxMoves,
    });
    if (moves !== null && moves.length <= maxMoves) plans.push({ pushOrder: order, moves });
  }
  return plans;
}

/** Sequences of 1…`longest` of `dirs` with no direction twice in a row, shortest first. */
function ordersOver(dirs: readonly Direction[], longest: number): Direction[][] {
  const out: Direction[][] = [];
  let level: Direction[][] = [[]];
  for (let length = 1; length <= longest; length++) {
    level = level.flatMap((o) => dirs.filter((d) => o[o.length - 1] !== d).map((d) => [...o, d]));
    out.push(...level);
  }
  return out;
}

/**
 * The skilled demonstration of a level: a push order drawn (seeded by `taskSeed`) from
 * {@link pushPlans} within {@link PLAN_SLACK_MOVES} of the shortest plan and at most
 * {@link MAX_PLAN_MOVES} moves, its workflow skill (the reference
 * analyzer's sentence for a solve in that order), and an expert that plays its plan. A level with
 * one order gets the ordinary expert's plan and skill.
 */
export function sokobanSkilledDemonstration(level: Level, taskSeed: number): SkilledDemonstration {
  const longest = Math.min(level.solution.length + PLAN_SLACK_MOVES, MAX_PLAN_MOVES);
  const plans = pushPlans(level, Math.max(longest, level.solution.length));
  const plan = new Rng(seedOf("sokoban-skilled", taskSeed)).pick(plans);
  return {
    skill: workflowSkill(plan.pushOrder, level.start.boxes.length),
    expert: new PlanExpert(level, plan.moves),
  };
}

/**
 * Plays a fixed plan from a level's start; on a state the plan did not lead to it plays as the
 * ordinary expert (a shortest plan from there).
 */
class PlanExpert implements Expert {
  #expected: string[] = [];
  #moves: Direction[];
  #turn = 0;
  #fallback = new SokobanExpert();

  constructor(level: Level, moves: Direction[]) {
    this.#moves = moves;
    let state = level.start;
    this.#expected.push(stateKey(state));
    for (const dir of moves) {
      state = move(level.room, state, dir).state;
      this.#expected.push(stateKey(state));
    }
  }

  /** @throws GridParseError when the observation is not a Sokoban grid. */
  act(observation: Observation): string {
    const { state } = parseGrid(gridLinesOf(observation.text));
    const turn = this.#turn++;
    if (turn < this.#moves.length && this.#expected[turn] === stateKey(state)) {
      return this.#moves[turn];
    }
    this.#moves = [];
    return this.#fallback.act(observation);
  }
}

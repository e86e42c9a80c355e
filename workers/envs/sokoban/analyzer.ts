/**
 * Sokoban's reference analyzer: replays a trajectory on its level and writes a truthful skill.
 *
 * Success → the workflow actually used (the push directions in order). Failure → the first real
 * mistake found, checked in this order: a box pushed onto a dead cell (corner, or a wall with no
 * target along it: deadlock), a box pushed off its target, many invalid actions, back-and-forth
 * moves, walking into walls, else running out of steps. Every sentence comes from
 * {@link ANALYZER_TEMPLATES}, so the vocabulary is known in advance.
 */
import type { SkillAnalysis, Trajectory } from "../types.ts";
import { directionOf } from "./episode.ts";
import type { Level } from "./generate.ts";
import {
  type Direction,
  DIRECTIONS,
  inCorner,
  isSolved,
  liveCells,
  move,
  type SokobanState,
  stateKey,
} from "./room.ts";

/** Sentence templates; `{name}` slots take numbers, directions or the noun phrases below. */
export const ANALYZER_TEMPLATES = {
  solved: "Solved in {n} steps: {moves}.",
  workflow:
    "Walk behind {box}, then push it {pushes} onto {target}; never push a box into a corner or along a wall with no target.",
  walked: "walked {dir} {n}",
  pushed: "pushed {box} {dir} {n}",
  deadlockCorner:
    "Failed: at step {k} pushing {dir} moved {box} into a corner, where it can never reach a target.",
  deadlockWall:
    "Failed: at step {k} pushing {dir} moved {box} against a wall with no target, where it can never reach a target.",
  deadlockSkill:
    "Never push a box into a corner or along a wall with no target; before pushing {dir}, check the box can still be pushed onto a target.",
  offTarget: "Failed: at step {k} pushing {dir} moved a box off its target.",
  offTargetSkill:
    "Once a box is on a target, leave it there; push the other boxes around it instead.",
  invalid: "Failed: {i} of {n} actions were invalid, so those steps were lost.",
  invalidSkill: "Answer with exactly one of up, down, left or right inside the action tags.",
  oscillate: "Failed: ran out of steps while moving back and forth between the same cells.",
  oscillateSkill: "Do not walk back and forth; walk behind the box and push it toward the target.",
  bumps: "Failed: {w} of {n} moves walked into a wall or a stuck box and changed nothing.",
  bumpsSkill: "Look at the grid before moving; walking into a wall wastes a step.",
  outOfSteps: "Failed: ran out of steps with {b} of {t} boxes still off target.",
  outOfStepsSkill:
    "Push the box toward the target sooner; first walk behind it on the side away from the target.",
} as const;

/** Noun phrases the templates use. */
export const ANALYZER_PHRASES = ["the box", "a box", "the boxes", "the target", "the targets"];

/** Fills `{slot}`s of a template. */
function fill(template: string, slots: Record<string, string | number>): string {
  return template.replace(/\{(\w+)\}/g, (_, k: string) => String(slots[k]));
}

/** What happened on one step of a replay. */
interface ReplayStep {
  dir: Direction | null;
  moved: boolean;
  push?: { from: number; to: number };
  /** The state after the step. */
  state: SokobanState;
}

/** Replays the actions of `trajectory` on `level` from its start. */
function replay(level: Level, trajectory: Trajectory): ReplayStep[] {
  let state = level.start;
  const out: ReplayStep[] = [];
  for (const step of trajectory.steps) {
    const dir = directionOf(step.action);
    if (dir === null || isSolved(level.room, state)) {
      out.push({ dir: null, moved: false, state });
      continue;
    }
    const m = move(level.room, state, dir);
    state = m.state;
    out.push({ dir, moved: m.moved, push: m.push, state });
  }
  return out;
}

/** Runs of equal (direction, push?) moves, e.g. `walked left 2, pushed the box up 1`. */
function describeMoves(steps: ReplayStep[], box: string): string {
  const runs: { dir: Direction; push: boolean; n: number }[] = [];
  for (const s of steps) {
    if (s.dir === null || !s.moved) continue;
    const last = runs[runs.length - 1];
    const push = s.push !== undefined;
    if (last && last.dir === s.dir && last.push === push) last.n++;
    else runs.push({ dir: s.dir, push, n: 1 });
  }
  return runs.map((r) =>
    r.push
      ? fill(ANALYZER_TEMPLATES.pushed, { box, dir: r.dir, n: r.n })
      : fill(ANALYZER_TEMPLATES.walked, { dir: r.dir, n: r.n })
  ).join(", ");
}

/**
 * The reference skill of a finished Sokoban trajectory on `level` (the task's generated level).
 * Pure and deterministic.
 */
export function analyzeSokoban(level: Level, trajectory: Trajectory): SkillAnalysis {
  const room = level.room;
  const many = level.start.boxes.length > 1;
  const box = many ? "a box" : "the box";
  const steps = replay(level, trajectory);
  const n = steps.length;
  const final = steps.length > 0 ? steps[steps.length - 1].state : level.start;
  if (isSolved(room, final)) {
    const pushDirs: Direction[] = [];
    for (const s of steps) {
      if (s.push && s.dir && pushDirs[pushDirs.length - 1] !== s.dir) pushDirs.push(s.dir);
    }
    return {
      episode_summary: fill(ANALYZER_TEMPLATES.solved, { n, moves: describeMoves(steps, box) }),
      episode_skill: fill(ANALYZER_TEMPLATES.workflow, {
        box: many ? "each box" : "the box",
        pushes: pushDirs.join(" then "),
        target: many ? "the targets" : "the target",
      }),
    };
  }
  const live = liveCells(room);
  for (let k = 0; k < n; k++) {
    const s = steps[k];
    if (s.push && !live.has(s.push.to) && !room.targets.includes(s.push.to)) {
      const template = inCorner(room, s.push.to)
        ? ANALYZER_TEMPLATES.deadlockCorner
        : ANALYZER_TEMPLATES.deadlockWall;
      return {
        episode_summary: fill(template, { k: k + 1, dir: s.dir!, box }),
        episode_skill: fill(ANALYZER_TEMPLATES.deadlockSkill, { dir: s.dir! }),
      };
    }
  }
  for (let k = 0; k < n; k++) {
    const s = steps[k];
    if (s.push && room.targets.includes(s.push.from) && !room.targets.includes(s.push.to)) {
      return {
        episode_summary: fill(ANALYZER_TEMPLATES.offTarget, { k: k + 1, dir: s.dir! }),
        episode_skill: ANALYZER_TEMPLATES.offTargetSkill,
      };
    }
  }
  const invalid = steps.filter((s) => s.dir === null).length;
  if (invalid > 0 && invalid * 10 >= n * 3) {
    return {
      episode_summary: fill(ANALYZER_TEMPLATES.invalid, { i: invalid, n }),
      episode_skill: ANALYZER_TEMPLATES.invalidSkill,
    };
  }
  const seen = new Set<string>([stateKey(level.start)]);
  let repeats = 0;
  for (const s of steps) {
    if (s.dir === null || !s.moved) continue;
    const key = stateKey(s.state);
    if (seen.has(key)) repeats++;
    seen.add(key);
  }
  if (repeats >= 3 && repeats * 3 >= n) {
    return {
      episode_summary: ANALYZER_TEMPLATES.oscillate,
      episode_skill: ANALYZER_TEMPLATES.oscillateSkill,
    };
  }
  const moves = steps.filter((s) => s.dir !== null).length;
  const bumps = steps.filter((s) => s.dir !== null && !s.moved).length;
  if (bumps >= 2 && bumps * 4 >= moves) {
    return {
      episode_summary: fill(ANALYZER_TEMPLATES.bumps, { w: bumps, n: moves }),
      episode_skill: ANALYZER_TEMPLATES.bumpsSkill,
    };
  }
  const off = final.boxes.filter((b) => !room.targets.includes(b)).length;
  return {
    episode_summary: fill(ANALYZER_TEMPLATES.outOfSteps, { b: off, t: final.boxes.length }),
    episode_skill: ANALYZER_TEMPLATES.outOfStepsSkill,
  };
}

/** Every text the analyzer can emit, with slots removed (for the vocabulary). */
export function analyzerTexts(): string[] {
  return [
    ...Object.values(ANALYZER_TEMPLATES).map((t) => t.replace(/\{\w+\}/g, " ")),
    ...ANALYZER_PHRASES,
    "each box",
    ...DIRECTIONS,
    "then",
  ];
}

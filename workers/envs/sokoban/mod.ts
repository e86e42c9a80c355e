/**
 * The built-in `sokoban` environment (RAGEN / verl-agent text Sokoban).
 *
 * Options: `size` (room side with walls, 6–10, default 6), `boxes` (1–3, default 1), `min_moves`
 * (fewest moves of a level's shortest plan, 3–14, default 3: harder levels above it; task ids then
 * end their size segment in `-m{n}`, e.g. `sokoban/train/7x7-2-m8/{seed}`),
 * `end_on_deadlock` (end the episode once a box can no longer reach a target, default true),
 * `relative_positions` (a line under the grid with each box's and target's rows and columns from
 * the player, default false), `prompt` (`full`, the verl-agent turn prompt, or `compact`: task
 * line and observation only; default `full`) and `render` (`text`, default, or `image`: the vision
 * variant, see below). `relative_positions` and `prompt` exist for small models trained from
 * scratch (the demo): with builtin:tiny, policy SFT on compact prompts with relative positions
 * reaches ~65% success on test_seen after ~400 optimizer steps, while on the full grid-only
 * prompt it stays at chance (workers/envs/README.md "Sokoban for small models").
 * Splits: `train` and `test_seen` draw `carved` layouts (different seeds), `test_unseen` draws
 * `pillared` layouts, which never occur in the other two (see generate.ts).
 *
 * Vision variant (`render: "image"`): each observation also carries the room as an RGB image of
 * 8-pixel tiles (render.ts); the observation text stays the grid (what the analyzer and expert
 * read), while the policy prompt shows `<image>` in its place, under a system line that names the
 * tile colours; history entries show only their actions. Image tasks use the same levels as text
 * tasks of the same seed, with ids ending `-image` in the size segment
 * (`sokoban/train/6x6-1-image/{seed}`) and `render: "image"` in their options. Text tasks keep
 * exactly their former ids and options (no `render` key), so nothing about them changed.
 */
import { z } from "zod";
import { checkSampleArgs, InvalidTaskError, parseEnvOptions } from "../errors.ts";
import {
  buildCompactPrompt,
  buildTurnPrompt,
  parseActionText,
  promptTemplateVocabulary,
  vocabularyOf,
  withImagePlaceholder,
} from "../prompt.ts";
import type { Environment, PromptInput, Split, Task, Trajectory } from "../types.ts";
import { analyzerTexts, analyzeSokoban } from "./analyzer.ts";
import { judgeWithGrammar } from "../skill_judge.ts";
import { SOKOBAN_SKILL_GRAMMAR, SOKOBAN_SKILL_PATTERNS } from "./judge.ts";
import { SokobanEpisode } from "./episode.ts";
import { FEEDBACK_TEMPLATES } from "./feedback.ts";
import { SokobanExpert } from "./expert.ts";
import {
  generateLevel,
  type LayoutFamily,
  type Level,
  MAX_SOLUTION_MOVES,
  MIN_SOLUTION_MOVES,
} from "./generate.ts";
import { SOKOBAN_PALETTE, SOKOBAN_TILE_PX } from "./render.ts";
import { DIRECTIONS, SYMBOLS } from "./room.ts";
import { seedOf } from "../_rng.ts";

/** Options of `sokoban` (validated where they enter; defaults filled). */
export const sokobanOptionsSchema = z.strictObject({
  /** Room side in cells, border walls included. */
  size: z.number().int().min(6).max(10).default(6),
  /** Boxes (and targets). */
  boxes: z.number().int().min(1).max(3).default(1),
  /**
   * Fewest moves the level's shortest plan takes (3–14): above the default 3, only levels that
   * need at least this many moves are kept (harder levels).
   */
  min_moves: z.number().int().min(MIN_SOLUTION_MOVES).max(MAX_SOLUTION_MOVES)
    .default(MIN_SOLUTION_MOVES),
  /** End the episode (lost) as soon as a box stands on a cell from which no target is reachable. */
  end_on_deadlock: z.boolean().default(true),
  /** Add a line under the grid: every box and target as rows and columns from the player. */
  relative_positions: z.boolean().default(false),
  /** `full`: the verl-agent turn prompt; `compact`: task line and observation only. */
  prompt: z.enum(["full", "compact"]).default("full"),
  /** `text`: the grid only; `image`: also an RGB image of the room (the vision variant). */
  render: z.enum(["text", "image"]).default("text"),
});

/** Parsed `sokoban` options. */
export type SokobanOptions = z.infer<typeof sokobanOptionsSchema>;

/** The world description, first line of every prompt. */
export const SOKOBAN_SYSTEM_LINE =
  `You play Sokoban on a grid: ${SYMBOLS.wall} wall, ${SYMBOLS.floor} floor, ${SYMBOLS.target} ` +
  `target, ${SYMBOLS.box} box, ${SYMBOLS.boxOnTarget} box on target, ${SYMBOLS.player} you, ` +
  `${SYMBOLS.playerOnTarget} you on target. Walk into a box to push it; boxes cannot be pulled.`;

/** The world description of the vision variant: the tile colours instead of the symbols. */
export const SOKOBAN_IMAGE_SYSTEM_LINE =
  `You play Sokoban on a grid shown as an image of ${SOKOBAN_TILE_PX}-pixel square tiles: ` +
  `${SOKOBAN_PALETTE.wall.name} wall, ${SOKOBAN_PALETTE.floor.name} floor, ` +
  `${SOKOBAN_PALETTE.target.name} target, ${SOKOBAN_PALETTE.box.name} box, ` +
  `${SOKOBAN_PALETTE.boxOnTarget.name} box on target, ${SOKOBAN_PALETTE.player.name} you, ` +
  `${SOKOBAN_PALETTE.playerOnTarget.name} you on target. ` +
  `Walk into a box to push it; boxes cannot be pulled.`;

/** Default turn limit: every generated level has a plan of at most 14 moves. */
export const SOKOBAN_MAX_TURNS = 20;

/** The layout family of each split. */
export function layoutFamilyOf(split: Split): LayoutFamily {
  return split === "test_unseen" ? "pillared" : "carved";
}

function instructionOf(boxes: number): string {
  return boxes === 1 ? "push the box onto the target" : `push all ${boxes} boxes onto the targets`;
}

/** The level of a task (regenerated from its seed and options; cached per task id). */
const levelCache = new Map<string, Level>();
function levelOf(task: Task): { level: Level; options: SokobanOptions } {
  if (task.envId !== "sokoban") {
    throw new InvalidTaskError(
      `Cannot use task ${task.id} as its envId must be sokoban: current value is ${task.envId}`,
    );
  }
  const options = parseEnvOptions("sokoban", sokobanOptionsSchema, task.options);
  const key = `${task.split}/${task.seed}/${options.size}/${options.boxes}/${options.min_moves}`;
  let level = levelCache.get(key);
  if (level === undefined) {
    level = generateLevel(
      task.seed,
      options.size,
      options.boxes,
      layoutFamilyOf(task.split),
      options.min_moves,
    );
    if (levelCache.size >= 4096) levelCache.delete(levelCache.keys().next().value!);
    levelCache.set(key, level);
  }
  return { level, options };
}

/** The built-in Sokoban environment. */
export const sokobanEnvironment: Environment = {
  id: "sokoban",
  description:
    "Text Sokoban (RAGEN/verl-agent symbols): push every box onto a target in a walled room. " +
    "Rooms are generated by reverse play, so every task is solvable; actions are up, down, " +
    "left, right; reward -0.1 per step, +1 per box placed (-1 when pushed off), +10 on solving.",
  optionsSchema: sokobanOptionsSchema,
  defaultMaxTurns: SOKOBAN_MAX_TURNS,
  families: ["sokoban"],
  splitDescriptions: {
    train: "Carved rooms (random-walk layouts without pillars).",
    test_seen: "New carved rooms drawn with other seeds, from the training layout family.",
    test_unseen:
      "Held-out pillared rooms: every room has a free-standing wall cell, which no train room has.",
  },

  sampleTasks(
    split: Split,
    count: number,
    seed: number,
    options?: Record<string, unknown>,
  ): Task[] {
    checkSampleArgs(split, count, seed);
    const opts = parseEnvOptions("sokoban", sokobanOptionsSchema, options);
    const tasks: Task[] = [];
    // Text tasks keep their former options (no `render` key) and ids; image tasks differ in both.
    // So do tasks at the default `min_moves` (no key; ids without `-m{n}`).
    const { render, min_moves: minMoves, ...rest } = opts;
    const taskOptions = {
      ...rest,
      ...(minMoves !== MIN_SOLUTION_MOVES ? { min_moves: minMoves } : {}),
      ...(render === "image" ? { render } : {}),
    };
    const suffix = (minMoves !== MIN_SOLUTION_MOVES ? `-m${minMoves}` : "") +
      (render === "image" ? "-image" : "");
    for (let i = 0; i < count; i++) {
      const taskSeed = seedOf("sokoban", split, seed, i);
      tasks.push({
        envId: "sokoban",
        id: `sokoban/${split}/${opts.size}x${opts.size}-${opts.boxes}${suffix}/${taskSeed}`,
        split,
        seed: taskSeed,
        family: "sokoban",
        instruction: instructionOf(opts.boxes),
        options: { ...taskOptions },
      });
    }
    return tasks;
  },

  createEpisode(task: Task): SokobanEpisode {
    const { level, options } = levelOf(task);
    return new SokobanEpisode(
      task,
      level,
      options.end_on_deadlock,
      options.render,
      options.relative_positions,
    );
  },

  buildPrompt(input: PromptInput): string {
    const options = parseEnvOptions("sokoban", sokobanOptionsSchema, input.task.options);
    // With an image the room is not repeated as text; the relative-position line is kept.
    const keptText = options.render === "image"
      ? (text: string) =>
        text.split("\n").filter((line) => !line.startsWith(SYMBOLS.wall)).join("\n")
      : undefined;
    if (options.prompt === "compact") return buildCompactPrompt({ ...input, keptText });
    return buildTurnPrompt({
      systemLine: options.render === "image" ? SOKOBAN_IMAGE_SYSTEM_LINE : SOKOBAN_SYSTEM_LINE,
      ...input,
      keptText,
    });
  },

  parseAction(response: string): string | null {
    return parseActionText(response);
  },

  createExpert(_task: Task): SokobanExpert {
    return new SokobanExpert();
  },

  referenceAnalysis(trajectory: Trajectory) {
    return analyzeSokoban(levelOf(trajectory.task).level, trajectory);
  },

  skillPatterns: SOKOBAN_SKILL_PATTERNS,

  judgeSkill(trajectory: Trajectory, skill: string) {
    const reference = analyzeSokoban(levelOf(trajectory.task).level, trajectory);
    return judgeWithGrammar(SOKOBAN_SKILL_GRAMMAR, skill, reference.episode_skill);
  },

  vocabulary(): string[] {
    return withImagePlaceholder(vocabularyOf([
      ...promptTemplateVocabulary(100),
      SOKOBAN_SYSTEM_LINE,
      SOKOBAN_IMAGE_SYSTEM_LINE,
      instructionOf(1),
      instructionOf(2),
      ...Object.values(SYMBOLS),
      ...DIRECTIONS,
      ...analyzerTexts(),
      ...Object.values(FEEDBACK_TEMPLATES).map((t) => t.replace(/\{\w+\}/g, " ")),
    ]));
  },
};

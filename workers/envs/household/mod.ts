/**
 * `household`: an ALFWorld-style text household (Shridhar et al. 2021, "ALFWorld: Aligning Text
 * and Embodied Environments for Interactive Learning"), compact enough for a tiny policy.
 *
 * A room (kitchen, bathroom, bedroom or living room) has 6–10 numbered receptacles holding 5–10
 * numbered objects, most of them in their type's usual places (world.ts `USUAL_PLACES`); the six
 * ALFWorld task families; ALFWorld's action grammar and observation
 * sentences; an admissible-action list each turn. Reward 10 on success, else 0; episodes end on
 * success or after {@link HOUSEHOLD_MAX_TURNS} steps. Splits: `train` and `test_seen` draw from
 * one pool of 120 layouts, `test_unseen` from a disjoint pool of 40 layouts.
 */
import { z } from "zod";
import {
  buildCompactPrompt,
  buildTurnPrompt,
  parseActionText,
  promptTemplateVocabulary,
  vocabularyOf,
} from "../prompt.ts";
import type {
  Environment,
  PromptInput,
  SkilledDemonstration,
  Split,
  Task,
  Trajectory,
} from "../types.ts";
import { analyzeHousehold, replay, trueEpisodeSkills, usualPlacesSkill } from "./analyzer.ts";
import { judgeAgainstTrueSkills, type SkillJudgement } from "../skill_judge.ts";
import { HOUSEHOLD_SET_SLOTS, HOUSEHOLD_SKILL_GRAMMAR, householdSkillPatterns } from "./judge.ts";
import { HouseholdEpisode } from "./episode.ts";
import { HouseholdExpert } from "./expert.ts";
import { hash32 } from "../_rng.ts";
import { InvalidTaskError, parseEnvOptions } from "../errors.ts";
import {
  FAMILIES,
  type Family,
  generateScenario,
  INSTRUCTION_TEMPLATES,
  LAYOUT_POOLS,
  OPENABLE_TYPES,
  ROOMS,
  type Scenario,
  TOOLS,
} from "./world.ts";

export { HouseholdEpisode } from "./episode.ts";
export type { Family, Scenario } from "./world.ts";

/**
 * Default and maximum steps per episode. ALFWorld agents usually get 50; our rooms are a third
 * the size and the expert needs at most 11 steps, so 30 leaves room to search while keeping
 * trajectories short for CPU training.
 */
export const HOUSEHOLD_MAX_TURNS = 30;

/**
 * Options of `household`: which task families to draw (default: all six), and three options for
 * small models trained from scratch (`DEMO_PRESETS.household` in jobs/presets.ts, bench:learn's
 * `household-demo`): `prompt` (`full`, the verl-agent turn prompt with the admissible actions, or
 * `compact`: task line, history and observation only), `status_line` (each observation gets a
 * line with the held object and the receptacles not yet searched, episode.ts) and `expert`
 * (`oracle`, which walks straight to the object it cannot have seen, or `search`, which searches
 * the room in order; expert.ts). Strict like the other environments' options: a misspelt key
 * (`famillies`) was dropped, training on every family.
 */
export const householdOptionsSchema = z.strictObject({
  families: z.array(z.enum(FAMILIES as [Family, ...Family[]])).min(1).default([...FAMILIES]),
  /** `full`: the verl-agent turn prompt; `compact`: task line, history and observation only. */
  prompt: z.enum(["full", "compact"]).default("full"),
  /** Add the status line (held object, receptacles not yet searched) under each observation. */
  status_line: z.boolean().default(false),
  /** The expert of the warm-up demonstrations: `oracle` (knows the scenario) or `search`. */
  expert: z.enum(["oracle", "search"]).default("oracle"),
});

/** The options' defaults other than `families`, left out of task options (see sampleTasks). */
const OPTION_DEFAULTS = { prompt: "full", status_line: false, expert: "oracle" } as const;

/** Validated options of `household`. */
export type HouseholdOptions = z.infer<typeof householdOptionsSchema>;

/** Parses `household` options. @throws EnvOptionsError with zod's field paths when invalid. */
export function parseHouseholdOptions(options?: Record<string, unknown>): HouseholdOptions {
  return parseEnvOptions("household", householdOptionsSchema, options);
}

/**
 * The scenario (layout, objects, goal) of a household task; a pure function of the task.
 * @throws InvalidTaskError when the task is not a household task.
 */
export function householdScenario(task: Task): Scenario {
  if (task.envId !== "household") {
    throw new InvalidTaskError(
      `Cannot create a household episode as task.envId must be "household": current value is ${
        JSON.stringify(task.envId)
      }`,
    );
  }
  const { families } = parseHouseholdOptions(task.options);
  const pool = task.split === "test_unseen" ? LAYOUT_POOLS.unseen : LAYOUT_POOLS.seen;
  return generateScenario(task.seed, pool, families);
}

function sampleTasks(
  split: Split,
  count: number,
  seed: number,
  options?: Record<string, unknown>,
): Task[] {
  const parsed = parseHouseholdOptions(options);
  // Tasks keep their former options (`families` only) unless a newer option is set.
  const taskOptions: Record<string, unknown> = Object.fromEntries(
    Object.entries(parsed).filter(([key, value]) =>
      OPTION_DEFAULTS[key as keyof typeof OPTION_DEFAULTS] !== value
    ),
  );
  const tasks: Task[] = [];
  for (let i = 0; i < count; i++) {
    const taskSeed = hash32(`household/${split}/${seed}/${i}`);
    const task: Task = {
      envId: "household",
      id: `household/${split}/${taskSeed}`,
      split,
      seed: taskSeed,
      family: "",
      instruction: "",
      options: { ...taskOptions },
    };
    const scenario = householdScenario(task);
    task.family = scenario.goal.family;
    task.instruction = scenario.instruction;
    tasks.push(task);
  }
  return tasks;
}

const SYSTEM_LINE =
  "You are an expert agent in a household room. You can carry one object at a time.";

function buildPrompt(input: PromptInput): string {
  if (parseHouseholdOptions(input.task.options).prompt === "compact") {
    return buildCompactPrompt(input);
  }
  return buildTurnPrompt({ systemLine: SYSTEM_LINE, ...input });
}

/** Fixed wording of observations and reference analyses (every word is in the vocabulary). */
const PHRASES = [
  SYSTEM_LINE,
  "You are in the middle of a room. Looking quickly around you, you see a , and .",
  "You arrive at . The is closed. On the , you see nothing. The is open. In it, you see",
  "You open the . You close the . You pick up the from the . You put the in/on the .",
  "You clean the using the . You heat the using the . You cool the using the .",
  "You turn on the . The is on off. You are carrying: a . You are not carrying anything.",
  "You are facing the . Nothing happens. The episode is over.",
  "go to open close take from put in/on clean heat cool with use examine inventory look",
  "Success in steps: the agent found the at , cleaned heated cooled it with , then put it in ;",
  "then used while holding it.",
  "Failure after steps: the agent . Warning signs: invalid actions; visited times.",
  "Avoid this mistake: . Instead, ;",
  "repeated invalid actions: of actions were not admissible. choose only actions from the",
  "admissible list. used without holding a while holding the instead of a",
  "take the first ( at and ), then use the desklamp",
  "forgot to the before putting it in the. put the in , the wrong receptacle, but the task",
  "needs a . put the only in a . put only one in the and never brought the second one",
  "after the first , fetch another and put it too. took the wrong object: the instead of a",
  "take only a . never found a ; it was at , but the agent searched only nothing",
  "search receptacles not yet visited and open closed ones until a is seen",
  "saw a at but never took it. take the as soon as it is seen",
  "took the but never used the desklamp while holding it. after taking the , go to the",
  "desklamp and use it. took the but never ed it with the . go to the and the right after",
  "taking it. took the but ran out of steps before putting it in a . go straight to the and",
  "put the . To to look at a under the desklamp: find and take the first, then go to the",
  "desklamp and use it while holding the . to put two in : take one at a time, go to the",
  "(open it if closed) and put it, then fetch the second and put it in the same",
  "to put a in : find the (open closed receptacles to look inside), take it, go to the",
  "(open it if closed) and put it. to put a in : take the , go to the , the with the ,",
  "then go to the and put it. an unknown place",
  "never found a , which was in : it visited and but never opened it. never visited or",
  "To search: nothing.",
  "Look for a in a or a first: that is where it usually is.",
];

function buildVocabulary(): string[] {
  const names: string[] = [];
  for (const room of Object.values(ROOMS)) {
    names.push(...room.fixed, ...Object.keys(room.optional), ...room.objects);
  }
  for (const tool of Object.values(TOOLS)) names.push(tool.type, tool.verb, tool.adjective);
  return vocabularyOf([
    ...promptTemplateVocabulary(100),
    ...names,
    ...OPENABLE_TYPES,
    ...INSTRUCTION_TEMPLATES,
    ...FAMILIES,
    ...PHRASES,
  ]);
}

const VOCABULARY = buildVocabulary();

/** The `household` environment (see the module comment). */
export const householdEnvironment: Environment = {
  id: "household",
  description: "ALFWorld-style household: a room of numbered receptacles (cabinet, drawer, " +
    "fridge, microwave, sinkbasin, desklamp, …) holding numbered objects; the six ALFWorld task " +
    "families (pick and place, examine in light, clean/heat/cool then place, pick two and " +
    "place) with ALFWorld's action grammar (go to, open, close, take, put, clean, heat, cool, " +
    "use, examine, inventory, look) and admissible actions each turn. Reward 10 on success. " +
    "test_unseen uses room layouts never used in training.",
  optionsSchema: householdOptionsSchema as unknown as z.ZodType<Record<string, unknown>>,
  defaultMaxTurns: HOUSEHOLD_MAX_TURNS,
  families: FAMILIES,
  splitDescriptions: {
    train: "tasks in 120 training room layouts",
    test_seen: "new tasks in the training room layouts",
    test_unseen: "tasks in 40 room layouts never used in training",
  },
  sampleTasks,
  createEpisode: (task) =>
    new HouseholdEpisode(
      task,
      householdScenario(task),
      HOUSEHOLD_MAX_TURNS,
      parseHouseholdOptions(task.options).status_line,
    ),
  buildPrompt,
  parseAction: (response) => parseActionText(response),
  createExpert: (task) =>
    new HouseholdExpert(
      householdScenario(task),
      parseHouseholdOptions(task.options).expert === "search" ? task : undefined,
    ),
  referenceAnalysis: householdReference,
  skilledDemonstration,
  get skillPatterns() {
    return householdSkillPatterns();
  },
  judgeSkill: judgeHouseholdSkill,
  vocabulary: () => [...VOCABULARY],
};

/**
 * The reference analysis of a finished trajectory: the summary of its replay (analyzer.ts
 * `analyzeHousehold`, on a fresh episode of its task without the status line: the analysis reads
 * what happened, not the agent's memory aid) and, won or lost, the usual-places skill of its task
 * (`usualPlacesSkill`) with no step skills: the reference teaches only what holds across tasks,
 * not where this episode's objects happened to be.
 */
function householdReference(trajectory: Trajectory) {
  const scenario = householdScenario(trajectory.task);
  const episode = new HouseholdEpisode(trajectory.task, scenario, HOUSEHOLD_MAX_TURNS);
  const { episode_summary } = analyzeHousehold(trajectory, episode).analysis;
  return { episode_summary, episode_skill: usualPlacesSkill(scenario) };
}

/**
 * The household skill judge (Environment.judgeSkill): well-formed under
 * {@link HOUSEHOLD_SKILL_GRAMMAR}; truthful when the skill is the task's usual-places skill (the
 * reference analysis' skill) or one of the trajectory's true episode skills (analyzer.ts
 * `trueEpisodeSkills`: a win's workflow rule, or a loss's failure skill of any mistake the replay
 * shows, with its objects, receptacles and counts), lists of places compared as sets; a reference
 * match when it is the usual-places skill.
 */
function judgeHouseholdSkill(trajectory: Trajectory, skill: string): SkillJudgement {
  const scenario = householdScenario(trajectory.task);
  const episode = new HouseholdEpisode(trajectory.task, scenario, HOUSEHOLD_MAX_TURNS);
  const facts = replay(episode, trajectory.steps.map((s) => s.action));
  return judgeAgainstTrueSkills(HOUSEHOLD_SKILL_GRAMMAR, skill, {
    trueSkills: [usualPlacesSkill(scenario), ...trueEpisodeSkills(scenario, facts)],
    setSlots: HOUSEHOLD_SET_SLOTS,
  });
}

/**
 * The household's demonstration that needs its skill (Environment.skilledDemonstration): the
 * usual-places skill of the task (analyzer.ts `usualPlacesSkill`: "Look for a apple in a fridge
 * or a countertop first: that is where it usually is.") and the usual-first search expert
 * (expert.ts `searchPlan`), which searches those places before the rest of the room. The
 * `search` expert of the ordinary demonstrations searches the room in order instead, so with the
 * skill in the prompt the actions differ from the ones without wherever a usual place comes
 * later in the room's order. The skill holds for every task of that object type in that room
 * kind, so a policy can learn it from the tasks themselves.
 */
function skilledDemonstration(task: Task): SkilledDemonstration {
  const scenario = householdScenario(task);
  return {
    skill: usualPlacesSkill(scenario),
    expert: new HouseholdExpert(scenario, task, { usualFirst: true }),
  };
}

/**
 * Hindsight skills (workers/seed/README.md, Algorithm, steps 3–4; Wu et al. 2026, "SEED:
 * Self-Evolving On-Policy Distillation", arXiv 2607.14777): the analyzer prompt the policy θ_old
 * answers greedily, the lenient parser of its JSON answer, the insertion of the skill into a turn's
 * prompt for teacher re-scoring (and into chat messages at inference, `withSkill`), and the
 * canonical target text for analyzer warm-up SFT.
 *
 * Prompts are kept compact on purpose: a tiny model on CPU reads them, and every word is a token.
 */
import { TASK_LINE_PREFIX } from "../envs/prompt.ts";
import type { SkillAnalysis, SkillPattern, Trajectory } from "../envs/types.ts";
import {
  type ChatMessage,
  compileTextPattern,
  type JsonObjectSchema,
  type TextPatternDfa,
} from "../model/mod.ts";
import { checkNumber, SkillError } from "../seed/errors.ts";
import { lastStringField, objectSlices, parseObject } from "./_lenient_json.ts";

/**
 * The `Earlier effects:` line is bounded by max(`maxSteps`, this) fields of `maxFieldChars`: the
 * demo's 1-step window at 200 chars would otherwise cut the effects of most episodes longer than
 * ~9 turns (Sokoban's sentences are ~20 chars).
 */
export const EARLIER_EFFECTS_MIN_FIELDS = 8;

/** Options of `buildAnalyzerPrompt`. */
export interface AnalyzerPromptOptions {
  /** Keep only the last `maxSteps` steps (≥ 1) and say how many earlier ones were omitted. */
  maxSteps?: number;
  /** Shorten each observation/response longer than this (chars, ≥ 16), keeping head and tail. */
  maxFieldChars?: number;
  /** Show the steps' `feedback` as `Effect:` lines (default true; false = the reference prompt). */
  feedback?: boolean;
}

/** The analyzer prompt options of a JobSpec's `seed` section. */
export function analyzerPromptOptions(seed: {
  analyzer_max_steps: number;
  analyzer_max_field_chars: number;
}): AnalyzerPromptOptions {
  // Effect lines always: skills truthful on 39.5% vs 12.6% of trajectories without them
  // (bench/RESULTS.md).
  return { maxSteps: seed.analyzer_max_steps, maxFieldChars: seed.analyzer_max_field_chars };
}

/** Shortens `text` to at most `max` chars by cutting its middle (head and tail both matter). */
function shorten(text: string, max: number | undefined): string {
  if (max === undefined || text.length <= max) return text;
  const head = Math.ceil((max - 3) / 2);
  const tail = Math.floor((max - 3) / 2);
  return `${text.slice(0, head)} … ${text.slice(text.length - tail)}`;
}

/**
 * The analyzer prompt of workers/seed/README.md, Algorithm, step 3 (after the paper's episode-only
 * analyzer): asks for only JSON `{"episode_skill", "episode_summary"}` (skill first, see
 * `analysisTarget`); on success the skill is the workflow (core decision rule and action order that
 * worked), on failure the avoidance rule (core mistake and warning signs); one short policy-facing
 * skill. Carries `Your task is to: …`, `Outcome: success|failure`, and per step `Step k` (1-based
 * turn) / `Observation:` / `Response:` / `Action valid: yes|no`, then `Effect: …` where the
 * environment gave feedback (`TrajectoryStep.feedback`; this service's addition, see
 * workers/seed/README.md, Algorithm, step 3). Steps cut by `maxSteps` leave
 * `(n earlier steps omitted)` and, with feedback, one `Earlier effects:` line of theirs, shortened
 * (head and tail kept) to max(`maxSteps`, 8) × `maxFieldChars` chars so that the window bounds the
 * prompt however long the episode (an environment whose every step says something new would
 * otherwise add up to 199 × `maxFieldChars`), while a 1-step window still keeps a 20-turn Sokoban
 * episode's effects whole. Throws `SeedOptionError` on out-of-range options.
 */
export function buildAnalyzerPrompt(
  trajectory: Trajectory,
  options: AnalyzerPromptOptions = {},
): string {
  const { maxSteps, maxFieldChars, feedback = true } = options;
  if (maxSteps !== undefined) checkNumber("maxSteps", maxSteps, { min: 1, integer: true });
  if (maxFieldChars !== undefined) {
    checkNumber("maxFieldChars", maxFieldChars, { min: 16, integer: true });
  }
  const success = trajectory.won;
  const rule = success
    ? "The episode succeeded: episode_skill is the workflow, the core decision rule and action order that worked."
    : "The episode failed: episode_skill is the avoidance rule, the core mistake and the warning signs to avoid.";
  const lines = [
    'Analyze the agent episode below. Return ONLY JSON: {"episode_skill": "...", "episode_summary": "..."}',
    rule,
    "Write one short policy-facing skill, not a story of the episode.",
    `Your task is to: ${trajectory.task.instruction}`,
    `Outcome: ${success ? "success" : "failure"}`,
  ];
  const steps = trajectory.steps;
  const first = maxSteps !== undefined ? Math.max(0, steps.length - maxSteps) : 0;
  if (first > 0) {
    lines.push(`(${first} earlier step${first === 1 ? "" : "s"} omitted)`);
    const earlier = feedback
      ? shorten(
        effectRuns(steps.slice(0, first), maxFieldChars),
        maxFieldChars === undefined
          ? undefined
          : Math.max(maxSteps!, EARLIER_EFFECTS_MIN_FIELDS) * maxFieldChars,
      )
      : "";
    if (earlier !== "") lines.push(`Earlier effects: ${earlier}`);
  }
  for (let k = first; k < steps.length; k++) {
    const step = steps[k];
    lines.push(
      `Step ${k + 1}`,
      `Observation: ${shorten(step.observation, maxFieldChars)}`,
      `Response: ${shorten(step.response, maxFieldChars)}`,
      `Action valid: ${step.valid ? "yes" : "no"}`,
    );
    const effect = feedback ? effectText(step.feedback) : "";
    if (effect !== "") lines.push(`Effect: ${shorten(effect, maxFieldChars)}`);
  }
  return lines.join("\n");
}

/**
 * A step's feedback as one line: runs of whitespace (line breaks included: an HTTP environment may
 * send several lines) become one space, the ends trimmed; "" for none or only whitespace.
 */
function effectText(feedback: string | undefined): string {
  return feedback === undefined ? "" : feedback.replace(/\s+/g, " ").trim();
}

/**
 * The environment's feedback of `steps` in order, consecutive repeats merged (`walked left, 2
 * times; pushed the box up`); steps without feedback (invalid actions) or with only whitespace
 * are skipped. "" for none.
 */
function effectRuns(steps: readonly Trajectory["steps"][number][], maxChars?: number): string {
  const runs: { text: string; n: number }[] = [];
  for (const step of steps) {
    const effect = effectText(step.feedback);
    if (effect === "") continue;
    const text = shorten(effect, maxChars);
    const last = runs[runs.length - 1];
    if (last?.text === text) last.n++;
    else runs.push({ text, n: 1 });
  }
  return runs.map((r) => r.n === 1 ? r.text : `${r.text}, ${r.n} times`).join("; ");
}

/** Bounds of `parseSkillAnalysis` (chars). */
export interface ParseSkillOptions {
  /** Longest skill kept; longer ones are cut at a word boundary. Default 400. */
  maxSkillChars?: number;
  /** Longest summary kept. Default 800. */
  maxSummaryChars?: number;
  /** Only the first `maxInputChars` of the model output are read. Default 20000. */
  maxInputChars?: number;
}

/** Collapses whitespace and cuts `text` to `max` chars at a word boundary. */
function bound(text: string, max: number): string {
  const clean = text.replace(/\s+/g, " ").trim();
  if (clean.length <= max) return clean;
  const cut = clean.slice(0, max);
  const space = cut.lastIndexOf(" ");
  return (space > max / 2 ? cut.slice(0, space) : cut).trim();
}

/** A string field, or an array of strings joined by spaces; "" otherwise. */
function textOf(value: unknown): string {
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value.join(" ");
  return "";
}

/** True for text with at least one letter or digit (rejects "", "...", "…"). */
export function meaningful(text: string): boolean {
  return /[\p{L}\p{N}]/u.test(text);
}

/** The object itself, or the first nested object (depth ≤ 2) that has an `episode_skill`. */
function findAnalysis(obj: Record<string, unknown>, depth = 0): Record<string, unknown> | null {
  if ("episode_skill" in obj) return obj;
  if (depth >= 2) return null;
  for (const value of Object.values(obj)) {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      const found = findAnalysis(value as Record<string, unknown>, depth + 1);
      if (found) return found;
    }
  }
  return null;
}

/**
 * Recovers `{episode_summary, episode_skill}` from analyzer output, leniently
 * (workers/seed/README.md, Algorithm, step 3): ```json fences, prose around the object, trailing
 * commas, single quotes where unambiguous, bare keys, raw newlines; when several objects parse, the
 * last one with a usable skill wins; as a last resort a closed `"episode_skill": "…"` pair is read
 * from unbalanced text. Returns null when no non-empty skill (with a letter or digit) is
 * recoverable. Whitespace is collapsed and lengths are bounded by `options`. A missing summary
 * becomes "".
 */
export function parseSkillAnalysis(
  text: string,
  options: ParseSkillOptions = {},
): SkillAnalysis | null {
  const { maxSkillChars = 400, maxSummaryChars = 800, maxInputChars = 20000 } = options;
  const input = text.slice(0, maxInputChars).replace(/[\u201c\u201d]/g, '"')
    .replace(/[\u2018\u2019]/g, "'");
  const slices = objectSlices(input);
  for (let i = slices.length - 1; i >= 0; i--) {
    const parsed = parseObject(slices[i]);
    const analysis = parsed && findAnalysis(parsed);
    if (!analysis) continue;
    const skill = bound(textOf(analysis.episode_skill), maxSkillChars);
    if (!meaningful(skill)) continue;
    return {
      episode_summary: bound(textOf(analysis.episode_summary), maxSummaryChars),
      episode_skill: skill,
    };
  }
  const skill = bound(lastStringField(input, "episode_skill") ?? "", maxSkillChars);
  if (!meaningful(skill)) return null;
  const summary = lastStringField(input, "episode_summary") ?? "";
  return { episode_summary: bound(summary, maxSummaryChars), episode_skill: skill };
}

/**
 * The canonical text the analyzer is fine-tuned to emit during analyzer warm-up: one line of
 * JSON with `episode_skill` then `episode_summary`. The skill comes first (the paper's prompt
 * names the summary first; JSON key order carries no meaning) so that an analysis cut off by
 * `analyzer_max_new_tokens` inside the summary — Sokoban summaries list every move — still
 * yields its skill through the lenient parser's closed-`"episode_skill"` fallback.
 * `parseSkillAnalysis(analysisTarget(x))` returns x whenever x is already whitespace-normalised
 * and within the parse bounds.
 */
export function analysisTarget(analysis: SkillAnalysis): string {
  return JSON.stringify({
    episode_skill: analysis.episode_skill,
    episode_summary: analysis.episode_summary,
  });
}

/** Compiled skill patterns, per pattern object (compiling walks the whole grammar). */
const COMPILED_PATTERNS = new WeakMap<object, TextPatternDfa>();

/**
 * The automaton of `pattern`, compiled once per pattern object.
 * @throws {TextPatternError} when the pattern cannot be compiled.
 */
function compiledPattern(pattern: SkillPattern): TextPatternDfa {
  if (typeof pattern === "string") return compileTextPattern(pattern);
  let dfa = COMPILED_PATTERNS.get(pattern);
  if (!dfa) COMPILED_PATTERNS.set(pattern, dfa = compileTextPattern(pattern));
  return dfa;
}

/** Options of `analysisSchema`. */
export interface AnalysisSchemaOptions extends ParseSkillOptions {
  /** An environment's skill grammar (literal text) the skill must be a sentence of. */
  skillPattern?: SkillPattern;
  /**
   * Whether the object has `episode_summary` after the skill: true (the default) for warm-up
   * targets, false for RL-time analyses (`analyzerSchemas`). Without it the object closes right
   * after the skill, so generation stops there.
   */
  summary?: boolean;
  /**
   * Most whitespace bytes per gap between the object's tokens (`JsonObjectSchema.maxWhitespace`).
   * Default 0: the compact form of `analysisTarget`, whose keys and punctuation are then forced
   * text (jump-forward decoding skips their draws). At 4 a model can pad the object
   * (`…"\n\n\n\n}`) and every byte outside the values is left to a draw.
   */
  maxWhitespace?: number;
}

/**
 * The JSON schema the analyzer decodes under (structured generation, see
 * workers/model/constrained_decoding.ts): `{"episode_skill": "…", "episode_summary": "…"}` in
 * `analysisTarget`'s order — or `{"episode_skill": "…"}` alone with `summary: false` — each value
 * within `parseSkillAnalysis`'s bounds (so the parser keeps it whole), the skill with a letter or
 * digit (else the parser rejects it), and no raw curly double quote (the parser reads
 * U+201C/U+201D as `"`; escaped as `\u201c` they are fine). No whitespace between the object's
 * tokens by default (`maxWhitespace`), the compact form `analysisTarget` trains: the object's
 * punctuation and keys are then forced, so jump-forward decoding appends them undrawn (see
 * workers/model/README.md, "The analyzer (structured generation)"). Every text this admits is
 * returned by `parseSkillAnalysis` as its strict JSON reading with whitespace collapsed (summary ""
 * without the field). With `skillPattern` (an environment's skill grammar as literal text) the
 * skill must also be one of its sentences, at most `maxSkillChars` bytes.
 */
export function analysisSchema(options: AnalysisSchemaOptions = {}): JsonObjectSchema {
  const {
    maxSkillChars = 400,
    maxSummaryChars = 800,
    skillPattern,
    summary = true,
    maxWhitespace = 0,
  } = options;
  const pattern = skillPattern === undefined ? undefined : compiledPattern(skillPattern);
  return {
    fields: [
      { name: "episode_skill", maxUnits: maxSkillChars, requireAlnum: true, pattern },
      ...(summary ? [{ name: "episode_summary", maxUnits: maxSummaryChars }] : []),
    ],
    maxWhitespace,
    forbiddenCodePoints: [0x201c, 0x201d],
  };
}

/** Heading of the skill block inserted into a turn's prompt (the reference code's, bold). */
export const SKILL_HEADING = "**Episode-Level Skill**";

/** The instruction line under the heading (the reference code's, with its colon). */
export const SKILL_INSTRUCTION =
  "Refer to this episode-level skill when deciding what action to take in the current episode:";

/**
 * Task-line patterns, tried in order (the reference code's `_insert_after_task_description`):
 * the block goes after the first match.
 */
const TASK_LINE_PATTERNS = [
  /^.*\bYour task is to:\s*.*(?:\n|$)/m,
  /^.*\bYour current task is:\s*.*(?:\n|$)/m,
  /^.*\bYour task is:\s*.*(?:\n|$)/m,
  /^.*\bYour question:\s*.*(?:\n|$)/m,
  /^.*\bYour goal is(?: to)?\b[:\s].*(?:\n|$)/m,
];

/** Without a task line the block goes before the first of these (the reference code's anchors). */
const TURN_ANCHORS = ["Now it's your turn to", "Now it's your turn"];

/**
 * The skill block of the teacher prompt (the paper's "Episode-Level Skill" section), as the
 * reference code's `seed/prompting.py` (`build_augmented_observation_text`,
 * github.com/lljcic2024-boop/agent_rl at 2cf2fad) writes it:
 *
 *     **Episode-Level Skill**
 *     Refer to this episode-level skill when deciding what action to take in the current episode:
 *     [<skill, stripped>]
 */
export function skillBlock(skill: string): string {
  return `${SKILL_HEADING}\n${SKILL_INSTRUCTION}\n[${skill}]`;
}

/**
 * Inserts the hindsight-skill block (`skillBlock`) into a turn's prompt for teacher re-scoring,
 * placed as the reference code's `seed/prompting.py` places it: (1) after the first task line
 * (`Your task is to: …` and the other patterns of `TASK_LINE_PATTERNS`); (2) else before the
 * first `Now it's your turn`; with a blank line on each side (the whitespace around the insertion
 * point is replaced by it); (3) else appended after a blank line. The rest of the prompt is kept
 * byte for byte (the reference also strips the whole observation first; our prompts are already
 * trimmed and the ordinary prompt is not stripped, so neither is the teacher's). The skill is
 * stripped of leading and trailing whitespace only, as the reference's `str(body).strip()`: a
 * line break inside it stays. Throws `SkillError` when it has no letter or digit.
 */
export function insertSkill(prompt: string, skill: string): string {
  const block = skillBlock(strippedSkill(skill, "a skill"));
  for (const pattern of TASK_LINE_PATTERNS) {
    const m = pattern.exec(prompt);
    if (m) return insertBlockAt(prompt, m.index + m[0].length, block);
  }
  return insertBeforeTurnLine(prompt, block);
}

/**
 * `skill` stripped of leading and trailing whitespace. Throws `SkillError` naming `what` when it
 * has no letter or digit.
 */
function strippedSkill(skill: string, what: string): string {
  const stripped = skill.trim();
  if (!meaningful(stripped)) {
    throw new SkillError(
      `Cannot insert ${what} as it must contain a letter or digit: current value is ${
        JSON.stringify(skill)
      }`,
    );
  }
  return stripped;
}

/**
 * `block` inserted into `prompt` at char `at` with a blank line on each side, the whitespace
 * around `at` replaced by them (the reference's `prefix.rstrip()` / `suffix.lstrip()`).
 */
function insertBlockAt(prompt: string, at: number, block: string): string {
  const prefix = prompt.slice(0, at).trimEnd(), suffix = prompt.slice(at).trimStart();
  if (prefix && suffix) return `${prefix}\n\n${block}\n\n${suffix}`;
  return prefix ? `${prefix}\n\n${block}` : `${block}\n\n${suffix}`;
}

/** `block` inserted before the first turn anchor of `prompt`, else appended after a blank line. */
function insertBeforeTurnLine(prompt: string, block: string): string {
  for (const anchor of TURN_ANCHORS) {
    const at = prompt.indexOf(anchor);
    if (at >= 0) return insertBlockAt(prompt, at, block);
  }
  return prompt ? `${prompt}\n\n${block}` : block;
}

/** The skill text per trajectory id (null where the analysis failed), for `teacherMask`. */
export function skillsByTrajectory(
  analyses: ReadonlyMap<string, SkillAnalysis | null>,
): Map<string, string | null> {
  return new Map([...analyses].map(([id, a]) => [id, a?.episode_skill ?? null]));
}

/** Heading of the critical-step skill block (the reference code's, bold). */
export const STEP_SKILL_HEADING = "**Critical-Step Skill**";

/** The instruction line under it (the reference code's, with its colon). */
export const STEP_SKILL_INSTRUCTION = "Use this current-step skill for this decision only:";

/**
 * The critical-step skill block of the teacher prompt, as the reference code's
 * `seed/prompting.py` (`build_augmented_observation_text`, agent_rl at 2cf2fad) writes it:
 *
 *     **Critical-Step Skill**
 *     Use this current-step skill for this decision only:
 *     [<skill, stripped>]
 */
export function stepSkillBlock(skill: string): string {
  return `${STEP_SKILL_HEADING}\n${STEP_SKILL_INSTRUCTION}\n[${skill}]`;
}

/**
 * Inserts the critical-step skill block (`stepSkillBlock`) into a turn's prompt for teacher
 * re-scoring, where the reference code's `seed/prompting.py` (`_insert_before_anchor`) puts it:
 * before the first `Now it's your turn to` (else `Now it's your turn`), with a blank line on each
 * side (the whitespace around the insertion point is replaced by it); else appended after a blank
 * line. No episode-level block goes with it: the authors' default `skill_teacher_mode`
 * `step_priority` scores a step that has a step skill under that skill alone. The skill is
 * stripped only. Throws `SkillError` when it has no letter or digit.
 */
export function insertStepSkill(prompt: string, skill: string): string {
  return insertBeforeTurnLine(prompt, stepSkillBlock(strippedSkill(skill, "a step skill")));
}

/**
 * The critical-step skills per trajectory id: turn (0-based) → skill, the first `max` entries of
 * each analysis' `step_skills` (in the analysis' key order, as the reference code's
 * `list(step_skills.items())[:max]`, `seed/analysis.py`) whose key is a turn of the trajectory
 * (`turns` by id; other keys are dropped, as theirs keeps only candidate steps) and whose skill
 * has a letter or digit. Only trajectories whose analysis parsed (an episode skill) have them.
 * `max` 0 gives none (the authors' `skill_mode: episode_only`).
 */
export function stepSkillsByTrajectory(
  analyses: ReadonlyMap<string, SkillAnalysis | null>,
  turns: ReadonlyMap<string, number>,
  max: number,
): Map<string, Map<number, string>> {
  const out = new Map<string, Map<number, string>>();
  if (max <= 0) return out;
  for (const [id, a] of analyses) {
    const length = turns.get(id) ?? 0;
    const kept = new Map<number, string>();
    for (const [key, skill] of Object.entries(a?.step_skills ?? {})) {
      if (kept.size >= max) break;
      const turn = /^\d+$/.test(key) ? Number(key) : -1;
      if (turn >= 0 && turn < length && meaningful(skill)) kept.set(turn, skill);
    }
    if (kept.size > 0) out.set(id, kept);
  }
  return out;
}

/**
 * Teacher prompts (N,) for re-scoring (workers/seed/README.md, Algorithm, step 4): sample i's
 * (a `TurnSample` of workers/seed/samples.ts) ordinary prompt with its turn's critical-step skill
 * inserted (`insertStepSkill`) where `stepSkills` has one for it, else with its trajectory's
 * episode skill (`insertSkill`) — the authors' `step_priority`; null when the trajectory has no
 * parsed skill (teacher mask 0: no teacher pass is needed for it).
 */
export function teacherPrompts(
  samples: readonly { prompt: string; trajectoryId: string; turn: number }[],
  skills: ReadonlyMap<string, string | null>,
  stepSkills: ReadonlyMap<string, ReadonlyMap<number, string>> = new Map(),
): (string | null)[] {
  return samples.map((s) => {
    const skill = skills.get(s.trajectoryId);
    if (typeof skill !== "string" || skill.trim() === "") return null;
    const step = stepSkills.get(s.trajectoryId)?.get(s.turn);
    return step !== undefined ? insertStepSkill(s.prompt, step) : insertSkill(s.prompt, skill);
  });
}

/*
 * Skills at inference (the server's `skills` extension): the chosen skill goes into chat messages
 * as re-scoring puts it into a turn's prompt (`insertSkill`): right after the `Your task is to:`
 * line, into the first message that has one (for chat models the block thus stays inside that
 * message, never a message of its own), else into the last user message.
 */

/** The task of a prompt: the rest of its first `Your task is to:` line, or null. */
export function taskOf(text: string): string | null {
  const line = text.split("\n").find((l) => l.includes(TASK_LINE_PREFIX.trim()));
  if (line === undefined) return null;
  return line.slice(line.indexOf(TASK_LINE_PREFIX.trim()) + TASK_LINE_PREFIX.trim().length)
    .trim();
}

/** The index of the message a skill goes into (see the note above); -1 when there is none. */
export function skillMessageIndex(messages: readonly ChatMessage[]): number {
  const withTask = messages.findIndex((m) => taskOf(m.content) !== null);
  if (withTask >= 0) return withTask;
  return messages.findLastIndex((m) => m.role === "user");
}

/** `messages` with `skill` inserted into message {@link skillMessageIndex}. */
export function withSkill(messages: readonly ChatMessage[], skill: string): ChatMessage[] {
  const at = skillMessageIndex(messages);
  return messages.map((m, i) => (i === at ? { ...m, content: insertSkill(m.content, skill) } : m));
}

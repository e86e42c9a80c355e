/**
 * The analyze step (workers/seed/README.md, Algorithm, step 3), independent of the model: batch
 * the analyzer prompts into one generation call and parse each answer (or let the environment's
 * reference analyzer write them). What follows from an analysis (the teacher prompts of step 4,
 * the library of step 6) is workers/skills' (`teacherPrompts`, `recordSkills`).
 * Generation is a function argument (θ_old, greedy, `analyzer_max_new_tokens`), like the policy of
 * `runRollouts`.
 */
import type { SkillAnalysis, Trajectory } from "../envs/types.ts";
import { SeedOptionError } from "./errors.ts";
import type { AnalyzeMode } from "./samples.ts";
import { selectForAnalysis } from "./samples.ts";
import {
  type AnalyzerPromptOptions,
  buildAnalyzerPrompt,
  parseSkillAnalysis,
  type ParseSkillOptions,
} from "../skills/mod.ts";

/**
 * A batched text generator: one completion per prompt, in the same order; `trajectories[i]` is
 * the trajectory prompt i analyses (its outcome picks the skill grammar, see
 * workers/skills/generation.ts).
 */
export type BatchGenerate = (
  prompts: string[],
  trajectories: readonly Trajectory[],
) => Promise<string[]>;

/** Options of `analyzeTrajectories`. */
export interface AnalyzeOptions {
  /** `all` trajectories or `failed_only` (JobSpec `seed.analyze`). */
  mode: AnalyzeMode;
  /** The analyzer: θ_old generating greedily (one call for all prompts). */
  generate: BatchGenerate;
  prompt?: AnalyzerPromptOptions;
  parse?: ParseSkillOptions;
}

/** What the analyze step produced. */
export interface AnalyzeResult {
  /** Per analysed trajectory id: the parsed analysis, or null when it did not parse. */
  analyses: Map<string, SkillAnalysis | null>;
  /** Trajectories sent to the analyzer. */
  analyzed: number;
  /** Analyses whose skill parsed. */
  parsed: number;
  /** The raw completions, by trajectory id (for logging and trajectory dumps). */
  raw: Map<string, string>;
}

/**
 * Runs the analyzer over the selected trajectories with one `generate` call (one prompt per
 * distinct analyzer prompt: equal prompts share one greedy completion) and parses every answer
 * leniently. Trajectories not selected (won ones under `failed_only`) are absent from
 * `analyses`. Throws `SeedOptionError` when `generate` returns the wrong number of completions.
 */
export async function analyzeTrajectories<T extends Trajectory & { id: string }>(
  trajectories: readonly T[],
  options: AnalyzeOptions,
): Promise<AnalyzeResult> {
  const selected = selectForAnalysis(trajectories, options.mode);
  const analyses = new Map<string, SkillAnalysis | null>();
  const raw = new Map<string, string>();
  if (selected.length === 0) return { analyses, analyzed: 0, parsed: 0, raw };
  // The analyzer decodes greedily, so equal prompts (the same trajectory, as a converged group
  // often plays it; the prompt fixes the outcome too) get equal analyses: each is generated once.
  const prompts = selected.map((t) => buildAnalyzerPrompt(t, options.prompt));
  const slotOf = new Map<string, number>();
  const distinct: number[] = [];
  const slot = prompts.map((p, i) => {
    let k = slotOf.get(p);
    if (k === undefined) slotOf.set(p, k = distinct.push(i) - 1);
    return k;
  });
  const completions = await options.generate(
    distinct.map((i) => prompts[i]),
    distinct.map((i) => selected[i]),
  );
  if (!Array.isArray(completions) || completions.length !== distinct.length) {
    throw new SeedOptionError(
      `Cannot analyze trajectories as generate must return one completion per prompt (${distinct.length}): current value is ${
        Array.isArray(completions) ? completions.length : typeof completions
      }`,
      { option: "generate", value: Array.isArray(completions) ? completions.length : completions },
    );
  }
  let parsed = 0;
  selected.forEach((t, i) => {
    const analysis = parseSkillAnalysis(completions[slot[i]], options.parse);
    if (analysis) parsed++;
    analyses.set(t.id, analysis);
    raw.set(t.id, completions[slot[i]]);
  });
  return { analyses, analyzed: selected.length, parsed, raw };
}

/**
 * The oracle analyze step (JobSpec `seed.skill_source: "reference"`): the environment's reference
 * analyzer (`referenceAnalysis`, a truthful skill: the workflow of a won trajectory, the actual
 * mistake of a lost one) writes the skill of every trajectory `mode` selects. Same result shape as
 * {@link analyzeTrajectories}; every analysis parses, and `raw` holds each one's JSON text.
 */
export async function referenceAnalyses<T extends Trajectory & { id: string }>(
  trajectories: readonly T[],
  options: { mode: AnalyzeMode; analyze: (trajectory: T) => Promise<SkillAnalysis> },
): Promise<AnalyzeResult> {
  const selected = selectForAnalysis(trajectories, options.mode);
  const analyses = new Map<string, SkillAnalysis | null>();
  const raw = new Map<string, string>();
  for (const t of selected) {
    const a = await options.analyze(t);
    analyses.set(t.id, a);
    raw.set(t.id, JSON.stringify(a));
  }
  return { analyses, analyzed: selected.length, parsed: selected.length, raw };
}

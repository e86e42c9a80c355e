/**
 * The analyzer's generation settings (workers/seed/README.md, Algorithm, step 3): how θ_old writes
 * an analysis at RL time (greedy, under the analysis schema of the trajectory's outcome) and the
 * check that `seed.analyzer_max_new_tokens` can hold the shortest analysis. The trainer, the
 * evaluation and the handler's set-up read them from here.
 */
import type { JobSpec } from "../../jobs/mod.ts";
import type { AsyncEnvironment } from "../envs/types.ts";
import type { JsonConstrainedDecoder, JsonObjectSchema } from "../model/mod.ts";
import { SeedOptionError } from "../seed/errors.ts";
import { analysisSchema } from "./prompt.ts";

/** What of a run plan (workers/seed/run_plan.ts `RunPlan`) decides whether and what is analysed. */
export interface AnalysisPlan {
  /** Whether the run analyses trajectories at all. */
  analysis: boolean;
  /** Which trajectories the analyzer reads. */
  analyze: "all" | "failed_only";
  /** Who writes the skills: the policy (generation) or the environment's reference analyzer. */
  skillSource: "policy" | "reference";
}

/** Generation options of the analyzer (a `TextGenerateOptions` of workers/seed/text_policy.ts). */
export interface AnalyzerGenerateOptions {
  maxNewTokens: number;
  /** 0: greedy. */
  temperature: number;
  seed: number;
  sharePrefixes: boolean;
  /** The analysis schema of prompt i. */
  schema: JsonObjectSchema[];
}

/**
 * How the analyzer generates (θ_old, greedy, `analyzer_max_new_tokens`) for trajectories of these
 * outcomes (`won[i]` of prompt i): under the analysis schema of `analyzerSchemas`, so every
 * answer parses. Evaluation or any other caller of the analyzer uses the same options.
 */
export function analyzerGenerateOptions(
  spec: JobSpec,
  env: Pick<AsyncEnvironment, "skillPatterns">,
  won: readonly boolean[],
): AnalyzerGenerateOptions {
  const schemas = analyzerSchemas(spec, env);
  return {
    maxNewTokens: spec.seed.analyzer_max_new_tokens,
    temperature: 0,
    seed: 0,
    // the analyzer prompts of one outcome begin with the same instructions: prefilled once
    sharePrefixes: true,
    schema: won.map((w) => (w ? schemas.won : schemas.lost)),
  };
}

/**
 * The RL-time analysis schemas by outcome: `{"episode_skill": "…"}` alone (only the skill reaches
 * the loss; the summary's decode steps are saved), the skill held to the environment's skill
 * grammar for a won or a lost trajectory (`skillPatterns`) where it has one, else free text for
 * both (workers/seed/README.md, Departures). The one place RL-time analysis schemas are built
 * (generation and `checkAnalyzerBudget` both read it).
 */
export function analyzerSchemas(
  _spec: JobSpec,
  env: Pick<AsyncEnvironment, "skillPatterns">,
): { won: JsonObjectSchema; lost: JsonObjectSchema } {
  const patterns = env.skillPatterns;
  if (!patterns) {
    const free = analysisSchema({ summary: false });
    return { won: free, lost: free };
  }
  return {
    won: analysisSchema({ skillPattern: patterns.won, summary: false }),
    lost: analysisSchema({ skillPattern: patterns.lost, summary: false }),
  };
}

/**
 * Fails early when the analyzer's budget cannot hold the shortest analysis object with this
 * tokenizer (constrained decoding needs `decoder.minTokens` tokens: free text 12 for GPT-2's and
 * ~20 for builtin tokenizers; more under an environment's skill grammar, with builtin tokenizers
 * Sokoban's 47 (won) and 34 (lost), household's 52 and 75, with the summary field; fewer
 * without it, as RL-time analyses are), for each outcome the job analyses (`seed.analyze`), under
 * the schemas generation uses (`analyzerSchemas`). Builds and keeps the constrained decoders
 * (indexes the vocabulary once).
 * @throws {SeedOptionError} naming `seed.analyzer_max_new_tokens`.
 */
export function checkAnalyzerBudget(spec: JobSpec, parts: {
  /** What the spec's method means (workers/seed/run_plan.ts `runPlan(spec)`). */
  plan: AnalysisPlan;
  /** The policy whose tokenizer spells the analyses (workers/seed/text_policy.ts `TextPolicy`). */
  theta: {
    jsonDecoder(
      schema: JsonObjectSchema,
    ): Pick<JsonConstrainedDecoder, "minTokens" | "exampleObject">;
  };
  env: Pick<AsyncEnvironment, "skillPatterns">;
}): void {
  const { plan, theta, env } = parts;
  if (!plan.analysis || plan.skillSource === "reference") return;
  const schemas = analyzerSchemas(spec, env);
  const used = plan.analyze === "failed_only" ? [schemas.lost] : [schemas.won, schemas.lost];
  const budget = spec.seed.analyzer_max_new_tokens;
  for (const schema of used) {
    const decoder = theta.jsonDecoder(schema);
    if (budget < decoder.minTokens) {
      throw new SeedOptionError(
        `Cannot analyze trajectories as seed.analyzer_max_new_tokens must be ≥ ${decoder.minTokens} (the tokens of ${decoder.exampleObject()} with this tokenizer) under constrained decoding: current value is ${budget}`,
        { option: "seed.analyzer_max_new_tokens", value: budget },
      );
    }
  }
}

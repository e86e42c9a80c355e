/**
 * The payload of `GET /v1/envs`: what each built-in environment is and which options it takes.
 */
import { z } from "zod";
import { listEnvironments } from "./registry.ts";
import { type Environment, type Split, SPLITS } from "./types.ts";

/** One environment in the catalog (JSON, snake_case). */
export interface EnvCatalogEntry {
  id: string;
  description: string;
  /** JSON schema (draft 2020-12) of `env.options`, input side (defaulted fields optional). */
  options_schema: Record<string, unknown>;
  /** The options used when none are given (`optionsSchema.parse({})`). */
  defaults: Record<string, unknown>;
  /** The splits, each with what it holds. */
  splits: { name: Split; description: string }[];
  families: string[];
  /** Default turn limit per episode (JobSpec `env.max_turns`). */
  default_max_turns: number;
  /** Whether it has a reference analyzer (JobSpec `seed.skill_source: "reference"` needs one). */
  reference_analyzer: boolean;
}

/** The `GET /v1/envs` body: `{ envs: [...] }`. */
export interface EnvCatalog {
  envs: EnvCatalogEntry[];
}

const GENERIC_SPLITS: Record<Split, string> = {
  train: "Training tasks.",
  test_seen: "New tasks from the training distribution.",
  test_unseen: "Held-out tasks (layouts or objects not used in training).",
};

/** The catalog entry of one environment. */
export function catalogEntryOf(env: Environment): EnvCatalogEntry {
  return {
    id: env.id,
    description: env.description,
    options_schema: z.toJSONSchema(env.optionsSchema, { io: "input" }) as Record<string, unknown>,
    defaults: env.optionsSchema.parse({}),
    splits: SPLITS.map((name) => ({
      name,
      description: env.splitDescriptions?.[name] ?? GENERIC_SPLITS[name],
    })),
    families: [...env.families],
    default_max_turns: env.defaultMaxTurns,
    reference_analyzer: typeof env.referenceAnalysis === "function",
  };
}

/** The `GET /v1/envs` payload for `envs` (default: every built-in environment). */
export function envCatalog(envs: readonly Environment[] = listEnvironments()): EnvCatalog {
  return { envs: envs.map(catalogEntryOf) };
}

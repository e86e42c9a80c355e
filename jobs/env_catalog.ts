/**
 * The built-in environment catalog as data, for code that must not import workers/ (the API,
 * README.md, Architecture): `jobs/env_catalog.json` is generated from `workers/envs` by
 * `deno task gen:env-catalog` (and a test fails when it is stale). Also the submit-time check of a
 * JobSpec's `env` against a catalog: known id, options valid under the env's JSON schema.
 *
 * Environments served over HTTP (`http(s)://…`) are not in the catalog and cannot be checked at
 * submit time; the JobSpec's `env.id` pattern does not admit URLs today, and {@link envSpecIssues}
 * skips any id that looks like one, leaving the check to the worker that connects to it.
 */
import { z } from "zod";
import catalogJson from "./env_catalog.json" with { type: "json" };

/**
 * One environment in the catalog (the JSON shape of `GET /v1/envs`, snake_case). A type alias, not
 * an interface, so that it is assignable to the API's open (index-signature) `EnvInfo`.
 */
export type EnvCatalogEntry = {
  /** Environment id, the JobSpec's `env.id`. */
  id: string;
  description: string;
  /** JSON schema (draft 2020-12) of `env.options`, input side (defaulted fields optional). */
  options_schema: Record<string, unknown>;
  /** The options used when none are given. */
  defaults: Record<string, unknown>;
  /** Task splits (`train`, `test_seen`, `test_unseen`), each with what it holds. */
  splits: { name: string; description: string }[];
  /** Task families (household) or product categories (webshop); the id alone when none. */
  families: string[];
  /** Default turn limit per episode (JobSpec `env.max_turns`). */
  default_max_turns: number;
  /** Whether it has a reference analyzer (JobSpec `seed.skill_source: "reference"` needs one). */
  reference_analyzer: boolean;
};

/** The `GET /v1/envs` body: `{ envs: [...] }`. */
export interface EnvCatalog {
  envs: EnvCatalogEntry[];
}

/** The built-in environments (from `jobs/env_catalog.json`, generated from workers/envs). */
export const ENV_CATALOG: EnvCatalog = catalogJson as EnvCatalog;

/** A problem with a submitted `env` (path relative to the JobSpec, e.g. `env.options.size`). */
export interface EnvIssue {
  path: string;
  code: string;
  message: string;
}

/** What {@link envSpecIssues} checks: the JobSpec's `env` object (only these fields are read). */
export interface EnvRef {
  id: string;
  options?: Record<string, unknown>;
}

/** A catalog entry as the check reads it (providers may omit the schema). */
export interface EnvCheckEntry {
  id: string;
  options_schema?: Record<string, unknown>;
  /** The options used when none are given (read by {@link modelEnvIssues}). */
  defaults?: Record<string, unknown>;
  /** Whether it has a reference analyzer (read by {@link skillSourceIssues}). */
  reference_analyzer?: boolean;
}

const compiled = new Map<string, z.ZodType>();

/**
 * The zod schema of a JSON schema (`z.fromJSONSchema`), compiled once per distinct schema text.
 * Throws zod's error when the schema uses a construct zod cannot convert.
 */
function optionsValidator(schema: Record<string, unknown>): z.ZodType {
  const key = JSON.stringify(schema);
  let validator = compiled.get(key);
  if (!validator) {
    validator = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
    compiled.set(key, validator);
  }
  return validator;
}

/** `a.b`, `a.b[0]` from a zod path under `prefix`. */
function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  let out = prefix;
  for (const key of path) out += typeof key === "number" ? `[${key}]` : `.${String(key)}`;
  return out;
}

/** True for an `http://` or `https://` environment reference (never in a catalog). */
export function isHttpEnvRef(id: string): boolean {
  return /^https?:\/\//i.test(id);
}

/**
 * Checks a JobSpec's `env` against catalog entries; returns the problems (empty when it passes).
 * - `env.id` must be one of the entries' ids (code `unknown_env`, message listing the known ids);
 * - `env.options` must satisfy the entry's `options_schema` (zod's codes, paths under
 *   `env.options`).
 * `env.max_turns` is left to the JobSpec's own bound (1–200): the catalog gives a default
 * (`default_max_turns`), not a limit.
 * An empty catalog accepts every id; an `http(s)://` id is not checked (see the module comment).
 */
export function envSpecIssues(entries: readonly EnvCheckEntry[], env: EnvRef): EnvIssue[] {
  if (entries.length === 0 || isHttpEnvRef(env.id)) return [];
  const entry = entries.find((e) => e.id === env.id);
  if (!entry) {
    const known = entries.map((e) => e.id).join(", ");
    return [{
      path: "env.id",
      code: "unknown_env",
      message: `Unknown environment; known: ${known}`,
    }];
  }
  const issues: EnvIssue[] = [];
  if (entry.options_schema) {
    const result = optionsValidator(entry.options_schema).safeParse(env.options ?? {});
    if (!result.success) {
      for (const issue of result.error.issues) {
        issues.push({
          path: formatPath("env.options", issue.path),
          code: issue.code,
          message: issue.message,
        });
      }
    }
  }
  return issues;
}

/** Model bases that have no image encoder (jobs/spec.ts `BUILTIN_MODELS`, text only). */
const TEXT_ONLY_BASES: readonly string[] = ["builtin:tiny"];

/**
 * Checks at submit time that a text-only model is not given image observations: a base of
 * {@link TEXT_ONLY_BASES} on an environment whose options, over its catalog `defaults`, say
 * `render: "image"` (sokoban with `render: "image"`; ezpoints by default) is one issue at
 * `model.base` (code `model_without_image_encoder`). Without it such a job was queued and only
 * failed when a worker started it. `s3://` bases and `http(s)://` environments are left to the
 * start-up check (workers/seed/run/model_source.ts `checkModelFitsEnv`), as their config or
 * observations are not known here; a `job:` base is checked by passing the base it was trained
 * from (api/spec_refs.ts `rootModelBase`) with `label` naming the reference in the message
 * (default `base`).
 */
export function modelEnvIssues(
  entries: readonly EnvCheckEntry[],
  model: { base: string; env: EnvRef; label?: string },
): EnvIssue[] {
  const { base, env, label = base } = model;
  if (!TEXT_ONLY_BASES.includes(base) || isHttpEnvRef(env.id)) return [];
  const entry = entries.find((e) => e.id === env.id);
  if (!entry) return [];
  const options = { ...entry.defaults, ...env.options };
  if (options.render !== "image") return [];
  return [{
    path: "model.base",
    code: "model_without_image_encoder",
    message:
      `${label} has no image encoder and ${env.id} renders images here (env.options.render "image"): use builtin:tiny-vl, or env.options.render "text"`,
  }];
}

/**
 * Checks at submit time that a job whose rollouts run on `rollout.engine` endpoints gets text
 * observations: the endpoints take token-id prompts only (workers/seed/remote_rollout.ts), so an
 * environment whose options, over its catalog `defaults`, say `render: "image"` is one issue at
 * `rollout.engine` (code `remote_engine_without_images`) naming the environment. `http(s)://`
 * environments and unlisted ids are left to the worker, which refuses an image prompt at the turn
 * it meets one.
 */
export function rolloutEngineIssues(
  entries: readonly EnvCheckEntry[],
  spec: { env: EnvRef; rollout: { engine: unknown } },
): EnvIssue[] {
  const { env } = spec;
  if (spec.rollout.engine === "local" || isHttpEnvRef(env.id)) return [];
  const entry = entries.find((e) => e.id === env.id);
  if (!entry) return [];
  const options = { ...entry.defaults, ...env.options };
  if (options.render !== "image") return [];
  return [{
    path: "rollout.engine",
    code: "remote_engine_without_images",
    message:
      `rollout.engine endpoints take text prompts only and ${env.id} renders images here (env.options.render "image"): use rollout.engine "local", or env.options.render "text"`,
  }];
}

/**
 * Checks at submit time that a job asking for oracle skills (`seed.skill_source: "reference"`)
 * runs on an environment with a reference analyzer: an entry that does not say
 * `reference_analyzer: true` (a deployment's own environment list may leave it out) is one issue
 * at `seed.skill_source` (code `no_reference_analyzer`). Every built-in environment has one. An
 * unlisted or `http(s)://` id, or an empty list, is left to {@link envSpecIssues} and the worker.
 */
export function skillSourceIssues(
  entries: readonly EnvCheckEntry[],
  spec: { env: EnvRef; seed: { skill_source: string } },
): EnvIssue[] {
  if (spec.seed.skill_source !== "reference" || isHttpEnvRef(spec.env.id)) return [];
  const entry = entries.find((e) => e.id === spec.env.id);
  if (!entry || entry.reference_analyzer === true) return [];
  return [{
    path: "seed.skill_source",
    code: "no_reference_analyzer",
    message:
      `${spec.env.id} lists no reference analyzer to write oracle skills: use seed.skill_source "policy"`,
  }];
}

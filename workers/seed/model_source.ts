/**
 * Resolves a job's `model.base` (DESIGN.md §3) into a model:
 *
 * - `builtin:tiny` → `createBuiltinTiny` with a tokenizer whose vocabulary is the environment's
 *   words ∪ the turn-prompt template ∪ the analyzer prompt template and skill block (so analyzer
 *   and teacher prompts are one token per word too), initialised from `random_seed`.
 * - `job:<id>[@step]` → that job's checkpoint (latest when no step), read through the worker's
 *   {@link ArtifactReader}: only jobs of the same tenant resolve (another tenant's job reads as
 *   missing).
 * - `s3://bucket/prefix/` → a Hugging Face folder read through the same reader. Only the
 *   service's own bucket is reachable, and keys under `tenants/` must belong to the job's tenant
 *   (the reader refuses others); a shared model is typically uploaded under e.g. `models/…`.
 */
import type { AsyncEnvironment, Trajectory } from "../envs/mod.ts";
import { promptTemplateVocabulary, vocabularyOf } from "../envs/prompt.ts";
import { createBuiltinTiny, type FileReader, type HfModel, loadHfDirectory } from "../model/mod.ts";
import type { ArtifactReader } from "../worker/handler.ts";
import { buildAnalyzerPrompt, PAPER_SKILL_INSTRUCTION, SKILL_HEADING } from "./skills.ts";

/** Thrown when `model.base` cannot be resolved (missing job/checkpoint/folder). */
export class ModelSourceError extends Error {
  override name = "ModelSourceError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** Every word of the analyzer prompt template and the skill block (outcomes, labels, JSON keys). */
export function analyzerTemplateVocabulary(): string[] {
  const task = {
    envId: "x",
    id: "x",
    split: "train" as const,
    seed: 0,
    family: "x",
    instruction: "",
    options: {},
  };
  const step = { observation: "", response: "", action: "", valid: true, reward: 0 };
  const texts = [true, false].map((won) => {
    const t: Trajectory = { task, steps: [step, { ...step, valid: false }], won, score: 0 };
    return buildAnalyzerPrompt(t, { maxSteps: 1 });
  });
  return vocabularyOf([
    ...texts,
    "(2 earlier steps omitted)",
    SKILL_HEADING,
    PAPER_SKILL_INSTRUCTION,
    '{"episode_summary": "", "episode_skill": ""}',
  ]);
}

/** The builtin:tiny vocabulary for `env` (see module doc), sorted and de-duplicated. */
export async function builtinVocabulary(env: AsyncEnvironment): Promise<string[]> {
  const words = new Set([
    ...(await env.vocabulary()),
    ...promptTemplateVocabulary(),
    ...analyzerTemplateVocabulary(),
  ]);
  return [...words].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** What `resolveModel` needs besides the reference. */
export interface ModelSourceOptions {
  env: AsyncEnvironment;
  /** Initialisation seed of builtin:tiny (JobSpec `random_seed`). */
  seed: number;
  /** Reads checkpoints and objects of the job's tenant. */
  artifacts: ArtifactReader;
}

/**
 * The model named by `base` (see module doc).
 * @throws ModelSourceError when a job, checkpoint or folder does not exist;
 *   ArtifactAccessError for a forbidden bucket/key; HfFormatError for an unusable folder.
 */
export async function resolveModel(base: string, options: ModelSourceOptions): Promise<HfModel> {
  if (base === "builtin:tiny") {
    return createBuiltinTiny({
      vocabulary: await builtinVocabulary(options.env),
      seed: options.seed,
    });
  }
  const job = /^job:([0-9a-f-]{36})(?:@(\d+))?$/.exec(base);
  if (job) {
    const step = job[2] === undefined ? undefined : Number(job[2]);
    const ck = await options.artifacts.checkpoint(job[1], step);
    if (!ck) {
      throw new ModelSourceError(
        `Cannot load model ${base} as the job must exist for this tenant and have a checkpoint${
          step === undefined ? "" : ` at step ${step}`
        }: none was found`,
      );
    }
    const names = new Set(ck.files.map((f) => f.name));
    return await loadHfDirectory((name) => names.has(name) ? ck.read(name) : Promise.resolve(null));
  }
  const s3 = /^s3:\/\/([^/]+)\/(.*)$/.exec(base);
  if (s3) {
    const [, bucket, prefix] = s3;
    const read: FileReader = (name) => options.artifacts.readObject(bucket, `${prefix}${name}`);
    return await loadHfDirectory(read).catch((e) => {
      throw new ModelSourceError(
        `Cannot load model ${base}: ${e instanceof Error ? e.message : e}`,
        {
          cause: e,
        },
      );
    });
  }
  throw new ModelSourceError(
    `Cannot load model ${base} as it must be builtin:tiny, job:<id>[@step] or s3://bucket/prefix/`,
  );
}

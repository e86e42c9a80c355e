/**
 * Resolves a job's `model.base` (jobs/SPEC.md) into a model:
 *
 * - `builtin:tiny` → `createBuiltinTiny` with a tokenizer whose vocabulary is the environment's
 *   words ∪ the turn-prompt template ∪ the analyzer prompt template and skill block (so analyzer
 *   and teacher prompts are one token per word too), initialised from `random_seed`.
 * - `builtin:tiny-vl` → `createBuiltinTinyVl`: the same vocabulary plus `<image>` as one special
 *   token (the config's `image_token_id`) and a small image encoder whose square input side is
 *   sized to the environment's images ({@link builtinImageSize}).
 * - `job:<id>[@step]` → that job's checkpoint (latest when no step), read through the worker's
 *   {@link ArtifactReader}: only jobs of the same tenant resolve (another tenant's job reads as
 *   missing). A LoRA job's checkpoint without merged weights (only the PEFT adapter) resolves to
 *   its base (the adapter's `base_model_name_or_path`, resolved as that job did: builtin models
 *   from its `trainer_state.json` env and seed) with the adapter merged in.
 * - `model:<id>` → a model the tenant uploaded (`POST /v1/models`), its files read verified
 *   against their recorded SHA-256.
 * - `s3://bucket/prefix/` → a Hugging Face folder read through the same reader. Only the
 *   service's own bucket is reachable, and keys under `tenants/` must belong to the job's tenant
 *   (the reader refuses others); a shared model is typically uploaded under e.g. `models/…`.
 */
import type { AsyncEnvironment, Trajectory } from "../../envs/mod.ts";
import { promptTemplateVocabulary, vocabularyOf } from "../../envs/prompt.ts";
import { resolveEnvironment } from "../../envs/mod.ts";
import {
  ADAPTER_FILES,
  adapterBaseReference,
  checkpointModelReader,
  createBuiltinTiny,
  createBuiltinTinyVl,
  type DecoderConfig,
  type FileReader,
  type HfModel,
  loadHfDirectory,
  mergeLora,
  parameterSpecs,
  readAdapter,
} from "../../model/mod.ts";
import { derivedSeed, SEED_USE } from "./seeds.ts";
import { MAX_ADAPTER_CHAIN } from "../../../jobs/mod.ts";
import type { ArtifactReader } from "../../worker/handler.ts";
import { type ObservationImage, promptImages } from "../rollout.ts";
import { buildAnalyzerPrompt, SKILL_HEADING, SKILL_INSTRUCTION } from "../../skills/mod.ts";

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
  const step = { observation: "", response: "", action: "", valid: true, reward: 0, feedback: "" };
  const texts = [true, false].map((won) => {
    const t: Trajectory = { task, steps: [step, { ...step, valid: false }], won, score: 0 };
    return buildAnalyzerPrompt(t, { maxSteps: 1 });
  });
  return vocabularyOf([
    ...texts,
    "(2 earlier steps omitted)",
    "Earlier effects: walked, 2 times; walked",
    SKILL_HEADING,
    SKILL_INSTRUCTION,
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
  /**
   * The images of the environment's first turn ({@link probeFirstTurn}); builtin:tiny-vl sizes
   * its encoder input to them ({@link builtinImageSize}). Default none (image side 48).
   */
  images?: readonly ObservationImage[];
}

/** Smallest and largest encoder input side (pixels) builtin:tiny-vl is built with. */
export const BUILTIN_IMAGE_SIZE = { min: 16, max: 80, default: 48 } as const;

/**
 * The square encoder input side (pixels) of builtin:tiny-vl for an environment's images: the
 * longer side of the largest image rounded up to a multiple of the patch size 8, within
 * [16, 80] (80 keeps an image at 100 tokens of 8×8 patches); 48 without images. A 6×6 Sokoban
 * room of 8-pixel tiles (48×48) is then one tile per patch; EZPoints' 104×72 two-card image is
 * resized to 80×80 (strokes of 2 pixels survive, at 48 they would not).
 */
export function builtinImageSize(images: readonly ObservationImage[]): number {
  if (images.length === 0) return BUILTIN_IMAGE_SIZE.default;
  const side = Math.max(...images.map((i) => Math.max(i.width, i.height)));
  const rounded = Math.ceil(side / 8) * 8;
  return Math.min(BUILTIN_IMAGE_SIZE.max, Math.max(BUILTIN_IMAGE_SIZE.min, rounded));
}

/** The policy's view of an environment's first turn: its prompt and the images it shows. */
export interface FirstTurn {
  prompt: string;
  /** One per `<image>` placeholder of the prompt (empty for text prompts). */
  images: ObservationImage[];
}

/**
 * The first turn of one `train` task (`env.options` as the job gives them): reset, build the
 * prompt, close. Cheap (one episode, no policy); used before training to size builtin:tiny-vl
 * and to check that the model can read the prompts ({@link checkModelFitsEnv}).
 * @throws EnvOptionsError (from the environment) on invalid options; RolloutError when a prompt
 *   shows an image the observation lacks.
 */
export async function probeFirstTurn(
  env: AsyncEnvironment,
  envOptions: Record<string, unknown>,
): Promise<FirstTurn> {
  const [task] = await env.sampleTasks("train", 1, 0, envOptions);
  const episode = env.createEpisode(task);
  try {
    const observation = await episode.reset();
    const prompt = await env.buildPrompt({
      task,
      history: [],
      observation,
      historyLength: 0,
      turn: 1,
    });
    return { prompt, images: promptImages(prompt, observation, 1) };
  } finally {
    await episode.close();
  }
}

/**
 * Checks that a model can read an environment's prompts: prompts with images need a model with
 * an image encoder (`vision_config`). A vision model on a text environment is fine (it gets no
 * images). Called when a job starts, so a mismatch fails it at once with this message.
 * @throws ModelSourceError naming the model, the environment and the fix.
 */
export function checkModelFitsEnv(
  config: DecoderConfig,
  names: { base: string; envId: string },
  firstTurn: FirstTurn,
): void {
  if (firstTurn.images.length > 0 && !config.vision_config) {
    throw new ModelSourceError(
      `Cannot train ${names.base} on ${names.envId} as its observations are images (the prompt shows <image>) and the model must have an image encoder (vision_config), e.g. builtin:tiny-vl: ${names.base} has none (use builtin:tiny-vl, or a text render of the environment such as env.options.render "text")`,
    );
  }
}

/**
 * The base of an adapter-only LoRA checkpoint `ref` with its adapter merged in (see module doc).
 * @throws ModelSourceError when the chain of adapters is too long or the checkpoint lacks its
 *   trainer state.
 */
async function mergedAdapter(
  ref: string,
  read: FileReader,
  options: ModelSourceOptions,
  depth: number,
): Promise<HfModel> {
  if (depth >= MAX_ADAPTER_CHAIN) {
    throw new ModelSourceError(
      `Cannot load model ${ref} as its chain of LoRA adapters must be at most ${MAX_ADAPTER_CHAIN} jobs long: it is longer`,
    );
  }
  const [configBytes, weightBytes, stateBytes] = await Promise.all(
    [ADAPTER_FILES.config, ADAPTER_FILES.weights, "trainer_state.json"].map(read),
  );
  if (!configBytes || !weightBytes || !stateBytes) {
    throw new ModelSourceError(
      `Cannot load model ${ref} as its LoRA checkpoint must hold ${ADAPTER_FILES.config}, ${ADAPTER_FILES.weights} and trainer_state.json: one is missing`,
    );
  }
  const baseName = adapterBaseReference(configBytes, weightBytes);
  const state = JSON.parse(new TextDecoder().decode(stateBytes)) as {
    env_id?: string;
    random_seed?: number;
  };
  const sameEnv = state.env_id === undefined || state.env_id === options.env.id;
  const base = await resolveAt(baseName, {
    ...options,
    env: sameEnv ? options.env : await resolveEnvironment(state.env_id!),
    seed: derivedSeed(state.random_seed ?? 0, SEED_USE.init),
  }, depth + 1);
  const adapter = readAdapter(base.config, configBytes, weightBytes);
  const parameters = mergeLora(
    base.config,
    new Map([...base.parameters, ...adapter.parameters]),
    adapter.lora,
    parameterSpecs(base.config),
  );
  return { ...base, parameters };
}

/**
 * The model named by `base` (see module doc).
 * @throws ModelSourceError when a job, checkpoint or folder does not exist;
 *   ArtifactAccessError for a forbidden bucket/key; HfFormatError for an unusable folder.
 */
export function resolveModel(base: string, options: ModelSourceOptions): Promise<HfModel> {
  return resolveAt(base, options, 0);
}

/**
 * `base` with a `job:<id>` reference pinned to that job's latest checkpoint (`job:<id>@<step>`),
 * so a LoRA job that resumes later reads its adapter onto the same base even when that job has
 * checkpointed since; other references unchanged (also when the job has no checkpoint: resolving
 * it then fails with its own message).
 */
export async function pinModelBase(base: string, artifacts: ArtifactReader): Promise<string> {
  const job = /^job:([0-9a-f-]{36})$/.exec(base);
  if (!job) return base;
  const ck = await artifacts.checkpoint(job[1]);
  return ck ? `job:${job[1]}@${ck.step}` : base;
}

async function resolveAt(
  base: string,
  options: ModelSourceOptions,
  depth: number,
): Promise<HfModel> {
  if (base === "builtin:tiny") {
    return createBuiltinTiny({
      vocabulary: await builtinVocabulary(options.env),
      seed: options.seed,
    });
  }
  if (base === "builtin:tiny-vl") {
    return createBuiltinTinyVl({
      vocabulary: await builtinVocabulary(options.env),
      seed: options.seed,
      imageSize: builtinImageSize(options.images ?? []),
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
    const read: FileReader = (name) => names.has(name) ? ck.read(name) : Promise.resolve(null);
    // Full weights (top level, or a LoRA checkpoint's merged/ folder), else the adapter's base.
    const full = checkpointModelReader(names, (name) => ck.read(name));
    if (full) return await loadHfDirectory(full);
    if (names.has(ADAPTER_FILES.config)) return await mergedAdapter(base, read, options, depth);
    return await loadHfDirectory(read);
  }
  const uploaded = /^model:([0-9a-f-]{36})$/.exec(base);
  if (uploaded) {
    const m = await options.artifacts.model?.(uploaded[1]);
    if (!m) {
      throw new ModelSourceError(
        `Cannot load model ${base} as it must be a model this tenant uploaded (POST /v1/models): none was found`,
      );
    }
    const names = new Set(m.files.map((f) => f.name));
    const hf = await loadHfDirectory((name) =>
      names.has(name) ? m.read(name) : Promise.resolve(null)
    );
    return m.name ? { ...hf, name: m.name } : hf;
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
    `Cannot load model ${base} as it must be builtin:tiny, builtin:tiny-vl, job:<id>[@step], model:<id> or s3://bucket/prefix/`,
  );
}

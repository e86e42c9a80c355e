/**
 * Trainer checkpoints (workers/seed/README.md, "Checkpoints and skill libraries"): a Hugging Face
 * directory (`config.json`, `generation_config.json`, `model.safetensors` F32, `tokenizer.json`,
 * `tokenizer_config.json`) plus `optimizer.safetensors` (AdamW moments and step) and
 * `trainer_state.json`:
 *
 * ```json
 * {"version": 1, "job_id": "…", "method": "seed", "env_id": "sokoban", "step": 4,
 *  "total_steps": 20, "random_seed": 0,
 *  "rng": {"algorithm": "xoshiro128**", "s": [u32, u32, u32, u32]},
 *  "reference_step": 0, "skill_library": {"version": 1, …}}
 * ```
 *
 * `step` is the number of RL updates done (0 = the warm-up checkpoint, which is π_ref);
 * `reference_step` names the checkpoint of this job that holds π_ref (null: the KL term is off).
 * Parameters are stored in float32 and the RNG state exactly, so a resumed job continues exactly.
 *
 * A LoRA job (`model.lora`) writes the adapter as a PEFT folder instead of the full weights:
 * `adapter_config.json`, `adapter_model.safetensors`, the tokenizer files, the optimizer state of
 * the adapter's tensors and `trainer_state.json`; with `model.lora.save_merged` also the merged
 * model (W + (α/r)·B·A) as a Hugging Face folder of its own, `merged/` (`merged/config.json`,
 * `merged/model.safetensors`, …: lora.ts `MERGED_FOLDER`), so each folder loads as it is. It
 * resumes on the base named by `model.base` (resolved again) with the adapter read back.
 */
import { z } from "zod";
import { METHODS } from "../../../jobs/mod.ts";
import {
  type AdamWState,
  ADAPTER_FILES,
  adapterBaseReference,
  type HfModel,
  loadHfDirectory,
  type LoraConfig,
  loraParameterSpecs,
  MERGED_FOLDER,
  mergeLora,
  parameterSpecs,
  readAdapter,
  readOptimizerState,
  type RngState,
  saveAdapter,
  saveHfDirectory,
  saveTokenizerFiles,
  writeOptimizerState,
} from "../../model/mod.ts";
import type { ResumePoint } from "../../worker/handler.ts";
import { type SkillLibraryJson, skillLibraryJson } from "../../skills/mod.ts";

/** File names of a trainer checkpoint besides the HF directory. */
export const OPTIMIZER_FILE = "optimizer.safetensors";
/** See module doc. */
export const TRAINER_STATE_FILE = "trainer_state.json";

const trainerStateSchema = z.object({
  version: z.literal(1),
  job_id: z.string(),
  method: z.enum(METHODS),
  env_id: z.string(),
  step: z.number().int().min(0),
  total_steps: z.number().int().min(0),
  random_seed: z.number().int().min(0),
  rng: z.object({
    algorithm: z.literal("xoshiro128**"),
    s: z.array(z.number().int().min(0)).length(4),
  }),
  reference_step: z.number().int().min(0).nullable(),
  skill_library: skillLibraryJson,
});

/** `trainer_state.json` (see module doc). */
export type TrainerState = z.infer<typeof trainerStateSchema> & { rng: RngState };

/** Thrown when a checkpoint is incomplete or its trainer state is malformed. */
export class CheckpointError extends Error {
  override name = "CheckpointError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** A LoRA job's adapter as a checkpoint holds it. */
export interface CheckpointAdapter {
  lora: LoraConfig;
  /**
   * The job's `model.base` (a `job:<id>` pinned to a step): kept in the adapter weights' metadata
   * (lora.ts `ADAPTER_BASE_METADATA`), which jobs and the server resolve.
   */
  baseModel: string;
  /**
   * `adapter_config.json`'s `base_model_name_or_path`: the base's own name (its config's
   * `_name_or_path`), what PEFT resolves; default `baseModel`.
   */
  baseName?: string;
  /** Also write the merged full weights as a Hugging Face folder. */
  saveMerged: boolean;
}

/**
 * The files of one checkpoint: the HF directory (or, with `adapter`, the PEFT adapter folder, the
 * tokenizer files and, when asked, the merged HF directory), optimizer state (when given), trainer
 * state. With `adapter`, `model.parameters` holds the base weights and the adapter's tensors.
 */
export function checkpointFiles(
  model: HfModel,
  optimizer: AdamWState | null,
  state: TrainerState,
  adapter?: CheckpointAdapter,
): { name: string; bytes: Uint8Array }[] {
  const c = model.config;
  const files: { name: string; bytes: Uint8Array }[] = [];
  const add = (m: Map<string, Uint8Array>, folder = "") => {
    for (const [name, bytes] of m) files.push({ name: folder + name, bytes });
  };
  if (adapter) {
    add(saveAdapter(c, adapter.lora, model.parameters, adapter.baseModel, adapter.baseName));
    add(saveTokenizerFiles(model.tokenizer));
    if (adapter.saveMerged) {
      const parameters = mergeLora(c, model.parameters, adapter.lora, parameterSpecs(c));
      add(saveHfDirectory({ ...model, parameters }), MERGED_FOLDER);
    }
  } else add(saveHfDirectory(model));
  if (optimizer) {
    const specs = adapter ? loraParameterSpecs(c, adapter.lora) : parameterSpecs(c);
    files.push({ name: OPTIMIZER_FILE, bytes: writeOptimizerState(optimizer, specs) });
  }
  files.push({
    name: TRAINER_STATE_FILE,
    bytes: new TextEncoder().encode(JSON.stringify(state, null, 1) + "\n"),
  });
  return files;
}

/** What a checkpoint restores. */
export interface RestoredCheckpoint {
  model: HfModel;
  /** Null in a checkpoint without `optimizer.safetensors` (e.g. the warm-up one). */
  optimizer: AdamWState | null;
  /** Null in a checkpoint without `trainer_state.json` (a plain HF folder). */
  state: TrainerState | null;
}

/**
 * Reads a checkpoint written by {@link checkpointFiles}. With `lora`, the checkpoint's adapter is
 * read onto `lora.base` (the job's base model, whose parameter map gets the adapter's tensors) and
 * must have the job's rank and target modules.
 * @throws CheckpointError on a malformed trainer state or an adapter that does not fit the job;
 *   HfFormatError on a bad HF directory; LoraError on bad adapter files.
 */
export async function readCheckpoint(
  point: ResumePoint,
  lora?: { config: LoraConfig; base: HfModel },
): Promise<RestoredCheckpoint> {
  const names = new Set(point.files.map((f) => f.name));
  let model: HfModel;
  if (lora) model = await readAdapterOnto(point, names, lora.config, lora.base);
  else {
    model = await loadHfDirectory((name) =>
      names.has(name) ? point.read(name) : Promise.resolve(null)
    );
  }
  const specs = lora ? loraParameterSpecs(model.config, lora.config) : parameterSpecs(model.config);
  const optimizer = names.has(OPTIMIZER_FILE)
    ? readOptimizerState(await point.read(OPTIMIZER_FILE), specs)
    : null;
  let state: TrainerState | null = null;
  if (names.has(TRAINER_STATE_FILE)) {
    const text = new TextDecoder().decode(await point.read(TRAINER_STATE_FILE));
    const parsed = trainerStateSchema.safeParse(JSON.parse(text));
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new CheckpointError(
        `Cannot resume from checkpoint ${point.step} as ${TRAINER_STATE_FILE} must be valid: ${
          issue.path.join(".") || "(root)"
        } ${issue.message}`,
        { cause: parsed.error },
      );
    }
    state = parsed.data as TrainerState;
  }
  return { model, optimizer, state };
}

/**
 * The base a LoRA checkpoint's adapter was trained on (the job's `model.base`, with a `job:<id>`
 * pinned to a step): the adapter weights' `seed_base_model` metadata, else (a checkpoint written
 * before it) `adapter_config.json`'s `base_model_name_or_path`.
 * @throws CheckpointError when the checkpoint holds no adapter or it names no base.
 */
export async function adapterBase(point: ResumePoint): Promise<string> {
  const has = (name: string) => point.files.some((f) => f.name === name);
  const base = has(ADAPTER_FILES.config) && has(ADAPTER_FILES.weights)
    ? adapterBaseReference(
      await point.read(ADAPTER_FILES.config),
      await point.read(ADAPTER_FILES.weights),
    )
    : "";
  if (base === "") {
    throw new CheckpointError(
      `Cannot resume a LoRA job from checkpoint ${point.step} as its adapter must name its base (${ADAPTER_FILES.weights} metadata seed_base_model or ${ADAPTER_FILES.config} base_model_name_or_path): it names none`,
    );
  }
  return base;
}

/** `base` with the checkpoint's adapter tensors added to its parameters (see readCheckpoint). */
async function readAdapterOnto(
  point: ResumePoint,
  names: Set<string>,
  lora: LoraConfig,
  base: HfModel,
): Promise<HfModel> {
  if (!names.has(ADAPTER_FILES.config) || !names.has(ADAPTER_FILES.weights)) {
    throw new CheckpointError(
      `Cannot resume a LoRA job from checkpoint ${point.step} as it must hold ${ADAPTER_FILES.config} and ${ADAPTER_FILES.weights}: it does not`,
    );
  }
  const adapter = readAdapter(
    base.config,
    await point.read(ADAPTER_FILES.config),
    await point.read(ADAPTER_FILES.weights),
  );
  const fits = adapter.lora.rank === lora.rank && adapter.lora.alpha === lora.alpha &&
    adapter.lora.target_modules.join() === lora.target_modules.join();
  if (!fits) {
    throw new CheckpointError(
      `Cannot resume from checkpoint ${point.step} as its adapter must have the job's model.lora rank, alpha and target_modules: current is ${
        JSON.stringify(adapter.lora)
      }`,
    );
  }
  for (const [name, t] of adapter.parameters) base.parameters.set(name, t.slice());
  return base;
}

/** Re-exported for callers that build a state. */
export type { SkillLibraryJson };

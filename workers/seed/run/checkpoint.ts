/**
 * Trainer checkpoints (README.md, "Checkpoints and skill libraries"): a Hugging Face directory
 * (`config.json`, `generation_config.json`, `model.safetensors` F32, `tokenizer.json`,
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
 */
import { z } from "zod";
import {
  type AdamWState,
  type HfModel,
  loadHfDirectory,
  parameterSpecs,
  readOptimizerState,
  type RngState,
  saveHfDirectory,
  writeOptimizerState,
} from "../../model/mod.ts";
import type { ResumePoint } from "../../worker/handler.ts";
import { type SkillLibraryJson, skillLibraryJson } from "../skill_library.ts";

/** File names of a trainer checkpoint besides the HF directory. */
export const OPTIMIZER_FILE = "optimizer.safetensors";
/** See module doc. */
export const TRAINER_STATE_FILE = "trainer_state.json";

const trainerStateSchema = z.object({
  version: z.literal(1),
  job_id: z.string(),
  method: z.enum(["seed", "grpo", "sft"]),
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

/** The files of one checkpoint: the HF directory, optimizer state (when given), trainer state. */
export function checkpointFiles(
  model: HfModel,
  optimizer: AdamWState | null,
  state: TrainerState,
): { name: string; bytes: Uint8Array }[] {
  const files = [...saveHfDirectory(model)].map(([name, bytes]) => ({ name, bytes }));
  if (optimizer) {
    files.push({
      name: OPTIMIZER_FILE,
      bytes: writeOptimizerState(optimizer, parameterSpecs(model.config)),
    });
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
 * Reads a checkpoint written by {@link checkpointFiles}.
 * @throws CheckpointError on a malformed trainer state; HfFormatError on a bad HF directory.
 */
export async function readCheckpoint(point: ResumePoint): Promise<RestoredCheckpoint> {
  const names = new Set(point.files.map((f) => f.name));
  const model = await loadHfDirectory((name) =>
    names.has(name) ? point.read(name) : Promise.resolve(null)
  );
  const optimizer = names.has(OPTIMIZER_FILE)
    ? readOptimizerState(await point.read(OPTIMIZER_FILE), parameterSpecs(model.config))
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

/** Re-exported for callers that build a state. */
export type { SkillLibraryJson };

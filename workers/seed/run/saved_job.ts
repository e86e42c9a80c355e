/**
 * A finished sokoban job made from given checkpoints and skill libraries, written through the
 * real queue and the trainer's fenced checkpoint writes, as a training run would leave it: a model
 * that was not trained here can then be served as `job:<id>` (`bench:serve` and the
 * inference-server tests serve such jobs).
 */
import {
  type ArtifactStore,
  claimJob,
  type Database,
  fenceOf,
  parseJobSpec,
  saveCheckpoint,
  saveSkillLibrary,
  submitJob,
  succeedJob,
} from "../../../jobs/mod.ts";
import type { HfModel } from "../../model/mod.ts";
import { type CheckpointAdapter, checkpointFiles } from "./checkpoint.ts";
import { SkillLibrary } from "../../skills/mod.ts";

/**
 * Submits and claims a sokoban job of `tenantId`, saves each checkpoint (through the trainer's
 * checkpoint writer and the fenced `saveCheckpoint`) and skill library, and finishes the job.
 * With `adapter`, the checkpoints are a LoRA job's (each model's parameters hold the adapter too).
 * Returns the job id.
 */
export async function saveJob(
  db: Database,
  store: ArtifactStore,
  tenantId: string,
  checkpoints: { step: number; model: HfModel }[],
  libraries: { step: number; library: SkillLibrary }[] = [],
  adapter?: CheckpointAdapter,
): Promise<string> {
  const { job } = await submitJob(db, {
    tenantId,
    spec: parseJobSpec({ env: { id: "sokoban" }, priority: 1000 }),
  });
  const claimed = await claimJob(db, { workerId: "w-serve-test", device: "cpu", leaseMs: 60_000 });
  if (claimed?.id !== job.id) throw new Error(`Cannot claim job ${job.id}: got ${claimed?.id}`);
  const writer = { fence: fenceOf(claimed), tenantId };
  const last = Math.max(...checkpoints.map((c) => c.step));
  for (const { step, model } of checkpoints) {
    const files = checkpointFiles(model, null, {
      version: 1,
      job_id: job.id,
      method: "seed",
      env_id: "sokoban",
      step,
      total_steps: last,
      random_seed: 0,
      rng: { algorithm: "xoshiro128**", s: [1, 2, 3, 4] },
      reference_step: 0,
      skill_library: new SkillLibrary(job.id).toJSON(step),
    }, adapter);
    await saveCheckpoint(db, store, writer, { step, files });
  }
  for (const { step, library } of libraries) {
    const json = { ...library.toJSON(step), job_id: job.id };
    await saveSkillLibrary(db, store, writer, { step, json, skillCount: library.size });
  }
  await succeedJob(db, writer.fence);
  return job.id;
}

/**
 * A failed LoRA job for the dashboard test, written through the job domain's own functions as a
 * worker writes them: four steps of metrics whose teacher gap Δ runs from −0.005 to 0.005 and
 * whose policy loss is negative (charts with negative ticks), a skill whose mean Δ is −0.00035, a
 * checkpoint with a LoRA adapter's many files (their links must wrap, not widen the page), and a
 * long failure reason.
 */
import {
  claimJob,
  failJob,
  fenceOf,
  parseJobSpec,
  recordMetrics,
  saveCheckpoint,
  saveSkillLibrary,
  submitJob,
} from "../../jobs/mod.ts";
import { SkillLibrary } from "../../workers/skills/mod.ts";
import type { ApiFixture } from "./_fixture.ts";

/** Teacher gap Δ per step (nats per token): crosses zero. */
export const CHART_GAPS = [-0.005, -0.0021, 0.0013, 0.005];
/** The skill's mean Δ: small enough that three decimals would print 0. */
export const SMALL_GAP = -0.00035;
/** The failure reason the job ends with. */
export const FAILURE =
  "ConstraintError: Cannot constrain the analyzer's answer as the vocabulary must spell the schema's text: some byte of it is no token's (tokenizer.json)";
/** The checkpoint's files: a LoRA adapter, its tokenizer and a merged copy's shards. */
export const LORA_FILES = [
  "adapter_config.json",
  "adapter_model.safetensors",
  "tokenizer.json",
  "tokenizer_config.json",
  "special_tokens_map.json",
  "generation_config.json",
  "chat_template.jinja",
  "merged-config.json",
  "merged-model-00001-of-00003.safetensors",
  "merged-model-00002-of-00003.safetensors",
  "merged-model-00003-of-00003.safetensors",
  "merged-model.safetensors.index.json",
  "seed_training_state_with_a_rather_long_descriptive_file_name_that_has_no_break.json",
];

/** Writes the job (see module doc) for tenant A and returns its id. */
export async function chartsJob(fx: ApiFixture): Promise<string> {
  const { job } = await submitJob(fx.db, {
    tenantId: fx.tenantA.id,
    spec: parseJobSpec({ env: { id: "sokoban" }, model: { lora: { rank: 8 } } }),
  });
  const claimed = await claimJob(fx.db, { workerId: "w-charts", device: "cpu", leaseMs: 60_000 });
  if (claimed?.id !== job.id) throw new Error(`Cannot claim ${job.id}: got ${claimed?.id}`);
  const writer = { fence: fenceOf(claimed), tenantId: fx.tenantA.id };
  for (const [step, gap] of CHART_GAPS.entries()) {
    await recordMetrics(fx.db, writer.fence, step, {
      teacher_gap_mean: gap,
      pg_loss: -0.02 + 0.004 * step,
      success_rate: 0.25 * step,
      mean_reward: -1 + 0.5 * step,
      seconds_rollout: 2 + step,
    });
  }
  const library = new SkillLibrary(job.id);
  library.add("keep the box off the walls", {
    step: 1,
    taskId: "task-0",
    trajectoryId: "step-1/b0g0",
    success: true,
    meanTeacherGap: SMALL_GAP,
  }, "a summary");
  await saveSkillLibrary(fx.db, fx.store, writer, {
    step: 1,
    json: library.toJSON(1),
    skillCount: library.size,
  });
  await saveCheckpoint(fx.db, fx.store, writer, {
    step: 3,
    files: LORA_FILES.map((name) => ({ name, bytes: new TextEncoder().encode(`{"${name}":1}`) })),
  });
  await failJob(fx.db, writer.fence, FAILURE);
  return job.id;
}

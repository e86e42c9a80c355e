/**
 * A test handler that honours the SEED trainer's contract with the demo without training: it
 * writes what `deno task demo` reads, with the same names, so the demo's path can be tested end
 * to end before (and independently of) the real trainer.
 *
 * - progress stages `warmup` → (`rollout` → `analyze` → `update`)×steps, with step/total_steps;
 * - metrics: step 0 holds `eval/<split>/success_rate` and `eval/<split>/score` (before RL), every
 *   step `success_rate`, `skills_added`, `skill_library_size`, and eval figures at `eval_every`
 *   steps and the last step; `eval` and `step` events;
 * - no skill library for `grpo` (it analyses nothing), as the trainer;
 * - a checkpoint at `checkpoint_every` steps and the last: a real builtin:tiny Hugging Face folder
 *   (`config.json`, `model.safetensors`, `tokenizer.json`, …, `optimizer.safetensors`,
 *   `trainer_state.json`) built for the job's environment, and a skill library (version 1).
 *
 * Its "policy" is scripted: each turn it takes the environment expert's action with probability
 * step/steps and a random admissible action otherwise, so success rates are measured on real
 * episodes and rise over the run; skills come from the environment's reference analyzer.
 */
import {
  AdamW,
  createBuiltinTiny,
  parameterSpecs,
  saveHfDirectory,
  writeOptimizerState,
} from "../../../workers/model/mod.ts";
import {
  type Environment,
  getEnvironment,
  type Split,
  type Task,
  type Trajectory,
  type TrajectoryStep,
} from "../../../workers/envs/mod.ts";
import { maxTurnsOf } from "../../../jobs/mod.ts";
import { SkillLibrary } from "../../../workers/skills/mod.ts";
import type { JobContext, JobHandler } from "../../../workers/worker/mod.ts";

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function playEpisode(
  env: Environment,
  task: Task,
  o: { maxTurns: number; expertShare: number; rand: () => number },
): Trajectory {
  const episode = env.createEpisode(task);
  const expert = env.createExpert(task);
  let observation = episode.reset();
  const steps: TrajectoryStep[] = [];
  let won = false;
  for (let turn = 0; turn < o.maxTurns; turn++) {
    const choices = observation.admissibleActions ?? [];
    let action: string;
    if (o.rand() < o.expertShare || choices.length === 0) action = expert.act(observation);
    else action = choices[Math.floor(o.rand() * choices.length)];
    const result = episode.step(action);
    steps.push({
      observation: observation.text,
      response: `<action>${action}</action>`,
      action,
      valid: result.valid,
      reward: result.reward,
    });
    observation = result.observation;
    won = result.won;
    if (result.done) break;
  }
  return { task, steps, won, score: steps.reduce((s, x) => s + x.reward, 0) };
}

const mean = (xs: number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

async function evaluate(
  ctx: JobContext,
  env: Environment,
  step: number,
  expertShare: number,
): Promise<Record<string, number>> {
  await ctx.setProgress({ stage: "eval", step, totalSteps: ctx.spec.steps });
  const out: Record<string, number> = {};
  for (const split of ctx.spec.eval.splits as Split[]) {
    const tasks = env.sampleTasks(split, ctx.spec.eval.episodes, ctx.spec.random_seed + 7919, {
      ...ctx.spec.env.options,
    });
    const rand = prng(ctx.spec.random_seed * 31 + step);
    const runs = tasks.map((task) =>
      playEpisode(env, task, { maxTurns: maxTurnsOf(ctx.spec, env), expertShare, rand })
    );
    const successRate = mean(runs.map((r) => (r.won ? 1 : 0)));
    const score = mean(runs.map((r) => r.score));
    out[`eval/${split}/success_rate`] = successRate;
    out[`eval/${split}/score`] = score;
    await ctx.emit("eval", {
      step,
      split,
      episodes: runs.length,
      success_rate: successRate,
      score,
    });
  }
  return out;
}

function checkpointFiles(
  ctx: JobContext,
  model: ReturnType<typeof createBuiltinTiny>,
  step: number,
): { name: string; bytes: Uint8Array }[] {
  const files = saveHfDirectory(model);
  const specs = parameterSpecs(model.config);
  files.set(
    "optimizer.safetensors",
    writeOptimizerState(new AdamW(specs, { lr: 1e-4 }).state(), specs),
  );
  const state = {
    step,
    job_id: ctx.jobId,
    method: ctx.spec.method,
    fixture: "tests/api/demo/_handler.ts",
  };
  files.set("trainer_state.json", new TextEncoder().encode(JSON.stringify(state, null, 2)));
  return [...files].map(([name, bytes]) => ({ name, bytes }));
}

/** The handler (see module doc). */
export const demoFixtureHandler: JobHandler = async (ctx) => {
  const { spec } = ctx;
  const env = getEnvironment(spec.env.id);
  const total = spec.steps;
  await ctx.setProgress({ stage: "warmup", step: 0, totalSteps: total });
  const model = createBuiltinTiny({ vocabulary: env.vocabulary(), seed: spec.random_seed });
  const library = new SkillLibrary(ctx.jobId);
  await ctx.recordMetrics(0, await evaluate(ctx, env, 0, 0));
  const rand = prng(spec.random_seed);
  for (let step = 1; step <= total; step++) {
    ctx.signal.throwIfAborted();
    const share = step / total;
    await ctx.setProgress({ stage: "rollout", step: step - 1, totalSteps: total });
    const tasks = env.sampleTasks("train", spec.rollout.tasks_per_step, spec.random_seed + step, {
      ...spec.env.options,
    });
    const runs = tasks.flatMap((task) =>
      Array.from(
        { length: spec.rollout.group_size },
        () => playEpisode(env, task, { maxTurns: maxTurnsOf(spec, env), expertShare: share, rand }),
      )
    );
    await ctx.setProgress({ stage: "analyze", step: step - 1, totalSteps: total });
    let added = 0;
    if (spec.method === "seed") {
      runs.forEach((run, i) => {
        const analysis = env.referenceAnalysis(run);
        const { added: isNew } = library.add(analysis.episode_skill, {
          step,
          taskId: run.task.id,
          trajectoryId: `${run.task.id}#${i % spec.rollout.group_size}`,
          success: run.won,
          meanTeacherGap: null,
        }, analysis.episode_summary);
        if (isNew) added++;
      });
    }
    await ctx.setProgress({ stage: "update", step, totalSteps: total });
    const values: Record<string, number> = {
      success_rate: mean(runs.map((r) => (r.won ? 1 : 0))),
      skills_added: added,
      skill_library_size: library.size,
    };
    const last = step === total;
    if (last || (spec.eval_every > 0 && step % spec.eval_every === 0)) {
      Object.assign(values, await evaluate(ctx, env, step, share));
    }
    await ctx.recordMetrics(step, values);
    await ctx.emit("step", { step, ...values });
    if (last || step % spec.checkpoint_every === 0) {
      await ctx.setProgress({ stage: "checkpoint", step, totalSteps: total });
      await ctx.saveCheckpoint(step, checkpointFiles(ctx, model, step));
      if (spec.method === "seed") await ctx.saveSkills(step, library.toJSON(step), library.size);
    }
  }
  await ctx.setProgress({ stage: "done", step: total, totalSteps: total, etaS: 0 });
};

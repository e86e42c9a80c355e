/**
 * A job with skills for the dashboard test: two real SEED trainer steps (builtin:tiny on sokoban:
 * real rollouts, re-scoring and update) whose analyzer answers are fixed JSON — a from-scratch
 * tiny model cannot write a parseable analysis in a test's budget (as in
 * tests/workers/seed/trainer_teacher_test.ts) — with each step's skill library and rollout dump
 * (per-token teacher gaps from the real re-scoring) saved under the job's fence through the job
 * domain's functions, as the worker saves them.
 */
import {
  claimJob,
  fenceOf,
  parseJobSpec,
  saveSkillLibrary,
  saveTrajectoryDump,
  submitJob,
  succeedJob,
} from "../../jobs/mod.ts";
import { getEnvironment, toAsyncEnvironment } from "../../workers/envs/mod.ts";
import { AdamW, parameterSpecs, Policy, Rng, Tokenizer } from "../../workers/model/mod.ts";
import {
  runPlan,
  SeedTrainer,
  type TextGenerateOptions,
  TextPolicy,
} from "../../workers/seed/mod.ts";
import { SkillLibrary } from "../../workers/skills/mod.ts";
import { resolveModel } from "../../workers/seed/run/mod.ts";
import { DEFAULT_DUMP_LIMITS, rolloutDump } from "../../workers/seed/run/trajectory_dump.ts";
import { tinySpec } from "../workers/seed/_jobs.ts";
import type { ApiFixture } from "./_fixture.ts";

/** The analyzer's skills at steps 1 and 2 (by trajectory, in turn). */
export const STEP_SKILLS = [
  ["push the box up first", "go left before pushing"],
  ["go left before pushing", "never push a box into a corner"],
];

/** The real policy, except that analyzer prompts get a fixed answer from {@link STEP_SKILLS}. */
class FixedAnalyzer extends TextPolicy {
  calls = 0;
  override generate(prompts: string[], options: TextGenerateOptions) {
    if (!prompts[0]?.startsWith("Analyze the agent episode")) {
      return super.generate(prompts, options);
    }
    const skills = STEP_SKILLS[this.calls++];
    const texts = prompts.map((_, i) =>
      JSON.stringify({ episode_summary: `summary ${i}`, episode_skill: skills[i % skills.length] })
    );
    return Promise.resolve({ texts, responseIds: texts.map(() => []), tokens: 0 });
  }
}

/** Runs the job (see module doc) for tenant A and returns its id. */
export async function skillsJob(fx: ApiFixture): Promise<string> {
  const input = tinySpec({ seed: { opd_coef: 1 } });
  const { job } = await submitJob(fx.db, { tenantId: fx.tenantA.id, spec: parseJobSpec(input) });
  const claimed = await claimJob(fx.db, { workerId: "w-skills", device: "cpu", leaseMs: 60_000 });
  if (claimed?.id !== job.id) throw new Error(`Cannot claim ${job.id}: got ${claimed?.id}`);
  const writer = { fence: fenceOf(claimed), tenantId: fx.tenantA.id };
  const spec = parseJobSpec(input);
  const env = toAsyncEnvironment(getEnvironment("sokoban"));
  const model = await resolveModel("builtin:tiny", { env, seed: 1, artifacts: null as never });
  const policy = new Policy(model.config, model.parameters, { threads: 1 });
  const tokenizer = new Tokenizer(model.tokenizer);
  const theta = new FixedAnalyzer(policy, tokenizer);
  const library = new SkillLibrary(job.id);
  const trainer = new SeedTrainer({
    spec,
    plan: runPlan(spec),
    env,
    theta,
    reference: null,
    optimizer: new AdamW(parameterSpecs(model.config), { lr: 1e-3 }),
    rng: new Rng(1),
    library,
  });
  try {
    for (const step of [1, 2]) {
      const out = await trainer.step(step, () => Promise.resolve());
      const dump = rolloutDump(job.id, step, out.trajectories, DEFAULT_DUMP_LIMITS, {
        ...out.teacher,
        decode: (ids) => tokenizer.decode(ids),
      });
      await saveTrajectoryDump(fx.db, fx.store, writer, dump);
      await saveSkillLibrary(fx.db, fx.store, writer, {
        step,
        json: library.toJSON(step),
        skillCount: library.size,
      });
    }
  } finally {
    await policy.release();
  }
  await succeedJob(fx.db, writer.fence);
  return job.id;
}

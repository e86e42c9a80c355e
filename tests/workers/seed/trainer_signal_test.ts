import assert from "node:assert/strict";
import { parseJobSpec } from "../../../jobs/mod.ts";
import { getEnvironment, toAsyncEnvironment } from "../../../workers/envs/mod.ts";
import { AdamW, parameterSpecs, Policy, Rng, Tokenizer } from "../../../workers/model/mod.ts";
import {
  resolveModel,
  runPlan,
  SeedTrainer,
  SkillLibrary,
  type TextGenerateOptions,
  TextPolicy,
} from "../../../workers/seed/mod.ts";
import { tinySpec } from "./_jobs.ts";

/** A well-formed sokoban skill: true exactly for trajectories that kept walking into walls. */
const BUMPS = "Look at the grid before moving; walking into a wall wastes a step.";

/** The real policy, except that every analysis answers {@link BUMPS}. */
class FixedAnalyzer extends TextPolicy {
  override generate(prompts: string[], options: TextGenerateOptions) {
    if (!prompts[0]?.startsWith("Analyze the agent episode")) {
      return super.generate(prompts, options);
    }
    const json = JSON.stringify({ episode_summary: "moved", episode_skill: BUMPS });
    const responseIds = prompts.map(() => []);
    return Promise.resolve({ texts: prompts.map(() => json), responseIds, tokens: 0 });
  }
}

Deno.test("a step reports Δ by outcome, corr(Δ, A), all-zero groups and skill quality", async () => {
  const spec = parseJobSpec(tinySpec({ seed: { opd_coef: 1 } }));
  const sokoban = getEnvironment("sokoban");
  const env = toAsyncEnvironment(sokoban);
  const model = await resolveModel("builtin:tiny", { env, seed: 1, artifacts: null as never });
  const policy = new Policy(model.config, model.parameters, { threads: 1 });
  const trainer = new SeedTrainer({
    spec,
    plan: runPlan(spec),
    env,
    theta: new FixedAnalyzer(policy, new Tokenizer(model.tokenizer)),
    reference: null,
    optimizer: new AdamW(parameterSpecs(model.config), { lr: 1e-3 }),
    rng: new Rng(1),
    library: new SkillLibrary("job-1"),
  });
  try {
    const { metrics, trajectories } = await trainer.step(1, () => Promise.resolve());
    const n = trajectories.length;
    assert.equal(metrics.skills_judged, n);
    assert.equal(metrics.skill_well_formed_rate, 1);
    const truthful = trajectories.filter((t) =>
      sokoban.referenceAnalysis(t).episode_skill === BUMPS
    ).length;
    assert.equal(metrics.skill_truthful_rate, truthful / n);
    const share = metrics.zero_advantage_group_share;
    assert.ok(share >= 0 && share <= 1, `share ${share}`);
    // Every sample has a teacher: the won and lost means are the token-weighted parts of the mean.
    const won = trajectories.some((t) => t.won), lost = trajectories.some((t) => !t.won);
    assert.equal("teacher_gap_won_mean" in metrics, won);
    assert.equal("teacher_gap_lost_mean" in metrics, lost);
    if (won && !lost) {
      assert.ok(Math.abs(metrics.teacher_gap_won_mean - metrics.teacher_gap_mean) < 1e-6);
    }
    if (lost && !won) {
      assert.ok(Math.abs(metrics.teacher_gap_lost_mean - metrics.teacher_gap_mean) < 1e-6);
    }
    const corr = metrics.teacher_gap_advantage_corr;
    assert.ok(corr === undefined || (corr >= -1 && corr <= 1), `corr ${corr}`);
  } finally {
    await policy.release();
  }
});

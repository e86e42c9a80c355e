import assert from "node:assert/strict";
import { parseJobSpec } from "../../../jobs/mod.ts";
import { getEnvironment, type Trajectory } from "../../../workers/envs/mod.ts";
import { Tokenizer } from "../../../workers/model/mod.ts";
import { scoringTemperature, TextPolicy } from "../../../workers/seed/mod.ts";
import { insertSkill, insertStepSkill, SkillLibrary } from "../../../workers/skills/mod.ts";
import { FixedAnalyzer, testTrainer, tinySokobanPolicy, tinySpec } from "./_jobs.ts";

/** A well-formed sokoban skill: true exactly for trajectories that kept walking into walls. */
const BUMPS = "Look at the grid before moving; walking into a wall wastes a step.";

Deno.test("a step reports Δ by outcome, corr(Δ, A), all-zero groups and skill quality", async () => {
  const spec = parseJobSpec(tinySpec({ seed: { opd_coef: 1 } }));
  const sokoban = getEnvironment("sokoban");
  const { env, model, policy } = await tinySokobanPolicy();
  // Every analysis answers BUMPS.
  const theta = new FixedAnalyzer(policy, new Tokenizer(model.tokenizer), BUMPS);
  const trainer = testTrainer(spec, { env, theta });
  try {
    const { metrics, trajectories } = await trainer.step(1, () => Promise.resolve());
    const n = trajectories.length;
    assert.equal(metrics.skills_judged, n);
    assert.equal(metrics.skill_well_formed_rate, 1);
    const truthful = trajectories.filter((t) =>
      sokoban.referenceAnalysis(t).episode_skill === BUMPS
    ).length;
    assert.equal(metrics.skill_truthful_rate, truthful / n);
    assert.equal(metrics.skill_reference_match_rate, truthful / n);
    for (const won of [true, false]) {
      const mine = trajectories.filter((t) => t.won === won);
      const name = won ? "skill_truthful_won_rate" : "skill_truthful_lost_rate";
      if (mine.length === 0) assert.equal(name in metrics, false);
      else {
        const right = mine.filter((t) => sokoban.referenceAnalysis(t).episode_skill === BUMPS);
        assert.equal(metrics[name], right.length / mine.length);
      }
    }
    const share = metrics.zero_advantage_group_share;
    assert.ok(share >= 0 && share <= 1, `share ${share}`);
    // Every sample has a teacher: the won and lost means are the token-weighted parts of the mean.
    const won = trajectories.some((t) => t.won), lost = trajectories.some((t) => !t.won);
    assert.equal("teacher_gap_won_mean" in metrics, won);
    assert.equal("teacher_gap_lost_mean" in metrics, lost);
    // The trainer hands the old log-probs on: present with won teacher tokens, a bound on Δ.
    assert.equal("old_logprob_won_mean" in metrics, won);
    if (won) {
      assert.ok(metrics.old_logprob_won_mean < 0);
      assert.ok(metrics.teacher_gap_won_mean <= -metrics.old_logprob_won_mean + 1e-6);
    }
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

Deno.test("a turn with a critical-step skill is re-scored under that skill's prompt alone", async () => {
  // Sokoban's reference analyses with one step skill at turn 0 (its own analyzer writes none).
  const spec = parseJobSpec(
    tinySpec({ seed: { skill_source: "reference", max_step_skills: 1 } }),
  );
  const { env: sokoban, model, policy } = await tinySokobanPolicy();
  const advice = "push the box up";
  const env = {
    ...sokoban,
    referenceAnalysis: async (t: Trajectory) => ({
      ...await sokoban.referenceAnalysis(t),
      step_skills: { "0": advice },
    }),
  };
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  // θ before the update, to score the same samples by hand (the same init, seed 1).
  const fresh = await tinySokobanPolicy();
  const before = new TextPolicy(fresh.policy, new Tokenizer(fresh.model.tokenizer));
  try {
    const library = new SkillLibrary("job-1");
    const { metrics, trajectories } = await testTrainer(spec, { env, theta, library }).step(
      1,
      () => Promise.resolve(),
    );
    assert.equal(metrics.step_skill_samples, trajectories.length);
    const temperature = scoringTemperature(spec);
    const firstTurns = trajectories.map((t) => t.steps[0]);
    const score = (prompt: (p: string) => string) =>
      before.policy.score(
        firstTurns.map((s) => before.sample(prompt(s.prompt), s.responseIds ?? s.response, false)),
        { temperature },
      );
    const teacher = await score((p) => insertStepSkill(p, advice));
    const old = await score((p) => p);
    const gaps = teacher.logprobs.flatMap((l, i) =>
      Array.from(l, (x, k) => x - old.logprobs[i][k])
    );
    const expected = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    assert.ok(
      Math.abs(metrics.teacher_gap_step_mean - expected) < 1e-4,
      `${metrics.teacher_gap_step_mean} vs ${expected}`,
    );
    // Under the episode skill the first turns would score otherwise.
    const episode = await score((p) => insertSkill(p, "x"));
    assert.notDeepEqual(episode.logprobs, teacher.logprobs);
    // The library's mean Δ of each episode skill counts only the turns scored under it (1, 2, …).
    const sightings = library.all().flatMap((s) => s.provenance);
    assert.equal(sightings.length, trajectories.length);
    for (const t of trajectories) {
      const seen = sightings.find((p) => p.trajectoryId === t.id)!;
      const later = t.steps.slice(1);
      if (later.length === 0) {
        assert.equal(seen.meanTeacherGap, null);
        continue;
      }
      const skill = (await sokoban.referenceAnalysis(t)).episode_skill;
      const scoreLater = (prompt: (p: string) => string) =>
        before.policy.score(
          later.map((s) => before.sample(prompt(s.prompt), s.responseIds ?? s.response, false)),
          { temperature },
        );
      const [under, plain] = [
        await scoreLater((p) => insertSkill(p, skill)),
        await scoreLater((p) => p),
      ];
      const d = under.logprobs.flatMap((l, i) => Array.from(l, (x, k) => x - plain.logprobs[i][k]));
      const mean = d.reduce((a, b) => a + b, 0) / d.length;
      assert.ok(Math.abs(seen.meanTeacherGap! - mean) < 1e-4, `${seen.meanTeacherGap} vs ${mean}`);
    }
  } finally {
    await policy.release();
    await fresh.policy.release();
  }
});

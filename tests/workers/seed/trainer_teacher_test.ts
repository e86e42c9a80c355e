import assert from "node:assert/strict";
import { parseJobSpec } from "../../../jobs/mod.ts";
import { compileTextPattern, Tokenizer } from "../../../workers/model/mod.ts";
import { runPlan, SeedTrainer, TextPolicy } from "../../../workers/seed/mod.ts";
import {
  analysisSchema,
  analyzerGenerateOptions,
  checkAnalyzerBudget,
  SkillLibrary,
} from "../../../workers/skills/mod.ts";
import { FixedAnalyzer, testTrainer, tinySokobanPolicy, tinySpec } from "./_jobs.ts";
import {
  SOKOBAN_SKILL_GRAMMAR,
  SOKOBAN_SKILL_PATTERNS,
} from "../../../workers/envs/sokoban/judge.ts";
import { matchesSkillGrammar } from "../../../workers/envs/skill_judge.ts";

Deno.test("a step with parsed skills re-scores under the skill prompt and distils", async () => {
  const spec = parseJobSpec(tinySpec({ seed: { opd_coef: 1 } }));
  const { env, model, policy } = await tinySokobanPolicy();
  // The analyses are fixed: a from-scratch tiny model cannot write one in a test's budget, and
  // this step is about what the trainer does with them.
  const theta = new FixedAnalyzer(policy, new Tokenizer(model.tokenizer));
  const library = new SkillLibrary("job-1");
  const trainer = testTrainer(spec, { env, theta, library });
  const stages: string[] = [];
  const { metrics } = await trainer.step(1, (s) => Promise.resolve(void stages.push(s)));
  assert.deepEqual(stages, ["rollout", "analyze", "rescore", "update"]);
  assert.equal(metrics.analyzer_parse_rate, 1);
  assert.equal(metrics.teacher_samples, metrics.samples);
  assert.ok(metrics.gate_mean > 0 && metrics.gate_mean < 1, `gate ${metrics.gate_mean}`);
  assert.ok(metrics.opd_loss !== 0 && Number.isFinite(metrics.teacher_gap_mean));
  // The teacher pass ran, and its seconds are reported.
  assert.ok(metrics.teacher_pass_seconds > 0);
  assert.equal(metrics.skills_added, 1);
  const [skill] = library.all();
  assert.equal(skill.text, "push the box up");
  assert.equal(skill.timesSeen, spec.rollout.tasks_per_step * spec.rollout.group_size);
  assert.ok(Number.isFinite(skill.meanTeacherGap), "mean Δ recorded");
  await policy.release();
});

Deno.test("the trainer hands its prefixCacheBytes (WORKER_PREFIX_CACHE_MB) to the teacher pass as its KV budget", async () => {
  const spec = parseJobSpec(tinySpec({ seed: { opd_coef: 1 } }));
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new FixedAnalyzer(policy, new Tokenizer(model.tokenizer));
  // The real pass runs; this only records the budget the trainer hands it.
  const budgets: (number | undefined)[] = [];
  const score = policy.scoreSharedPrefixes.bind(policy);
  policy.scoreSharedPrefixes = (input, groups, opts) => {
    budgets.push(opts?.cacheBytes);
    return score(input, groups, opts);
  };
  const base = testTrainer(spec, { env, theta, library: new SkillLibrary("job-1") });
  const trainer = new SeedTrainer({ ...base.parts, prefixCacheBytes: 3 * 2 ** 20 });
  const { metrics } = await trainer.step(1, () => Promise.resolve());
  assert.ok(metrics.teacher_samples > 0);
  assert.deepEqual(budgets, [3 * 2 ** 20]);
  await policy.release();
});

Deno.test("a from-scratch model's analyses all parse: the analyzer decodes under the analysis schema", async () => {
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const spec = parseJobSpec(tinySpec());
  checkAnalyzerBudget(spec, { plan: runPlan(spec), theta, env });
  const library = new SkillLibrary("job-1");
  const trainer = testTrainer(spec, { env, theta, library, lr: 0 });
  const { metrics } = await trainer.step(1, () => Promise.resolve());
  assert.equal(metrics.analyzed, spec.rollout.tasks_per_step * spec.rollout.group_size);
  assert.equal(metrics.analyzer_parse_rate, 1);
  assert.ok(library.size > 0 && metrics.teacher_samples > 0);
  await policy.release();
});

Deno.test("under the environment's skill grammar a from-scratch model's skills are all well-formed sentences", async () => {
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const spec = parseJobSpec(tinySpec({ seed: { analyzer_max_new_tokens: 64 } }));
  checkAnalyzerBudget(spec, { plan: runPlan(spec), theta, env });
  const library = new SkillLibrary("job-1");
  const trainer = testTrainer(spec, { env, theta, library, lr: 0 });
  const { metrics } = await trainer.step(1, () => Promise.resolve());
  assert.equal(metrics.analyzer_parse_rate, 1);
  assert.equal(metrics.skill_well_formed_rate, 1);
  assert.ok(library.size > 0);
  // every skill is a sentence of the grammar, and of its trajectories' outcome: the workflow
  // for won ones, a failure sentence for lost ones
  const won = compileTextPattern(SOKOBAN_SKILL_PATTERNS.won);
  const lost = compileTextPattern(SOKOBAN_SKILL_PATTERNS.lost);
  for (const skill of library.all()) {
    assert.ok(matchesSkillGrammar(SOKOBAN_SKILL_GRAMMAR, skill.text), skill.text);
    const pattern = skill.successCount > 0 ? won : lost;
    assert.ok(pattern.matches(skill.text), `${skill.text} (${skill.successCount} won)`);
    assert.ok(skill.successCount === 0 || skill.failureCount === 0, "no sentence serves both");
  }
  assert.ok(library.all().some((s) => s.failureCount > 0), "a from-scratch policy loses");
  await policy.release();
});

Deno.test("a step's analyses carry skills and no summaries: the summary is not decoded", async () => {
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const spec = parseJobSpec(tinySpec({ seed: { analyzer_max_new_tokens: 96 } }));
  const library = new SkillLibrary("job-1");
  const trainer = testTrainer(spec, { env, theta, library, lr: 0 });
  const { metrics, teacher } = await trainer.step(1, () => Promise.resolve());
  assert.equal(metrics.analyzer_parse_rate, 1);
  assert.ok(library.size > 0);
  for (const [id, analysis] of teacher.analyses) {
    assert.equal(analysis?.episode_summary, "", id);
    assert.ok(analysis!.episode_skill.length > 0, id);
    assert.ok(!teacher.raw!.get(id)!.includes("episode_summary"), teacher.raw!.get(id));
  }
  assert.ok(library.all().every((s) => s.summary === ""));
  await policy.release();
});

Deno.test("the budget check asks for the shortest skill-only object under the skill grammar", async () => {
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const min = (summary: boolean) =>
    Math.max(
      ...[SOKOBAN_SKILL_PATTERNS.won, SOKOBAN_SKILL_PATTERNS.lost].map((skillPattern) =>
        theta.jsonDecoder(analysisSchema({ skillPattern, summary })).minTokens
      ),
    );
  const without = min(false);
  assert.equal(min(true), 47, "Sokoban's won sentence with the summary, builtin tokenizer");
  assert.ok(without < 47, `${without}`);
  const spec = (tokens: number) =>
    parseJobSpec(tinySpec({ seed: { analyzer_max_new_tokens: tokens } }));
  checkAnalyzerBudget(spec(without), { plan: runPlan(spec(without)), theta, env });
  assert.throws(
    () =>
      checkAnalyzerBudget(spec(without - 1), {
        plan: runPlan(spec(without - 1)),
        theta,
        env,
      }),
    new RegExp(
      `seed\\.analyzer_max_new_tokens must be ≥ ${without} \\(the tokens of \\{"episode_skill":"Walk behind[^}]*"\\} with`,
    ),
  );
  await policy.release();
});

Deno.test("the analyzer's generation options hold every analysis to the skill-only schema of its outcome", async () => {
  const { env, policy } = await tinySokobanPolicy();
  const options = analyzerGenerateOptions(parseJobSpec(tinySpec()), env, [true, false]);
  const schemas = options.schema as ReturnType<typeof analysisSchema>[];
  assert.equal(schemas.length, 2);
  assert.equal("stop" in options, false);
  for (const schema of schemas) {
    assert.deepEqual(schema.fields.map((f) => f.name), ["episode_skill"]);
    assert.ok(schema.fields[0].pattern, "the skill grammar holds");
  }
  assert.notEqual(schemas[0], schemas[1], "won and lost trajectories get their own sentences");
  await policy.release();
});

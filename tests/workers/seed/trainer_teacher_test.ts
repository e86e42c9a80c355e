import assert from "node:assert/strict";
import { parseJobSpec } from "../../../jobs/mod.ts";
import {
  compileTextPattern,
  type Policy,
  type TokenConstraint,
  Tokenizer,
} from "../../../workers/model/mod.ts";
import {
  ANALYSIS_STOP,
  analysisSchema,
  analyzerGenerateOptions,
  checkAnalyzerBudget,
  parseSkillAnalysis,
  SkillLibrary,
  SUMMARY_KEY_STOPS,
  type TextGenerateOptions,
  TextPolicy,
} from "../../../workers/seed/mod.ts";
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
  // The teacher pass and the analyzer replay ran, and their seconds are reported.
  assert.ok(metrics.teacher_pass_seconds > 0 && metrics.analyzer_replay_seconds > 0);
  assert.equal(metrics.skills_added, 1);
  const [skill] = library.all();
  assert.equal(skill.text, "push the box up");
  assert.equal(skill.timesSeen, spec.rollout.tasks_per_step * spec.rollout.group_size);
  assert.ok(Number.isFinite(skill.meanTeacherGap), "mean Δ recorded");
  await policy.release();
});

Deno.test("a from-scratch model's analyses all parse under constrained decoding, and none without", async () => {
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const rates: number[] = [];
  for (const analyzer_constrained of [true, false]) {
    const spec = parseJobSpec(
      tinySpec({
        seed: { analyzer_max_new_tokens: 24, analyzer_constrained },
      }),
    );
    assert.equal(parseJobSpec({ env: { id: "sokoban" } }).seed.analyzer_constrained, true);
    checkAnalyzerBudget(spec, theta, env);
    const library = new SkillLibrary("job-1");
    const trainer = testTrainer(spec, { env, theta, library, lr: 0 });
    const { metrics } = await trainer.step(1, () => Promise.resolve());
    assert.equal(metrics.analyzed, spec.rollout.tasks_per_step * spec.rollout.group_size);
    rates.push(metrics.analyzer_parse_rate);
    if (analyzer_constrained) assert.ok(library.size > 0 && metrics.teacher_samples > 0);
  }
  assert.deepEqual(rates, [1, 0]);
  const small = parseJobSpec(
    tinySpec({ seed: { analyzer_max_new_tokens: 12 } }),
  );
  assert.throws(
    () => checkAnalyzerBudget(small, theta, env),
    /seed\.analyzer_max_new_tokens must be ≥ 20/,
  );
  await policy.release();
});

Deno.test("under the environment's skill grammar a from-scratch model's skills are all well-formed sentences", async () => {
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const spec = parseJobSpec(
    tinySpec({ seed: { analyzer_max_new_tokens: 64, skill_grammar: "env" } }),
  );
  assert.equal(parseJobSpec({ env: { id: "sokoban" } }).seed.skill_grammar, "env", "the default");
  checkAnalyzerBudget(spec, theta, env);
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
  // a budget below the shortest sentence is refused up front, naming the option
  const small = parseJobSpec(
    tinySpec({ seed: { analyzer_max_new_tokens: 24, skill_grammar: "env" } }),
  );
  assert.throws(
    () => checkAnalyzerBudget(small, theta, env),
    /seed\.analyzer_max_new_tokens must be ≥ 47 \(the tokens of \{"episode_skill":"Walk behind/,
  );
  await policy.release();
});

Deno.test("without the summary a step's analyses carry skills and no summaries, the same skills as with it", async () => {
  const runs = [];
  for (const analyzer_summary of [true, false]) {
    // a fresh policy per run: a step updates θ (the spec's lr), and both runs must roll out and
    // analyse from the same weights
    const { env, model, policy } = await tinySokobanPolicy();
    const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
    const spec = parseJobSpec(
      tinySpec({ seed: { analyzer_max_new_tokens: 96, skill_grammar: "env", analyzer_summary } }),
    );
    checkAnalyzerBudget(spec, theta, env);
    const library = new SkillLibrary("job-1");
    const trainer = testTrainer(spec, { env, theta, library, lr: 0 });
    const { metrics, teacher } = await trainer.step(1, () => Promise.resolve());
    runs.push({ metrics, teacher, library });
    await policy.release();
  }
  assert.equal(parseJobSpec({ env: { id: "sokoban" } }).seed.analyzer_summary, true, "default");
  const [on, off] = runs;
  assert.equal(off.metrics.analyzer_parse_rate, 1);
  assert.ok(off.library.size > 0);
  for (const [id, analysis] of off.teacher.analyses) {
    assert.equal(analysis?.episode_summary, "", id);
    assert.ok(!off.teacher.raw!.get(id)!.includes("episode_summary"), off.teacher.raw!.get(id));
  }
  assert.ok(off.library.all().every((s) => s.summary === ""));
  // with it every answer writes the field (this from-scratch model leaves it empty)
  assert.ok([...on.teacher.raw!.values()].every((r) => r.includes('"episode_summary"')));
  // greedy, and the skill comes first: the summary's absence changes no skill
  const skills = (r: typeof on) => [...r.teacher.analyses].map(([id, a]) => [id, a?.episode_skill]);
  assert.deepEqual(skills(off), skills(on));
  assert.ok(off.metrics.tokens_generated < on.metrics.tokens_generated);
});

Deno.test("the budget check asks for the shortest object of the schema in use, shorter without the summary", async () => {
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const min = (summary: boolean) =>
    Math.max(
      ...[SOKOBAN_SKILL_PATTERNS.won, SOKOBAN_SKILL_PATTERNS.lost].map((skillPattern) =>
        theta.jsonDecoder(analysisSchema({ skillPattern, summary })).minTokens
      ),
    );
  const [withSummary, without] = [min(true), min(false)];
  assert.equal(withSummary, 47, "Sokoban's won sentence with the builtin tokenizer");
  assert.ok(without < withSummary, `${without} vs ${withSummary}`);
  const spec = (analyzer_summary: boolean) =>
    parseJobSpec(
      tinySpec({
        seed: { analyzer_max_new_tokens: without, skill_grammar: "env", analyzer_summary },
      }),
    );
  checkAnalyzerBudget(spec(false), theta, env);
  assert.throws(
    () => checkAnalyzerBudget(spec(true), theta, env),
    new RegExp(`must be ≥ ${withSummary} \\(the tokens of \\{"episode_skill":"Walk behind`),
  );
  const short = parseJobSpec(
    tinySpec({
      seed: { analyzer_max_new_tokens: without - 1, skill_grammar: "env", analyzer_summary: false },
    }),
  );
  assert.throws(
    () => checkAnalyzerBudget(short, theta, env),
    new RegExp(
      `must be ≥ ${without} \\(the tokens of \\{"episode_skill":"Walk behind[^}]*"\\} with`,
    ),
  );
  await policy.release();
});

Deno.test("the analyzer's generation options follow analyzer_summary, constrained or not", async () => {
  const { env, policy } = await tinySokobanPolicy();
  const options = (seed: Record<string, unknown>) =>
    analyzerGenerateOptions(
      parseJobSpec(tinySpec({ seed: { skill_grammar: "env", ...seed } })),
      env,
      [true, false],
    );
  for (const analyzer_summary of [true, false]) {
    const schemas = options({ analyzer_summary }).schema as ReturnType<typeof analysisSchema>[];
    assert.equal(schemas.length, 2);
    for (const schema of schemas) {
      const names = schema.fields.map((f) => f.name);
      assert.deepEqual(
        names,
        analyzer_summary ? ["episode_skill", "episode_summary"] : ["episode_skill"],
      );
      assert.ok(schema.fields[0].pattern, "the skill grammar holds either way");
    }
  }
  assert.deepEqual(options({ analyzer_constrained: false }).stop, [ANALYSIS_STOP]);
  assert.deepEqual(
    options({ analyzer_constrained: false, analyzer_summary: false }).stop,
    [ANALYSIS_STOP, ...SUMMARY_KEY_STOPS],
  );
  await policy.release();
});

/** A constraint that allows only `ids`, in order: the model writes exactly that text. */
function forcing(ids: readonly number[]): TokenConstraint {
  let k = 0;
  return {
    maskLogits(logits) {
      for (let i = 0; i < logits.length; i++) if (i !== ids[k]) logits[i] = -Infinity;
    },
    accept: () => ++k === ids.length,
  };
}

/**
 * θ made to answer every analyzer prompt with `answer`, through the real generation loop and the
 * stop strings the trainer asks for (a forcing constraint picks each token): the text a model
 * writing `answer` leaves after the job's stops. Other prompts are generated as usual.
 */
class ScriptedAnalyzer extends TextPolicy {
  constructor(policy: Policy, tokenizer: Tokenizer, readonly answer: string) {
    super(policy, tokenizer);
  }

  override async generate(prompts: string[], options: TextGenerateOptions) {
    if (!prompts[0]?.startsWith("Analyze the agent episode")) {
      return super.generate(prompts, options);
    }
    assert.equal(options.schema, undefined, "free text");
    const ids = this.tokenizer.encode(this.answer, { addSpecialTokens: false });
    const gens = await this.policy.generate(prompts.map((p) => this.promptIds(p)), {
      maxNewTokens: ids.length,
      greedy: true,
      stop: options.stop,
      detokenize: (t) => this.tokenizer.decode(t, { skipSpecialTokens: true }),
      constraint: () => forcing(ids),
    });
    return {
      texts: gens.map((g) => (g.text ?? "").trim()),
      responseIds: gens.map((g) => g.tokens),
      tokens: gens.reduce((n, g) => n + g.tokens.length, 0),
    };
  }
}

Deno.test("free-text analyses without the summary keep every skill the whole answer had, and no summary", async () => {
  const { env, model, policy } = await tinySokobanPolicy();
  const spec = parseJobSpec(
    tinySpec({ seed: { analyzer_constrained: false, analyzer_summary: false } }),
  );
  const answers = [
    // the warm-up's form (analysisTarget): cut right after the skill
    '{"episode_skill":"push the box up","episode_summary":"pushed the box up"}',
    // the prompt's spacing
    '{"episode_skill": "push the box up", "episode_summary": "pushed the box up"}',
    // the paper's order, summary first
    '{"episode_summary": "pushed the box up", "episode_skill": "push the box up"}',
    // the key's name quoted inside the skill
    '{"episode_skill":"fill the \\"episode_summary\\" last","episode_summary":"done"}',
  ];
  for (const answer of answers) {
    const theta = new ScriptedAnalyzer(policy, new Tokenizer(model.tokenizer), answer);
    const library = new SkillLibrary("job-1");
    const trainer = testTrainer(spec, { env, theta, library, lr: 0 });
    const { metrics, teacher } = await trainer.step(1, () => Promise.resolve());
    const want = parseSkillAnalysis(answer)!.episode_skill;
    assert.equal(metrics.analyzer_parse_rate, 1, `${answer} → ${[...teacher.raw!.values()][0]}`);
    for (const [id, analysis] of teacher.analyses) {
      assert.deepEqual(analysis, { episode_summary: "", episode_skill: want }, id);
    }
    assert.deepEqual(library.all().map((s) => [s.text, s.summary]), [[want, ""]]);
    if (answer.startsWith('{"episode_skill')) {
      // the summary's tokens are not generated
      for (const raw of teacher.raw!.values()) assert.ok(!raw.includes("pushed"), raw);
    }
  }
  await policy.release();
});

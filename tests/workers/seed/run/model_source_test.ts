import assert from "node:assert/strict";
import {
  commitModel,
  getJob,
  type JobSpecInput,
  listCheckpoints,
  modelPrefix,
} from "../../../../jobs/mod.ts";
import { createTenant, openTestDatabase } from "../../../_harness/fixtures.ts";
import { startTestStore } from "../../../_harness/s3.ts";
import {
  checkpointFile,
  metricsByStep,
  runOne,
  submit,
  testWorker,
  tinySpec,
  trainerRegistry,
} from "../_jobs.ts";

const WARMUP_ONLY = {
  method: "sft",
  warmup: {
    policy: { episodes: 1, epochs: 1, batch_size: 8 },
    analyzer: { episodes: 0, epochs: 1, batch_size: 8 },
  },
  eval: { episodes: 1, splits: ["test_seen"] },
};

Deno.test("model sources and user warm-up data", async (t) => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  const otherTenant = await createTenant(db);
  const worker = testWorker(db, s3.store, trainerRegistry());
  const bucket = s3.env.S3_BUCKET;
  const error = async (jobId: string, tenant = tenantId) =>
    (await getJob(db, { tenantId: tenant, jobId }))?.error ?? "";
  try {
    const dataKey = `tenants/${tenantId}/data/warmup.jsonl`;
    const lines = [
      { prompt: "Your task is to: push the box onto the target", response: "<action>up</action>" },
      {
        prompt: "Your task is to: push the box onto the target",
        response: "<action>left</action>",
      },
      { kind: "analyzer", prompt: "Outcome: success", response: '{"episode_skill": "push up"}' },
    ];
    await s3.store.put(
      dataKey,
      new TextEncoder().encode(lines.map((l) => JSON.stringify(l)).join("\n")),
    );
    const warm = await submit(
      db,
      tenantId,
      tinySpec({
        ...WARMUP_ONLY,
        warmup: { ...WARMUP_ONLY.warmup, data: `s3://${bucket}/${dataKey}` },
      }),
    );

    await t.step("an sft job trains on JSONL warm-up data from the store", async () => {
      assert.equal(await runOne(worker), "succeeded", await error(warm.id));
      const m = (await metricsByStep(db, warm.id)).get(0)!;
      assert.equal(m.warmup_policy_user_samples, 2);
      assert.equal(m.warmup_analyzer_user_samples, 1);
    });

    await t.step(
      "job:<id>@0 starts a job from another job's checkpoint of the same tenant",
      async () => {
        const job = await submit(
          db,
          tenantId,
          tinySpec({
            method: "grpo",
            model: { base: `job:${warm.id}@0` },
            warmup: { skip: true },
            steps: 1,
            eval: { episodes: 1, splits: ["test_seen"] },
          }),
        );
        assert.equal(await runOne(worker), "succeeded", await error(job.id));
        assert.deepEqual(
          await checkpointFile(db, s3.store, job.id, 0, "model.safetensors"),
          await checkpointFile(db, s3.store, warm.id, 0, "model.safetensors"),
        );
      },
    );

    await t.step(
      "model:<id> starts a job from an uploaded model of the same tenant only",
      async () => {
        // The warm job's checkpoint files committed as an uploaded model (what POST /v1/models
        // writes).
        const id = crypto.randomUUID();
        const ck = (await listCheckpoints(db, warm.id))[0];
        const files = [];
        for (const f of ck.files) {
          const bytes = await s3.store.get(f.key);
          const key = `${modelPrefix(tenantId, id)}${f.name}`;
          const put = await s3.store.put(key, bytes);
          files.push({ name: f.name, key, bytes: put.bytes, sha256: put.sha256 });
        }
        await commitModel(db, {
          id,
          tenantId,
          name: null,
          architecture: "LlamaForCausalLM",
          config: {},
          parameterCount: 1,
          files,
          requestSha256: "0".repeat(64),
        });
        const spec = tinySpec({
          method: "grpo",
          model: { base: `model:${id}` },
          warmup: { skip: true },
          steps: 1,
          eval: { episodes: 1, splits: ["test_seen"] },
        });
        const job = await submit(db, tenantId, spec);
        assert.equal(await runOne(worker), "succeeded", await error(job.id));
        assert.deepEqual(
          await checkpointFile(db, s3.store, job.id, 0, "model.safetensors"),
          await checkpointFile(db, s3.store, warm.id, 0, "model.safetensors"),
        );
        const foreign = await submit(db, otherTenant, spec);
        assert.equal(await runOne(worker), "failed");
        assert.match(await error(foreign.id, otherTenant), /must be a model this tenant uploaded/);
      },
    );

    await t.step("another tenant can use neither the job nor the keys", async () => {
      const spec = (extra: Record<string, unknown>) =>
        tinySpec({ ...WARMUP_ONLY, ...extra }) as JobSpecInput;
      const byJob = await submit(db, otherTenant, spec({ model: { base: `job:${warm.id}` } }));
      assert.equal(await runOne(worker), "failed");
      assert.match(await error(byJob.id, otherTenant), /must exist for this tenant/);
      const byKey = await submit(
        db,
        otherTenant,
        spec({ warmup: { ...WARMUP_ONLY.warmup, data: `s3://${bucket}/${dataKey}` } }),
      );
      assert.equal(await runOne(worker), "failed");
      assert.match(await error(byKey.id, otherTenant), /ArtifactAccessError.*tenant/);
      const byBucket = await submit(
        db,
        tenantId,
        spec({ model: { base: "s3://elsewhere/models/x/" } }),
      );
      assert.equal(await runOne(worker), "failed");
      assert.match(await error(byBucket.id), /service bucket/);
    });
  } finally {
    await s3.close();
    await close();
  }
});

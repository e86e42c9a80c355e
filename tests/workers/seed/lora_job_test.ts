import assert from "node:assert/strict";
import { getJob, getSkillLibrary, listCheckpoints } from "../../../jobs/mod.ts";
import { resolveEnvironment } from "../../../workers/envs/mod.ts";
import {
  type HfModel,
  loadHfDirectory,
  type LoraConfig,
  loraParameterSpecs,
  mergeLora,
  parameterSpecs,
  readAdapter,
  readSafetensors,
} from "../../../workers/model/mod.ts";
import { resolveModel } from "../../../workers/seed/run/model_source.ts";
import { derivedSeed, SEED_USE } from "../../../workers/seed/run/seeds.ts";
import type { ArtifactReader } from "../../../workers/worker/handler.ts";
import { metricsByStep, ONE_THREAD, openJobHarness, runOne, tinySpec, untimed } from "./_jobs.ts";

const LORA = { rank: 4, alpha: 8, dropout: 0.1, target_modules: ["q_proj", "v_proj", "up_proj"] };
const LORA_CONFIG: LoraConfig = LORA as LoraConfig;

/** The job's base model (builtin:tiny for sokoban with random_seed 5, as tinySpec has). */
async function tinyBase(): Promise<HfModel> {
  return await resolveModel("builtin:tiny", {
    env: await resolveEnvironment("sokoban"),
    seed: derivedSeed(5, SEED_USE.init),
    artifacts: {} as ArtifactReader, // builtin models read no artifacts
  });
}

Deno.test("LoRA jobs through the worker", async (t) => {
  await using h = await openJobHarness();
  const { db, tenantId, file } = h;
  const base = await tinyBase();
  /** The base with the adapter of `job`'s checkpoint at `step` merged in. */
  const mergedAt = async (job: string, step: number) => {
    const adapter = readAdapter(
      base.config,
      await file(job, step, "adapter_config.json"),
      await file(job, step, "adapter_model.safetensors"),
    );
    return mergeLora(
      base.config,
      new Map([...base.parameters, ...adapter.parameters]),
      adapter.lora,
      parameterSpecs(base.config),
    );
  };
  const uninterrupted = await h.submit(tinySpec({ model: { lora: LORA } }));
  await t.step(
    "a 2-step seed job with model.lora trains only the adapter and checkpoints it in PEFT's format",
    async () => {
      const result = await runOne(
        h.worker(ONE_THREAD),
      );
      const job = await getJob(db, { tenantId, jobId: uninterrupted.id });
      assert.equal(result, "succeeded", job?.error ?? "");
      const last = (await listCheckpoints(db, uninterrupted.id)).at(-1)!;
      assert.equal(last.step, 2);
      assert.deepEqual(
        last.files.map((f) => f.name).sort(),
        [
          "adapter_config.json",
          "adapter_model.safetensors",
          "optimizer.safetensors",
          "tokenizer.json",
          "tokenizer_config.json",
          "trainer_state.json",
        ].filter((n) => n !== "tokenizer_config.json" || last.files.some((f) => f.name === n)),
      );
      const config = JSON.parse(
        new TextDecoder().decode(await file(uninterrupted.id, 2, "adapter_config.json")),
      );
      assert.equal(config.peft_type, "LORA");
      assert.equal(config.r, 4);
      assert.equal(config.base_model_name_or_path, "builtin:tiny");
      const adapterBytes = await file(uninterrupted.id, 2, "adapter_model.safetensors");
      const names = [...readSafetensors(adapterBytes).tensors.keys()];
      assert.ok(names.every((n) => /^base_model\.model\.model\.layers\.\d+\./.test(n)), names[0]);
      assert.equal(names.length, base.config.num_hidden_layers * 3 * 2);
      // The optimizer holds the adapter's tensors only.
      const moments = [
        ...readSafetensors(await file(uninterrupted.id, 2, "optimizer.safetensors")).tensors
          .keys(),
      ];
      const adapterNames = loraParameterSpecs(base.config, LORA_CONFIG).map((s) => s.name);
      assert.deepEqual(
        moments.sort(),
        adapterNames.flatMap((n) => [`${n}.exp_avg`, `${n}.exp_avg_sq`]).sort(),
      );
      // Warm-up and updates moved B off its zero init.
      const adapter = readAdapter(
        base.config,
        await file(uninterrupted.id, 2, "adapter_config.json"),
        adapterBytes,
      );
      assert.ok(
        adapter.parameters.get("model.layers.0.mlp.up_proj.lora_B.weight")!.some((v) => v !== 0),
      );
      const metrics = await metricsByStep(db, uninterrupted.id);
      for (const k of ["pg_loss", "opd_loss", "kl_loss", "entropy", "grad_norm"]) {
        assert.ok(Number.isFinite(metrics.get(2)![k]), k);
      }
      // π_ref is the base (adapter off): once the adapter has moved, the KL term is non-zero.
      assert.ok(metrics.get(1)!.kl_loss > 0, `kl_loss ${metrics.get(1)!.kl_loss}`);
      assert.ok("analyzer_parse_rate" in metrics.get(1)!);
      assert.equal((await getSkillLibrary(db, uninterrupted.id))?.step, 2);
    },
  );

  await t.step(
    "a LoRA job resumed from its step-1 checkpoint repeats the uninterrupted step 2",
    async () => {
      const job = await h.submit(tinySpec({ model: { lora: LORA } }));
      assert.equal(await runOne(h.drainingWorker(1, ONE_THREAD)), "released");
      assert.equal(
        await runOne(h.worker(ONE_THREAD)),
        "succeeded",
        await h.error(job.id),
      );
      const [a, b] = [
        untimed((await metricsByStep(db, job.id)).get(2)!),
        untimed((await metricsByStep(db, uninterrupted.id)).get(2)!),
      ];
      for (const k of ["success_rate", "mean_reward", "tokens_generated", "samples"]) {
        assert.equal(a[k], b[k], k);
      }
      for (const k of ["pg_loss", "kl_loss", "entropy"]) {
        assert.ok(
          Math.abs(a[k] - b[k]) <= 2e-2 * Math.max(1e-3, Math.abs(b[k])),
          `${k}: ${a[k]} vs ${b[k]}`,
        );
      }
      // The resumed run continued from the step-1 adapter: its step-2 adapter is the
      // uninterrupted one (to float rounding), and step 2 moved it.
      const tensorsAt = async (job: string, step: number) =>
        readSafetensors(await file(job, step, "adapter_model.safetensors")).tensors;
      const [resumed2, straight2, straight1] = [
        await tensorsAt(job.id, 2),
        await tensorsAt(uninterrupted.id, 2),
        await tensorsAt(uninterrupted.id, 1),
      ];
      let drift = 0, moved = 0;
      for (const [name, t] of straight2) {
        t.data.forEach((v, i) => {
          drift = Math.max(drift, Math.abs(v - resumed2.get(name)!.data[i]));
          moved = Math.max(moved, Math.abs(v - straight1.get(name)!.data[i]));
        });
      }
      assert.ok(drift < 1e-5 && moved > 1e-4, `drift ${drift}, moved ${moved}`);
      // Step 1 (before the drain) wrote the same adapter as the uninterrupted run's step 1.
      assert.deepEqual(
        await file(job.id, 1, "adapter_model.safetensors"),
        await file(uninterrupted.id, 1, "adapter_model.safetensors"),
      );
    },
  );

  await t.step(
    "job:<id> of a LoRA job continues from its base with the adapter merged in",
    async () => {
      const next = await h.submit(tinySpec({
        model: { base: `job:${uninterrupted.id}` },
        warmup: { skip: true },
        steps: 1,
      }));
      assert.equal(
        await runOne(h.worker(ONE_THREAD)),
        "succeeded",
        await h.error(next.id),
      );
      // With warm-up skipped, the step-0 checkpoint holds the resolved model unchanged.
      const loaded = await loadHfDirectory(async (name) => {
        const ck = (await listCheckpoints(db, next.id)).find((c) => c.step === 0)!;
        return ck.files.some((f) => f.name === name) ? await file(next.id, 0, name) : null;
      });
      const expected = await mergedAt(uninterrupted.id, 2);
      for (const s of parameterSpecs(base.config)) {
        assert.deepEqual(loaded.parameters.get(s.name), expected.get(s.name), s.name);
      }
      assert.notDeepEqual(
        loaded.parameters.get("model.layers.0.self_attn.q_proj.weight"),
        base.parameters.get("model.layers.0.self_attn.q_proj.weight"),
      );
    },
  );

  await t.step(
    "a LoRA job on job:<id> pins that job's checkpoint step in its adapter config",
    async () => {
      const job = await h.submit(tinySpec({
        model: { base: `job:${uninterrupted.id}`, lora: LORA },
        warmup: { skip: true },
        steps: 0,
      }));
      assert.equal(
        await runOne(h.worker(ONE_THREAD)),
        "succeeded",
        await h.error(job.id),
      );
      const config = JSON.parse(
        new TextDecoder().decode(await file(job.id, 0, "adapter_config.json")),
      );
      assert.equal(config.base_model_name_or_path, `job:${uninterrupted.id}@2`);
    },
  );

  await t.step(
    "model.lora.save_merged also writes the merged Hugging Face folder in merged/",
    async () => {
      const job = await h.submit(
        tinySpec({ model: { lora: { ...LORA, save_merged: true } }, steps: 0 }),
      );
      assert.equal(
        await runOne(h.worker(ONE_THREAD)),
        "succeeded",
        await h.error(job.id),
      );
      const names = (await listCheckpoints(db, job.id))[0].files.map((f) => f.name);
      // The adapter folder (with the tokenizer) and the merged folder apart: `from_pretrained` on
      // either finds only its own config.
      for (
        const n of [
          "adapter_config.json",
          "adapter_model.safetensors",
          "tokenizer.json",
          "merged/config.json",
          "merged/model.safetensors",
          "merged/tokenizer.json",
        ]
      ) {
        assert.ok(names.includes(n), n);
      }
      assert.ok(!names.includes("config.json"), names.join());
      assert.ok(!names.includes("model.safetensors"), names.join());
      assert.ok(!names.some((n) => n.startsWith("merged/adapter")), names.join());
      const merged = await loadHfDirectory((name) =>
        names.includes(`merged/${name}`) ? file(job.id, 0, `merged/${name}`) : Promise.resolve(null)
      );
      const expected = await mergedAt(job.id, 0);
      for (const s of parameterSpecs(base.config)) {
        assert.deepEqual(merged.parameters.get(s.name), expected.get(s.name), s.name);
      }
    },
  );
});

import assert from "node:assert/strict";
import { getSkillLibrary, listCheckpoints } from "../../../jobs/mod.ts";
import { eventTypes, metricsByStep, openJobHarness, runOne, tinySpec } from "./_jobs.ts";

Deno.test("grpo jobs through the worker", async (t) => {
  await using h = await openJobHarness();
  const { db } = h;
  const worker = h.worker({});
  await t.step(
    "a 2-step grpo job leaves checkpoints, metrics and events but no analysis",
    async () => {
      const job = await h.submit(tinySpec({ method: "grpo" }));
      assert.equal(await runOne(worker), "succeeded", await h.error(job.id));
      assert.deepEqual((await listCheckpoints(db, job.id)).map((c) => c.step), [0, 1, 2]);
      const metrics = await metricsByStep(db, job.id);
      assert.equal(metrics.get(2)!.opd_loss, 0);
      // No teacher tokens: the means over them are undefined, so left out (not 0).
      for (const k of ["gate_mean", "delta_mean", "teacher_gap_mean"]) {
        assert.ok(!(k in metrics.get(2)!), k);
      }
      assert.equal(metrics.get(2)!.analyzed, 0);
      // No teacher pass and no analyzer replay ran: none of SEED's own work.
      assert.equal(metrics.get(2)!.teacher_pass_seconds, 0);
      assert.ok(!("analyzer_parse_rate" in metrics.get(2)!));
      assert.ok(!("warmup_analyzer_samples" in metrics.get(0)!));
      assert.equal(await getSkillLibrary(db, job.id), null);
      const types = await eventTypes(db, job.id);
      assert.ok(types.includes("step") && types.includes("eval"));
    },
  );

  await t.step(
    "seed with opd_coef 0 and analysis off makes the same update as grpo",
    async () => {
      const common = {
        warmup: { skip: true },
        steps: 1,
        eval_every: 0,
        eval: { episodes: 1, splits: ["test_seen"] },
      };
      const seed = await h.submit(
        tinySpec({ ...common, method: "seed", seed: { opd_coef: 0, analyze: "none" } }),
      );
      const grpo = await h.submit(tinySpec({ ...common, method: "grpo" }));
      assert.equal(await runOne(worker), "succeeded");
      assert.equal(await runOne(worker), "succeeded");
      const weights = (id: string) => h.file(id, 1, "model.safetensors");
      const before = await h.file(seed.id, 0, "model.safetensors");
      const [a, b] = [await weights(seed.id), await weights(grpo.id)];
      assert.notDeepEqual(a, before, "the update changed the parameters");
      assert.deepEqual(a, b);
    },
  );
});

/**
 * A job whose `rollout.engine` names two inference servers (workers/serve, real ports, the job's
 * own database and store), run by the real Worker with its compute process: the key comes from the
 * tenant's secrets, the policy is published and loaded before every step, and each step's metrics
 * are committed once with the engine's counters and log-prob gap.
 */
import assert from "node:assert/strict";
import { createKey, ensureTenant, getJob, putSecret, SecretCipher } from "../../../jobs/mod.ts";
import { startServer } from "../../../workers/serve/main.ts";
import { metricsByStep, openJobHarness, runOne, submit, tinySpec } from "./_jobs.ts";

for (const lora of [false, true]) {
  Deno.test(`a ${lora ? "LoRA" : "full fine-tuning"} job with rollout.engine on two serve endpoints succeeds with the engine's metrics every step`, async () => {
    await using h = await openJobHarness();
    const saved = {
      key: Deno.env.get("SEED_SECRETS_KEY"),
      hosts: Deno.env.get("SEED_ANNOTATOR_ALLOWED_HOSTS"),
    };
    const keyHex = "1e".repeat(32);
    Deno.env.set("SEED_SECRETS_KEY", keyHex);
    Deno.env.set("SEED_ANNOTATOR_ALLOWED_HOSTS", "127.0.0.1");
    const servers = [0, 1].map(() =>
      startServer({ db: h.db, store: h.store, SERVE_PORT: 0, authCacheMs: 0 })
    );
    try {
      const tenant = await ensureTenant(h.db, `e-${crypto.randomUUID()}`);
      const apiKey = (await createKey(h.db, tenant.name)).key;
      await putSecret(h.db, new SecretCipher(keyHex), {
        tenantId: tenant.id,
        name: "serve-key",
        value: apiKey,
      });
      const job = await submit(h.db, tenant.id, {
        ...tinySpec({ method: "grpo", steps: 2, checkpoint_every: 2, eval_every: 0 }),
        ...(lora ? { model: { base: "builtin:tiny", lora: { rank: 4 } } } : {}),
        rollout: {
          tasks_per_step: 2,
          group_size: 2,
          max_new_tokens: 6,
          engine: {
            endpoints: servers.map((s) => ({
              base_url: `http://127.0.0.1:${s.port}`,
              model: "policy",
              api_key_secret: "serve-key",
            })),
            max_in_flight_per_endpoint: 2,
          },
        },
      });
      // the worker's store, recording the keys it writes
      const written: string[] = [];
      const store = new Proxy(h.store, {
        get(target, prop) {
          const value = Reflect.get(target, prop, target);
          if (prop === "put") {
            return (key: string, ...rest: unknown[]) => {
              written.push(key);
              return value.call(target, key, ...rest);
            };
          }
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      const result = await runOne(h.worker({}, { store }));
      const error = (await getJob(h.db, { tenantId: tenant.id, jobId: job.id }))?.error;
      assert.equal(result, "succeeded", String(error));
      const metrics = await metricsByStep(h.db, job.id);
      assert.deepEqual([...metrics.keys()].sort(), [0, 1, 2]); // one row per step
      for (const step of [1, 2]) {
        const m = metrics.get(step)!;
        assert.ok(m["rollout/engine_requests"] > 0, JSON.stringify(m));
        assert.equal(m["rollout/stale_refused"], 0);
        assert.ok(m["rollout/logprob_abs_diff_max"] < 1e-4, JSON.stringify(m));
      }
      // both versions were published under the job's prefix
      const prefix = `tenants/${tenant.id}/jobs/${job.id}/rollout-policy/`;
      const keys = written.filter((k) => k.startsWith(prefix));
      assert.ok(keys.some((k) => k.includes("/v0/")) && keys.some((k) => k.includes("/v1/")));
      // a LoRA job publishes adapters (and its base once); full fine-tuning the weights
      const v1 = keys.filter((k) => k.includes("/v1/")).map((k) => k.split("/").at(-1));
      assert.ok(v1.includes(lora ? "adapter_model.safetensors" : "model.safetensors"), String(v1));
      assert.equal(
        keys.filter((k) => k.includes("/base/") && k.endsWith("/config.json")).length,
        lora ? 1 : 0,
      );
      // and removed when the attempt ended
      assert.deepEqual(await h.store.list(prefix), []);
    } finally {
      for (const s of servers) await s.stop();
      for (
        const [name, value] of [["SEED_SECRETS_KEY", saved.key], [
          "SEED_ANNOTATOR_ALLOWED_HOSTS",
          saved.hosts,
        ]] as const
      ) {
        if (value === undefined) Deno.env.delete(name);
        else Deno.env.set(name, value);
      }
    }
  });
}

/**
 * Jobs whose `rollout.engine` names two `deno task serve` processes (child processes on the job's
 * own database and store, real ports), run by the real Worker with its compute process:
 *
 * - the same job with the local engine gives the same trajectories, metrics and weights (full
 *   fine-tuning and LoRA): our server samples each row from the local decode's stream;
 * - a server killed (SIGKILL) mid-step: its episodes are re-run on the other, the job succeeds,
 *   each step's metrics are committed once and every turn carries its step's policy version;
 * - a server left one update behind: its answers are refused and re-run, counted in
 *   `rollout/stale_refused`, and the job succeeds.
 */
import assert from "node:assert/strict";
import {
  createKey,
  ensureTenant,
  getJob,
  listTrajectoryDumps,
  putSecret,
  readTrajectoryDump,
  SecretCipher,
} from "../../../jobs/mod.ts";
import type { JobSpecInput } from "../../../jobs/spec.ts";
import type { DumpedTrajectory } from "../../../workers/seed/run/trajectory_dump.ts";
import { openTestDatabase } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";
import { type Front, type ServeProcess, spawnServe, startFront } from "./_serve_fleet.ts";
import {
  checkpointFile,
  metricsByStep,
  runOne,
  submit,
  testWorker,
  tinySpec,
  trainerRegistry,
  untimed,
} from "./_jobs.ts";

const KEY_HEX = "2f".repeat(32);

/** The metrics only a remote engine reports. */
const ENGINE_METRICS = /^rollout\/(engine_|stale_|endpoint_|logprob_)/;

/**
 * A test database and store, a tenant whose secret `serve-key` holds its API key, two serve
 * processes on them, and a trainer worker. `close` stops everything it started.
 */
async function openFleet() {
  const saved = {
    key: Deno.env.get("SEED_SECRETS_KEY"),
    hosts: Deno.env.get("SEED_ANNOTATOR_ALLOWED_HOSTS"),
  };
  Deno.env.set("SEED_SECRETS_KEY", KEY_HEX);
  Deno.env.set("SEED_ANNOTATOR_ALLOWED_HOSTS", "127.0.0.1");
  const t = await openTestDatabase();
  const s3 = await startTestStore();
  const servers: ServeProcess[] = [];
  const fronts: Front[] = [];
  const close = async () => {
    for (const f of fronts) await f.close();
    for (const s of servers) await s.stop();
    await s3.close();
    await t.close();
    for (
      const [name, value] of [["SEED_SECRETS_KEY", saved.key], [
        "SEED_ANNOTATOR_ALLOWED_HOSTS",
        saved.hosts,
      ]] as const
    ) {
      if (value === undefined) Deno.env.delete(name);
      else Deno.env.set(name, value);
    }
  };
  try {
    const tenant = await ensureTenant(t.db, `p-${crypto.randomUUID()}`);
    const apiKey = (await createKey(t.db, tenant.name)).key;
    await putSecret(t.db, new SecretCipher(KEY_HEX), {
      tenantId: tenant.id,
      name: "serve-key",
      value: apiKey,
    });
    const env = { DATABASE_URL: t.url, ...s3.env };
    servers.push(...await Promise.all([spawnServe(env), spawnServe(env)]));
    const worker = testWorker(t.db, s3.store, trainerRegistry());
    return {
      db: t.db,
      store: s3.store,
      tenantId: tenant.id,
      servers,
      /** Puts a front before a server; the job then talks to the front. */
      front(f: Front) {
        fronts.push(f);
        return f;
      },
      submit: (spec: JobSpecInput) => submit(t.db, tenant.id, spec),
      /** Runs one queued job; asserts it succeeded. */
      async run(jobId: string) {
        const result = await runOne(worker);
        const error = (await getJob(t.db, { tenantId: tenant.id, jobId }))?.error;
        assert.equal(result, "succeeded", String(error));
      },
      /** The rollout dump of each step, by step. */
      async rollouts(jobId: string) {
        const out = new Map<number, DumpedTrajectory[]>();
        for (const d of await listTrajectoryDumps(t.db, jobId)) {
          if (d.kind !== "rollout") continue;
          const dump = await readTrajectoryDump(s3.store, d) as {
            trajectories: DumpedTrajectory[];
          };
          out.set(d.step, dump.trajectories);
        }
        return out;
      },
      file: (jobId: string, step: number, name: string) =>
        checkpointFile(t.db, s3.store, jobId, step, name),
      [Symbol.asyncDispose]: close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/** The tiny job of these tests; with `urls`, its rollouts run on those endpoints. */
function spec(options: { lora: boolean; steps: number; urls?: string[] }): JobSpecInput {
  return {
    ...tinySpec({
      method: "grpo",
      steps: options.steps,
      checkpoint_every: options.steps,
      eval_every: 0,
    }),
    ...(options.lora ? { model: { base: "builtin:tiny", lora: { rank: 4 } } } : {}),
    rollout: {
      tasks_per_step: 2,
      group_size: 2,
      max_new_tokens: 6,
      temperature: 0.8,
      ...(options.urls
        ? {
          engine: {
            endpoints: options.urls.map((base_url) => ({
              base_url,
              model: "policy",
              api_key_secret: "serve-key",
            })),
            max_in_flight_per_endpoint: 2,
          },
        }
        : {}),
    },
  };
}

/** A rollout dump without the version stamps (which only remote turns carry). */
function unstamped(list: DumpedTrajectory[]) {
  return JSON.parse(JSON.stringify(list, (k, v) => (k === "policy_version" ? undefined : v)));
}

/**
 * Asserts every turn of every step's rollouts came from version step − 1; returns turns by step.
 */
function assertStamped(rollouts: Map<number, DumpedTrajectory[]>): Map<number, number> {
  const turns = new Map<number, number>();
  for (const [step, list] of rollouts) {
    let n = 0;
    for (const t of list) {
      for (const s of t.steps) {
        assert.equal(s.policy_version, step - 1, `step ${step}, ${t.id} turn ${s.turn}`);
        n++;
      }
    }
    turns.set(step, n);
  }
  return turns;
}

for (const lora of [false, true]) {
  Deno.test(`a ${lora ? "LoRA" : "full fine-tuning"} job on two serve processes gives the local engine's trajectories, metrics and weights`, async () => {
    await using f = await openFleet();
    const local = await f.submit(spec({ lora, steps: 2 }));
    const remote = await f.submit(spec({ lora, steps: 2, urls: f.servers.map((s) => s.url) }));
    await f.run(local.id);
    await f.run(remote.id);

    const [a, b] = [await f.rollouts(local.id), await f.rollouts(remote.id)];
    assert.deepEqual([...b.keys()].sort(), [1, 2]);
    for (const step of [1, 2]) {
      assert.deepEqual(
        unstamped(b.get(step)!),
        unstamped(a.get(step)!),
        `rollouts of step ${step}`,
      );
    }
    assert.ok([...assertStamped(b).values()].every((n) => n > 0));

    const [ma, mb] = [await metricsByStep(f.db, local.id), await metricsByStep(f.db, remote.id)];
    assert.deepEqual([...mb.keys()], [...ma.keys()]);
    for (const [step, m] of mb) {
      const own = Object.fromEntries(
        Object.entries(untimed(m)).filter(([k]) => !ENGINE_METRICS.test(k)),
      );
      assert.deepEqual(own, untimed(ma.get(step)!), `metrics of step ${step}`);
      if (step === 0) continue;
      assert.equal(m["rollout/stale_refused"], 0);
      assert.equal(m["rollout/engine_reruns"], 0);
      // the engine sampled at the rollout temperature from θ_old: log-probs agree to rounding
      assert.ok(m["rollout/logprob_abs_diff_max"] < 1e-4, JSON.stringify(m));
    }

    const weights = lora ? "adapter_model.safetensors" : "model.safetensors";
    assert.notDeepEqual(await f.file(local.id, 2, weights), await f.file(local.id, 0, weights));
    assert.deepEqual(await f.file(remote.id, 2, weights), await f.file(local.id, 2, weights));
  });
}

Deno.test("a serve process killed mid-step leaves its episodes to the other: the job succeeds, each step's metrics once, every turn of its step's version", async () => {
  await using f = await openFleet();
  const victim = f.servers[1];
  let seen = 0;
  // the second completion of version 1 (step 2) kills the process before it is forwarded: that
  // request and every other one in flight there fail
  const front = f.front(startFront(() => victim.url, async (path, body) => {
    if (path === "/v1/completions" && body.model === "policy-v1" && ++seen === 2) {
      await victim.kill();
    }
    return undefined;
  }));
  const job = await f.submit(spec({ lora: false, steps: 3, urls: [f.servers[0].url, front.url] }));
  await f.run(job.id);
  assert.ok(seen >= 2, "the kill happened during step 2");

  const metrics = await metricsByStep(f.db, job.id);
  assert.deepEqual([...metrics.keys()].sort(), [0, 1, 2, 3]); // one row per step
  const turns = assertStamped(await f.rollouts(job.id));
  for (const step of [1, 2, 3]) {
    const m = metrics.get(step)!;
    assert.equal(m["rollout/engine_requests"], turns.get(step), `step ${step}: each turn once`);
    assert.equal(m["rollout/stale_refused"], 0);
  }
  assert.equal(metrics.get(2)!["rollout/endpoint_failures"], 1);
  assert.ok(metrics.get(2)!["rollout/engine_reruns"] >= 1);
  assert.equal(metrics.get(1)!["rollout/engine_reruns"], 0);
});

Deno.test("a serve process left one update behind has its answers refused and re-run; the metric counts them and the job succeeds", async () => {
  await using f = await openFleet();
  const behind = f.servers[1];
  // it acknowledges loading version 1 and unloading version 0 but keeps serving version 0, and
  // answers as version 0 (the name it holds)
  const front = f.front(startFront(() => behind.url, (path, body) => {
    const name = String(body.model_name ?? body.lora_name ?? body.model ?? "");
    if (path === "/v1/load_checkpoint" && name === "policy-v1") return new Response("ok");
    if (path === "/v1/unload_lora_adapter" && name === "policy-v0") return new Response("ok");
    if (path === "/v1/completions" && body.model === "policy-v1") {
      return { ...body, model: "policy-v0" };
    }
    return undefined;
  }));
  const job = await f.submit(spec({ lora: false, steps: 2, urls: [f.servers[0].url, front.url] }));
  await f.run(job.id);

  const metrics = await metricsByStep(f.db, job.id);
  assert.deepEqual([...metrics.keys()].sort(), [0, 1, 2]);
  const turns = assertStamped(await f.rollouts(job.id));
  assert.equal(metrics.get(1)!["rollout/stale_refused"], 0);
  const m = metrics.get(2)!;
  assert.ok(m["rollout/stale_refused"] >= 1, JSON.stringify(m));
  assert.ok(m["rollout/engine_reruns"] >= m["rollout/stale_refused"]);
  assert.equal(m["rollout/engine_requests"], turns.get(2)); // refused answers are not counted
  assert.ok(m["rollout/logprob_abs_diff_max"] < 1e-4, "no stale answer reached the update");
});

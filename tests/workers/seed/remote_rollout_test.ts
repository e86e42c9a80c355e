/**
 * Rollouts on remote engines (workers/seed/remote_rollout.ts) against two real inference servers
 * (workers/serve, on real ports over HTTP, on the test database and s3rver): the same tasks as
 * the local decode, the engine's sampling log-probs match the trainer's θ_old, the
 * policy is published and loaded before every step, and an endpoint that fails mid-step leaves
 * the step to the other one.
 */
import assert from "node:assert/strict";
import { createKey, ensureTenant, parseJobSpec } from "../../../jobs/mod.ts";
import type { AsyncEnvironment, PromptInput } from "../../../workers/envs/mod.ts";
import { Tokenizer } from "../../../workers/model/mod.ts";
import { type RolloutTrajectory, SeedTrainer, TextPolicy } from "../../../workers/seed/mod.ts";
import {
  logprobGap,
  RemoteEngineError,
  RemoteRolloutEngine,
} from "../../../workers/seed/remote_rollout.ts";
import { policyPublisher, storeUpload } from "../../../workers/seed/run/publish_policy.ts";
import { type RunningServer, startServer } from "../../../workers/serve/main.ts";
import { openTestDatabase } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";
import { testTrainer, tinySokobanPolicy, tinySpec } from "./_jobs.ts";
import { startFront } from "./_serve_fleet.ts";

const SPEC = parseJobSpec(tinySpec({ method: "grpo", steps: 2 }));

/** Two servers on one database and store, a tenant and its key. */
async function fleet(options: { failing?: () => boolean } = {}) {
  const t = await openTestDatabase();
  const s3 = await startTestStore();
  const tenant = await ensureTenant(t.db, `r-${crypto.randomUUID()}`);
  const key = (await createKey(t.db, tenant.name)).key;
  const servers: RunningServer[] = [0, 1].map((i) =>
    startServer({
      db: t.db,
      store: s3.store,
      SERVE_PORT: 0,
      authCacheMs: 0,
      engine: i === 1 && options.failing
        ? {
          beforeStep: () => {
            if (options.failing!()) throw new Error("endpoint killed");
          },
        }
        : undefined,
    })
  );
  const stopped = new Set<number>();
  return {
    db: t.db,
    store: s3.store,
    tenantId: tenant.id,
    key,
    urls: servers.map((s) => `http://127.0.0.1:${s.port}`),
    async stop(i: number) {
      if (stopped.has(i)) return;
      stopped.add(i);
      await servers[i].stop();
    },
    async close() {
      for (let i = 0; i < servers.length; i++) if (!stopped.has(i)) await servers[i].stop();
      await s3.close();
      await t.close();
    },
  };
}

type Fleet = Awaited<ReturnType<typeof fleet>>;

/** A trainer of builtin:tiny (init seed 1) on sokoban; remote when `f` is given. */
async function trainer(
  f?: Fleet,
  options: {
    urls?: string[];
    env?: (env: AsyncEnvironment) => AsyncEnvironment;
    spec?: typeof SPEC;
  } = {},
) {
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const base = testTrainer(options.spec ?? SPEC, { env: options.env?.(env) ?? env, theta });
  if (!f) return { trainer: base, theta };
  const engine = new RemoteRolloutEngine({
    endpoints: (options.urls ?? f.urls).map((baseUrl) => ({
      baseUrl,
      model: "policy",
      apiKey: f.key,
    })),
    maxInFlight: 2,
    timeoutMs: 60_000,
    allDownRetries: 1,
    retryDelayMs: 10,
    allowedHosts: ["127.0.0.1"],
  });
  const publish = policyPublisher({
    upload: storeUpload(f.store, { tenantId: f.tenantId, jobId: crypto.randomUUID(), attempt: 1 }),
    model: { ...model, parameters: policy.params },
  });
  return { trainer: new SeedTrainer({ ...base.parts, remote: { engine, publish } }), theta };
}

const noStage = () => Promise.resolve();

/** Each trajectory's id and first prompt (its task and initial state). */
function firstPrompts(list: RolloutTrajectory[]) {
  return list.map((t) => [t.id, t.steps[0].prompt]);
}

/**
 * Each trajectory as sampled: every turn's prompt, response text and trained ids, and its rewards.
 */
function sampled(list: RolloutTrajectory[]) {
  return list.map((t) => ({
    id: t.id,
    turns: t.steps.map((s) => [s.prompt, s.response, s.responseIds, s.reward]),
    truncated: t.truncated,
  }));
}

Deno.test("logprobGap compares the tokens both sides know and estimates KL with k3", () => {
  const gap = logprobGap([[-1, -2], null, [-0.5]], [[-1, -2.5, -9], [-3], [-0.5, -1]]);
  assert.ok(gap);
  assert.equal(gap.tokens, 3);
  assert.ok(Math.abs(gap.absMean - 0.5 / 3) < 1e-12);
  assert.equal(gap.absMax, 0.5);
  assert.ok(Math.abs(gap.kl - (Math.expm1(-0.5) + 0.5) / 3) < 1e-12);
  assert.equal(logprobGap([null], [[-1]]), null);
});

Deno.test("rollouts on two serve endpoints sample the local decode's trajectories on the current policy: θ_old matches the engine's log-probs every step", async () => {
  const f = await fleet();
  const local = await trainer();
  const remote = await trainer(f);
  try {
    for (const step of [1, 2]) {
      const a = await local.trainer.step(step, noStage);
      const b = await remote.trainer.step(step, noStage);
      // the same tasks, and row i of each turn drawn from the local decode's stream of row i
      // (sampling_stream): the same responses, turn for turn
      assert.deepEqual(sampled(b.trajectories), sampled(a.trajectories));
      const turns = b.trajectories.reduce((n, t) => n + t.steps.length, 0);
      assert.equal(b.metrics["rollout/engine_requests"], turns); // each turn answered once
      assert.equal(b.metrics["rollout/engine_reruns"], 0);
      assert.equal(b.metrics["rollout/stale_refused"], 0);
      // the engine held the trainer's θ_old: the sampling log-probs agree to float rounding
      assert.ok(b.metrics["rollout/logprob_abs_diff_max"] < 1e-4, JSON.stringify(b.metrics));
      assert.ok(Math.abs(b.metrics["rollout/engine_kl"]) < 1e-6);
      // log-probs come for the leading sampled ids that the trained ids keep (a builtin model
      // trains on its text encoded again, as locally)
      let compared = 0;
      for (const t of b.trajectories) {
        for (const s of t.steps) {
          assert.equal(s.policyVersion, step - 1);
          assert.ok(s.samplingLogprobs!.length <= s.responseIds!.length);
          compared += s.samplingLogprobs!.length;
        }
      }
      assert.ok(compared > turns, `${compared} tokens compared over ${turns} turns`);
    }
  } finally {
    await local.theta.policy.release();
    await remote.theta.policy.release();
    await f.close();
  }
});

Deno.test("an endpoint that fails mid-step leaves its episodes to the other; the step completes", async () => {
  let failing = false;
  const f = await fleet({ failing: () => failing });
  const local = await trainer();
  // the second endpoint starts failing (every request in flight ends in a 500) at turn 2
  const remote = await trainer(f, {
    env: (env) =>
      Object.assign(Object.create(env), {
        buildPrompt: (input: PromptInput) => {
          if (input.turn === 2) failing = true;
          return env.buildPrompt(input);
        },
      }),
  });
  try {
    const a = await local.trainer.step(1, noStage);
    const b = await remote.trainer.step(1, noStage);
    assert.equal(failing, true);
    assert.deepEqual(firstPrompts(b.trajectories), firstPrompts(a.trajectories));
    const turns = b.trajectories.reduce((n, t) => n + t.steps.length, 0);
    assert.equal(b.metrics["rollout/engine_requests"], turns); // nothing counted twice
    assert.equal(b.metrics["rollout/endpoint_failures"], 1);
    assert.ok(b.metrics["rollout/engine_reruns"] >= 1);
    assert.ok(b.metrics["rollout/logprob_abs_diff_max"] < 1e-4);
    // it goes away entirely: the next step loads the policy on the first endpoint only
    await f.stop(1);
    const c = await remote.trainer.step(2, noStage);
    assert.equal(c.metrics["rollout/endpoint_failures"], 0);
    assert.ok(c.trajectories.every((t) => t.steps.every((s) => s.policyVersion === 1)));
  } finally {
    await local.theta.policy.release();
    await remote.theta.policy.release();
    await f.close();
  }
});

Deno.test("with every endpoint gone the rollout fails naming each endpoint", async () => {
  const f = await fleet();
  const remote = await trainer(f);
  try {
    await f.stop(0);
    await f.stop(1);
    const error = await remote.trainer.step(1, noStage).then(() => null, (e) => e);
    assert.ok(error instanceof RemoteEngineError, String(error));
    for (const url of f.urls) assert.match(error.message, new RegExp(url.replace(/\./g, "\\.")));
    assert.deepEqual(error.endpoints, f.urls);
  } finally {
    await remote.theta.policy.release();
    await f.close();
  }
});

Deno.test("cancelling the job aborts the requests in flight", async () => {
  const f = await fleet();
  const controller = new AbortController();
  const remote = await trainer(f, {
    env: (env) =>
      Object.assign(Object.create(env), {
        buildPrompt: (input: PromptInput) => {
          if (input.turn === 2) controller.abort(new Error("cancelled by the user"));
          return env.buildPrompt(input);
        },
      }),
  });
  try {
    const error = await remote.trainer.step(1, noStage, controller.signal).then(
      () => null,
      (e) => e,
    );
    assert.ok(error instanceof Error);
    assert.match(error.message, /cancelled by the user/);
  } finally {
    await remote.theta.policy.release();
    await f.close();
  }
});

Deno.test("at temperature 0.7 the engine's log-probs are θ_old's to rounding, and a server one update behind under the new name shows the gap", async () => {
  const f = await fleet();
  const spec = parseJobSpec(tinySpec({
    method: "grpo",
    steps: 2,
    rollout: { tasks_per_step: 2, group_size: 2, max_new_tokens: 6, temperature: 0.7 },
  }));
  // before server 0: acknowledges version 1 but keeps version 0, and answers version 1's requests
  // from it under version 1's name (a reload that silently did not take: no name reveals it)
  const behind = startFront(
    () => f.urls[0],
    (path, body) => {
      if (path === "/v1/load_checkpoint" && body.model_name === "policy-v1") {
        return new Response("ok");
      }
      if (path === "/v1/unload_lora_adapter" && body.lora_name === "policy-v0") {
        return new Response("ok");
      }
      if (path === "/v1/completions" && body.model === "policy-v1") {
        return { ...body, model: "policy-v0" };
      }
      return undefined;
    },
    (
      path,
      answer,
      asked,
    ) => (path === "/v1/completions" && asked.model === "policy-v1"
      ? { ...answer, model: "policy-v1" }
      : answer),
  );
  const current = await trainer(f, { spec });
  const stale = await trainer(f, { spec, urls: [behind.url] });
  try {
    const first = (await stale.trainer.step(1, noStage)).metrics;
    assert.ok(first["rollout/logprob_abs_diff_max"] < 1e-4); // version 0 is what it holds
    const second = (await stale.trainer.step(2, noStage)).metrics;
    assert.equal(second["rollout/stale_refused"], 0);
    assert.ok(second["rollout/logprob_abs_diff_mean"] > 1e-3, JSON.stringify(second));
    assert.ok(second["rollout/engine_kl"] > 1e-6, JSON.stringify(second));
    for (const step of [1, 2]) {
      const m = (await current.trainer.step(step, noStage)).metrics;
      assert.ok(m["rollout/logprob_abs_diff_max"] < 1e-4, JSON.stringify(m));
      assert.ok(Math.abs(m["rollout/engine_kl"]) < 1e-8);
    }
  } finally {
    await current.theta.policy.release();
    await stale.theta.policy.release();
    await behind.close();
    await f.close();
  }
});

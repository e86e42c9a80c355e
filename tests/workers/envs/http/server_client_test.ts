import assert from "node:assert/strict";
import {
  connectHttpEnvironment,
  EnvHttpError,
  EnvOptionsError,
  getEnvironment,
  listEnvironments,
  serveEnvironments,
  toAsyncEnvironment,
} from "../../../../workers/envs/mod.ts";
import type { AsyncEnvironment, AsyncExpert, Task } from "../../../../workers/envs/mod.ts";

const sokoban = getEnvironment("sokoban");
const household = getEnvironment("household");

/** Plays `actions` on `task`; returns every observation and step result as plain JSON. */
async function play(env: AsyncEnvironment, task: Task, actions: string[]): Promise<unknown[]> {
  const episode = env.createEpisode(task);
  const out: unknown[] = [await episode.reset()];
  for (const a of actions) out.push(await episode.step(a));
  await episode.close();
  return out;
}

Deno.test("an HTTP environment gives the same tasks and trajectory as the in-process one", async () => {
  const server = await serveEnvironments([sokoban, household]);
  try {
    const local = toAsyncEnvironment(sokoban);
    const remote = await connectHttpEnvironment(`${server.url}/envs/sokoban`);
    assert.equal(remote.id, "sokoban");
    assert.equal(remote.defaultMaxTurns, sokoban.defaultMaxTurns);
    assert.deepEqual(remote.optionsJsonSchema, local.optionsJsonSchema);
    const options = { size: 7, boxes: 2 };
    const tasks = await remote.sampleTasks("test_unseen", 3, 99, options);
    assert.deepEqual(tasks, await local.sampleTasks("test_unseen", 3, 99, options));
    const actions = ["up", "<garbage>", "left", "down", "right", "right", "jump", "up"];
    for (const task of tasks) {
      const played = await play(remote, task, actions);
      assert.deepEqual(played, await play(local, task, actions));
      // The step's feedback (the analyzer's Effect line) crosses the wire.
      assert.match((played[1] as { feedback: string }).feedback, /^walked up|^pushed/);
    }
    const expert = remote.createExpert(tasks[0]);
    const localExpert = local.createExpert(tasks[0]);
    const obs = await local.createEpisode(tasks[0]).reset();
    assert.equal(await expert.act(obs), await localExpert.act(obs));
    await expert.close();
    const input = { task: tasks[0], history: [], observation: obs, historyLength: 2, turn: 1 };
    assert.equal(await remote.buildPrompt(input), await local.buildPrompt(input));
    assert.equal(await remote.parseAction("<think>x</think><action> Left"), "left");
    const trajectory = {
      task: tasks[0],
      won: false,
      score: -0.2,
      steps: ["left", "left"].map((a) => ({
        observation: "",
        response: a,
        action: a,
        valid: true,
        reward: -0.1,
      })),
    };
    assert.deepEqual(
      await remote.referenceAnalysis(trajectory),
      await local.referenceAnalysis(trajectory),
    );
    assert.deepEqual(await remote.vocabulary(), await local.vocabulary());
  } finally {
    await server.close();
  }
});

Deno.test("a server with one environment also serves it at the root", async () => {
  const server = await serveEnvironments([household]);
  try {
    const remote = await connectHttpEnvironment(server.url);
    assert.equal(remote.id, "household");
    const [task] = await remote.sampleTasks("train", 1, 5);
    const local = toAsyncEnvironment(household);
    const expert = local.createExpert(task);
    const localEp = local.createEpisode(task);
    const remoteEp = remote.createEpisode(task);
    let obs = await localEp.reset();
    assert.deepEqual(await remoteEp.reset(), obs);
    for (let i = 0; i < 5; i++) {
      const a = await expert.act(obs);
      const l = await localEp.step(a);
      assert.deepEqual(await remoteEp.step(a), l);
      obs = l.observation;
      if (l.done) break;
    }
    await remoteEp.close();
  } finally {
    await server.close();
  }
});

Deno.test("bad options come back as EnvOptionsError and bad bodies as 4xx problems, never retried", async () => {
  const server = await serveEnvironments([sokoban]);
  let calls = 0;
  const countingFetch: typeof fetch = (input, init) => {
    calls++;
    return fetch(input, init);
  };
  try {
    const remote = await connectHttpEnvironment(server.url, { fetch: countingFetch });
    calls = 0;
    await assert.rejects(() => remote.sampleTasks("train", 1, 0, { size: 3 }), (e: unknown) => {
      assert.ok(e instanceof EnvOptionsError);
      assert.deepEqual(e.issues[0].path, ["size"]);
      return true;
    });
    assert.equal(calls, 1);
    const res = await fetch(`${server.url}/v1/tasks`, {
      method: "POST",
      body: JSON.stringify({ split: "nope", count: 1, seed: 0 }),
    });
    assert.equal(res.status, 400);
    assert.equal(res.headers.get("content-type"), "application/problem+json");
    const problem = await res.json();
    assert.equal(problem.errors[0].path, "split");
    const missing = await fetch(`${server.url}/v1/episodes/nope/step`, {
      method: "POST",
      body: JSON.stringify({ action: "up" }),
    });
    assert.equal(missing.status, 404);
    await missing.body?.cancel();
    const [task] = await remote.sampleTasks("train", 1, 0);
    await assert.rejects(
      () => remote.createEpisode({ ...task, envId: "household" }).reset(),
      (e: unknown) => e instanceof EnvHttpError && e.status === 400,
    );
  } finally {
    await server.close();
  }
});

Deno.test("a retried step with the previous seq is answered from the cache, not applied twice", async () => {
  const server = await serveEnvironments([sokoban]);
  try {
    const [task] = sokoban.sampleTasks("train", 1, 8);
    const created = await (await fetch(`${server.url}/v1/episodes`, {
      method: "POST",
      body: JSON.stringify({ task }),
    })).json();
    const step = async (seq: number) =>
      await fetch(`${server.url}/v1/episodes/${created.episode_id}/step`, {
        method: "POST",
        body: JSON.stringify({ action: "up", seq }),
      });
    const first = await (await step(0)).json();
    const again = await (await step(0)).json();
    assert.deepEqual(again, first);
    const skipped = await step(5);
    assert.equal(skipped.status, 409);
    await skipped.body?.cancel();
    const second = await (await step(1)).json();
    assert.equal(second.info.turn, 2);
  } finally {
    await server.close();
  }
});

Deno.test("a step answer whose feedback breaks the protocol fails once, naming feedback", async () => {
  // A hostile or careless environment server: the real sokoban server, its step answers rewritten.
  let feedback: unknown = undefined;
  let steps = 0;
  const rewriting: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (!String(input).endsWith("/step")) return res;
    steps++;
    const body = await res.json();
    return Response.json({ ...body, feedback }, { status: res.status });
  };
  const server = await serveEnvironments([sokoban]);
  try {
    const remote = await connectHttpEnvironment(server.url, { fetch: rewriting, backoffMs: 1 });
    const [task] = await remote.sampleTasks("train", 1, 3);
    const cases: [unknown, RegExp][] = [
      [42, /expected string, received number\n\s+→ at feedback/],
      [{ text: "pushed" }, /expected string, received object\n\s+→ at feedback/],
      ["x".repeat(2001), /<=2000 characters\n\s+→ at feedback/],
    ];
    for (const [value, message] of cases) {
      feedback = value;
      steps = 0;
      const episode = remote.createEpisode(task);
      await episode.reset();
      await assert.rejects(() => episode.step("up"), (e: unknown) => {
        assert.ok(e instanceof EnvHttpError);
        assert.match(e.message, /step as it must match the protocol/);
        assert.match(e.message, message);
        return true;
      });
      assert.equal(steps, 1, "a malformed answer is not retried");
      await episode.close();
    }
    // HTML or newlines are just text: kept as given (the analyzer prompt and viewer show text).
    feedback = "<script>x</script>\nOutcome: success";
    const episode = remote.createEpisode(task);
    await episode.reset();
    assert.equal((await episode.step("up")).feedback, feedback);
    await episode.close();
  } finally {
    await server.close();
  }
});

Deno.test("connection errors and 5xx answers are retried with backoff, then reported", async () => {
  let calls = 0;
  const flaky: typeof fetch = (input, init) => {
    calls++;
    if (calls <= 2) return Promise.reject(new TypeError("connection refused"));
    if (calls === 3) return Promise.resolve(new Response("boom", { status: 503 }));
    return fetch(input, init);
  };
  const server = await serveEnvironments([sokoban]);
  try {
    const remote = await connectHttpEnvironment(server.url, { fetch: flaky, backoffMs: 1 });
    assert.equal(remote.id, "sokoban");
    assert.equal(calls, 4);
  } finally {
    await server.close();
  }
  const down: typeof fetch = () => Promise.reject(new TypeError("connection refused"));
  await assert.rejects(
    () => connectHttpEnvironment("http://127.0.0.1:9/", { fetch: down, retries: 2, backoffMs: 1 }),
    (e: unknown) => e instanceof EnvHttpError && e.status === 0,
  );
});

Deno.test("a request that gets no answer within timeoutMs fails with status 0", async () => {
  const { promise: released, resolve: release } = Promise.withResolvers<void>();
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, async () => {
    await released;
    return new Response("late");
  });
  try {
    await assert.rejects(
      () =>
        connectHttpEnvironment(`http://127.0.0.1:${server.addr.port}`, {
          timeoutMs: 50,
          retries: 0,
        }),
      (e: unknown) =>
        e instanceof EnvHttpError && e.status === 0 &&
        /TimeoutError|timed out|signal/i.test(e.message),
    );
  } finally {
    release();
    await server.shutdown();
  }
});

Deno.test("every built-in environment plays an expert episode identically over HTTP", async () => {
  const server = await serveEnvironments(listEnvironments());
  try {
    for (const env of listEnvironments()) {
      const local = toAsyncEnvironment(env);
      const remote = await connectHttpEnvironment(`${server.url}/envs/${env.id}`);
      for (const task of await remote.sampleTasks("test_seen", 2, 17)) {
        const expert = local.createExpert(task);
        const remoteExpert = remote.createExpert(task);
        const localEp = local.createEpisode(task);
        const remoteEp = remote.createEpisode(task);
        let obs = await localEp.reset();
        assert.deepEqual(await remoteEp.reset(), obs);
        let won = false;
        for (let turn = 1; turn <= env.defaultMaxTurns && !won; turn++) {
          const a = await expert.act(obs);
          assert.equal(await remoteExpert.act(obs), a);
          const l = await localEp.step(a);
          assert.deepEqual(await remoteEp.step(a), l);
          obs = l.observation;
          won = l.won;
          if (l.done) break;
        }
        assert.ok(won, `${env.id}: expert did not win ${task.id} over HTTP`);
        await remoteEp.close();
        await remoteExpert.close();
      }
    }
  } finally {
    await server.close();
  }
});

/**
 * Plays `expert` on a fresh episode of `task` to the end; every action taken, and whether it won.
 */
async function playExpert(
  env: AsyncEnvironment,
  task: Task,
  expert: AsyncExpert,
  maxTurns: number,
): Promise<{ actions: string[]; won: boolean }> {
  const episode = env.createEpisode(task);
  let observation = await episode.reset();
  const actions: string[] = [];
  let won = false;
  for (let turn = 1; turn <= maxTurns; turn++) {
    const action = await expert.act(observation);
    actions.push(action);
    const r = await episode.step(action);
    observation = r.observation;
    won = r.won;
    if (r.done) break;
  }
  await Promise.all([episode.close(), expert.close()]);
  return { actions, won };
}

Deno.test("household's skilled demonstration over HTTP has the local skill and actions, and wins", async () => {
  const server = await serveEnvironments([household]);
  try {
    const info = await (await fetch(`${server.url}/v1/info`)).json();
    assert.equal(info.skilled_demonstration, true);
    const remote = await connectHttpEnvironment(server.url);
    assert.ok(remote.skilledDemonstration, "the server advertises skilled_demonstration");
    const local = toAsyncEnvironment(household);
    // With the searching expert as the ordinary one, the skilled expert (which searches the goal
    // object's usual places first) acts differently where they come late in the room's order, so a
    // plain expert behind the id would fail.
    const tasks = await remote.sampleTasks("train", 4, 11, { expert: "search" });
    let differs = 0;
    for (const task of tasks) {
      const remoteDemo = await remote.skilledDemonstration(task);
      const localDemo = await local.skilledDemonstration!(task);
      assert.equal(remoteDemo.skill, localDemo.skill);
      assert.match(remoteDemo.skill, /that is where it usually is/);
      const turns = household.defaultMaxTurns;
      const played = await playExpert(remote, task, remoteDemo.expert, turns);
      assert.deepEqual(played, await playExpert(local, task, localDemo.expert, turns));
      assert.ok(played.won, `the skilled expert wins ${task.id} over HTTP`);
      // Closed (its server expert deleted), it opens a fresh one on the next act.
      const first = await local.createEpisode(task).reset();
      assert.equal(await remoteDemo.expert.act(first), played.actions[0]);
      await remoteDemo.expert.close();
      const ordinary = await playExpert(local, task, local.createExpert(task), turns);
      if (ordinary.actions.join("\n") !== played.actions.join("\n")) differs++;
    }
    assert.ok(differs > 0, "some skilled demonstration acts unlike the ordinary expert");
    // The demonstration's expert is an ordinary expert id: closed, it is gone.
    const created = await fetch(`${server.url}/v1/skilled-demonstrations`, {
      method: "POST",
      body: JSON.stringify({ task: tasks[0] }),
    });
    assert.equal(created.status, 201);
    const { expert_id: id } = await created.json();
    assert.equal((await fetch(`${server.url}/v1/experts/${id}`, { method: "DELETE" })).status, 204);
    const gone = await fetch(`${server.url}/v1/experts/${id}/act`, {
      method: "POST",
      body: JSON.stringify({ observation: { text: "x" } }),
    });
    assert.equal(gone.status, 404);
    await gone.body?.cancel();
    // Bad tasks are 4xx naming the field, never retried.
    const bad = await fetch(`${server.url}/v1/skilled-demonstrations`, {
      method: "POST",
      body: JSON.stringify({ task: { ...tasks[0], seed: -1 } }),
    });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).errors[0].path, "task.seed");
    const [sokobanTask] = sokoban.sampleTasks("train", 1, 0);
    await assert.rejects(
      () => remote.skilledDemonstration!(sokobanTask),
      (e: unknown) => e instanceof EnvHttpError && e.status === 400 && /envId/.test(e.message),
    );
  } finally {
    await server.close();
  }
});

Deno.test("a served environment without skilled demonstrations does not advertise them", async () => {
  const server = await serveEnvironments([sokoban]);
  try {
    const info = await (await fetch(`${server.url}/v1/info`)).json();
    assert.equal(info.skilled_demonstration, false);
    const remote = await connectHttpEnvironment(server.url);
    assert.equal(remote.skilledDemonstration, undefined);
    const [task] = sokoban.sampleTasks("train", 1, 0);
    const r = await fetch(`${server.url}/v1/skilled-demonstrations`, {
      method: "POST",
      body: JSON.stringify({ task }),
    });
    assert.equal(r.status, 404);
    await r.body?.cancel();
  } finally {
    await server.close();
  }
});

Deno.test("a create retried after its answer was lost gets the same episode or expert, leaving none behind", async () => {
  // One live episode and one live expert at most: a create whose lost first answer left an
  // orphan behind would make its own retry a 429, and every later create too.
  const server = await serveEnvironments([household], { maxLive: 1 });
  const lost: string[] = [];
  // The real request reaches the real server, which creates and answers; the answer is dropped
  // on the way back, once per create path, as a reset connection drops it.
  const lossy: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const path = new URL(String(input)).pathname;
    const creates = ["/v1/episodes", "/v1/experts", "/v1/skilled-demonstrations"];
    if (init?.method === "POST" && creates.includes(path) && !lost.includes(path)) {
      lost.push(path);
      await res.body?.cancel();
      throw new TypeError("connection reset by peer");
    }
    return res;
  };
  try {
    const remote = await connectHttpEnvironment(server.url, { fetch: lossy, backoffMs: 1 });
    const local = toAsyncEnvironment(household);
    const [task] = await remote.sampleTasks("train", 1, 5, {});
    const first = await local.createEpisode(task).reset();

    const episode = remote.createEpisode(task);
    assert.deepEqual(await episode.reset(), first);
    await episode.close();
    const expert = remote.createExpert(task);
    assert.equal(await expert.act(first), await local.createExpert(task).act(first));
    await expert.close();
    const demo = await remote.skilledDemonstration!(task);
    const localDemo = await local.skilledDemonstration!(task);
    assert.equal(demo.skill, localDemo.skill);
    assert.equal(await demo.expert.act(first), await localDemo.expert.act(first));
    await demo.expert.close();
    assert.deepEqual(lost.sort(), ["/v1/episodes", "/v1/experts", "/v1/skilled-demonstrations"]);

    // Closed, each freed the one place: nothing was left behind to hold it.
    const again = await remote.skilledDemonstration!(task);
    const localAgain = await local.skilledDemonstration!(task);
    assert.equal(await again.expert.act(first), await localAgain.expert.act(first));
    await again.expert.close();
    const episode2 = remote.createEpisode(task);
    await episode2.reset();
    await episode2.close();
  } finally {
    await server.close();
  }
});

Deno.test("a create that repeats a live create's request_id is answered as the first, one that repeats a deleted create's is a 410, and a new one is neither", async () => {
  const server = await serveEnvironments([household]);
  try {
    const [task] = household.sampleTasks("train", 1, 5);
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${server.url}${path}`, {
        method: "POST",
        body: JSON.stringify(body),
      });
      assert.equal(res.status, 201);
      return await res.json();
    };
    const a = await post("/v1/skilled-demonstrations", { task, request_id: "r1" });
    const b = await post("/v1/skilled-demonstrations", { task, request_id: "r1" });
    assert.deepEqual(b, a);
    // Another create, another id; the same request id on another route is another request.
    const c = await post("/v1/skilled-demonstrations", { task, request_id: "r2" });
    assert.notEqual(c.expert_id, a.expert_id);
    const d = await post("/v1/experts", { task, request_id: "r1" });
    assert.notEqual(d.expert_id, a.expert_id);
    // Deleted, its request id stays used: a late duplicate is a 410 naming request_id and the
    // expert, and makes nothing (one more expert would be one nobody drives or deletes).
    const deleted = await fetch(`${server.url}/v1/experts/${a.expert_id}`, { method: "DELETE" });
    assert.equal(deleted.status, 204);
    const late = await fetch(`${server.url}/v1/skilled-demonstrations`, {
      method: "POST",
      body: JSON.stringify({ task, request_id: "r1" }),
    });
    assert.equal(late.status, 410);
    const problem = await late.json();
    assert.equal(
      problem.detail,
      `Cannot create expert as request_id must be new: expert ${a.expert_id} was created for it and is gone (deleted or idled out); send a new request_id for a new expert`,
    );
    assert.deepEqual(problem.errors.map((e: { path: string }) => e.path), ["request_id"]);
    // A new request id makes a new expert.
    const e = await post("/v1/skilled-demonstrations", { task, request_id: "r3" });
    assert.notEqual(e.expert_id, a.expert_id);
    for (const id of [c.expert_id, d.expert_id, e.expert_id]) {
      await (await fetch(`${server.url}/v1/experts/${id}`, { method: "DELETE" })).body?.cancel();
    }
  } finally {
    await server.close();
  }
});

Deno.test("a late duplicate of a create whose item idled out is a 410 even before anything swept it", async () => {
  const server = await serveEnvironments([household], { idleMs: 50 });
  try {
    const [task] = household.sampleTasks("train", 1, 5);
    const create = () =>
      fetch(`${server.url}/v1/experts`, {
        method: "POST",
        body: JSON.stringify({ task, request_id: "r1" }),
      });
    const first = await create();
    assert.equal(first.status, 201);
    const { expert_id } = await first.json();
    // Idle for longer than idleMs; no other create ran, so nothing has swept it yet.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const late = await create();
    assert.equal(late.status, 410);
    const problem = await late.json();
    assert.match(problem.detail, new RegExp(`expert ${expert_id} was created for it and is gone`));
    // The idled-out expert is gone, not revived by the duplicate.
    const act = await fetch(`${server.url}/v1/experts/${expert_id}/act`, {
      method: "POST",
      body: JSON.stringify({ observation: "" }),
    });
    assert.equal(act.status, 404);
    await act.body?.cancel();
  } finally {
    await server.close();
  }
});

Deno.test("a create that reuses a live create's request_id for another task is refused with a 409 naming request_id", async () => {
  const server = await serveEnvironments([household]);
  try {
    const [task, other] = household.sampleTasks("train", 2, 5);
    const post = (path: string, body: unknown) =>
      fetch(`${server.url}${path}`, { method: "POST", body: JSON.stringify(body) });
    const first = await post("/v1/episodes", { task, request_id: "r1" });
    assert.equal(first.status, 201);
    const { episode_id } = await first.json();
    // Answering the first episode would hand this caller one playing a task it did not ask for.
    const reused = await post("/v1/episodes", { task: other, request_id: "r1" });
    assert.equal(reused.status, 409);
    const problem = await reused.json();
    assert.match(problem.detail, /request_id/);
    assert.deepEqual(problem.errors.map((e: { path: string }) => e.path), ["request_id"]);
    // The first episode's own retry still gets it.
    const retry = await post("/v1/episodes", { task, request_id: "r1" });
    assert.equal(retry.status, 201);
    assert.equal((await retry.json()).episode_id, episode_id);
    // A request_id that is not a string of 1 to 100 characters is a 400 naming it.
    for (const request_id of [7, "", "x".repeat(101)]) {
      const bad = await post("/v1/experts", { task, request_id });
      assert.equal(bad.status, 400);
      assert.equal((await bad.json()).errors[0].path, "request_id");
    }
    await (await fetch(`${server.url}/v1/episodes/${episode_id}`, { method: "DELETE" })).body
      ?.cancel();
  } finally {
    await server.close();
  }
});

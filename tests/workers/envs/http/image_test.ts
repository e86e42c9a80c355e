import assert from "node:assert/strict";
import {
  connectHttpEnvironment,
  createEnvApp,
  getEnvironment,
  IMAGE_PLACEHOLDER,
  MAX_IMAGE_BYTES,
  serveEnvironments,
  toAsyncEnvironment,
} from "../../../../workers/envs/mod.ts";
import type { AsyncEnvironment, Observation, Task } from "../../../../workers/envs/mod.ts";
import {
  observationFromWire,
  observationToWire,
  WireObservationSchema,
} from "../../../../workers/envs/http/protocol.ts";

const sokoban = getEnvironment("sokoban");
const ezpoints = getEnvironment("ezpoints");

/**
 * Plays the local expert on `task` both locally and remotely; asserts equal steps; returns them.
 */
async function playBoth(local: AsyncEnvironment, remote: AsyncEnvironment, task: Task) {
  const expert = local.createExpert(task);
  const remoteExpert = remote.createExpert(task);
  const localEp = local.createEpisode(task);
  const remoteEp = remote.createEpisode(task);
  let obs: Observation = await localEp.reset();
  const remoteFirst = await remoteEp.reset();
  assert.ok(remoteFirst.image?.rgb instanceof Uint8Array, "the remote reset carries the image");
  assert.deepEqual(remoteFirst, obs);
  let won = false;
  for (let turn = 1; turn <= 20 && !won; turn++) {
    const action = await expert.act(obs);
    assert.equal(await remoteExpert.act(obs), action, "the remote expert reads the same image obs");
    const l = await localEp.step(action);
    const r = await remoteEp.step(action);
    assert.deepEqual(r, l);
    assert.deepEqual(r.observation.image!.rgb, l.observation.image!.rgb);
    obs = l.observation;
    won = l.won;
    if (l.done) break;
  }
  await Promise.all([remoteEp.close(), remoteExpert.close(), localEp.close(), expert.close()]);
  return { won, last: obs };
}

Deno.test("image observations cross HTTP byte for byte, so a remote vision env equals the local one", async () => {
  const server = await serveEnvironments([sokoban, ezpoints]);
  try {
    for (const [env, options] of [[sokoban, { render: "image" }], [ezpoints, {}]] as const) {
      const local = toAsyncEnvironment(env);
      const remote = await connectHttpEnvironment(`${server.url}/envs/${env.id}`);
      const tasks = await remote.sampleTasks("test_unseen", 2, 5, options);
      assert.deepEqual(tasks, await local.sampleTasks("test_unseen", 2, 5, options));
      for (const task of tasks) {
        const { won, last } = await playBoth(local, remote, task);
        assert.ok(won, `${task.id} not won`);
        const input = { task, history: [], observation: last, historyLength: 2, turn: 1 };
        const prompt = await remote.buildPrompt(input);
        assert.equal(prompt, await local.buildPrompt(input));
        assert.ok(prompt.includes(IMAGE_PLACEHOLDER));
      }
      assert.deepEqual(await remote.vocabulary(), await local.vocabulary());
    }
  } finally {
    await server.close();
  }
});

Deno.test("the wire image decodes to the same bytes and must hold exactly width x height x 3 bytes", () => {
  const rgb = new Uint8Array(2 * 3 * 3).map((_, i) => (i * 37) % 256);
  const obs: Observation = { text: "t", image: { width: 2, height: 3, rgb } };
  const wire = observationToWire(obs);
  assert.equal(wire.image!.rgb_base64, btoa(String.fromCharCode(...rgb)));
  assert.deepEqual(observationFromWire(WireObservationSchema.parse(wire)), obs);
  const short = { ...wire, image: { ...wire.image!, height: 4 } };
  const issue = WireObservationSchema.safeParse(short).error!.issues[0];
  assert.deepEqual(issue.path, ["image", "rgb_base64"]);
  assert.match(issue.message, /must encode width \* height \* 3 = 24 bytes/);
  const garbage = { ...wire, image: { ...wire.image!, rgb_base64: "!".repeat(24) } };
  assert.equal(WireObservationSchema.safeParse(garbage).success, false);
  const side = Math.ceil(Math.sqrt(MAX_IMAGE_BYTES / 3)) + 1; // just over the byte limit
  const huge = { text: "t", image: { width: side, height: side, rgb_base64: "" } };
  const hugeIssue = WireObservationSchema.safeParse(huge).error!.issues[0];
  assert.deepEqual(hugeIssue.path, ["image", "width"]);
});

Deno.test("the server answers 400 with the field path for an observation image of the wrong size", async () => {
  const app = createEnvApp([ezpoints]);
  const [task] = ezpoints.sampleTasks("train", 1, 0);
  const obs = ezpoints.createEpisode(task).reset();
  const wire = observationToWire(obs);
  wire.image!.width += 1;
  const res = await app.request("/envs/ezpoints/v1/prompt", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      input: { task, history: [], observation: wire, historyLength: 0, turn: 1 },
    }),
  });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(body.errors[0].path, "input.observation.image.rgb_base64");
});

Deno.test("a padded base64 text of the right length is refused, as it decodes to too few bytes", async () => {
  // 2 x 1 pixels are 6 bytes, 8 base64 characters; "AAAAAA==" has 8 characters but is 4 bytes.
  const padded = { text: "t", image: { width: 2, height: 1, rgb_base64: "AAAAAA==" } };
  assert.equal(atob(padded.image.rgb_base64).length, 4);
  const issue = WireObservationSchema.safeParse(padded).error!.issues[0];
  assert.deepEqual(issue.path, ["image", "rgb_base64"]);
  assert.match(issue.message, /6 bytes in 8 characters without padding.*with padding/);
  const exact = { text: "t", image: { width: 2, height: 1, rgb_base64: "AAAAAAAA" } };
  assert.equal(observationFromWire(WireObservationSchema.parse(exact)).image!.rgb.length, 6);

  const app = createEnvApp([ezpoints]);
  const [task] = ezpoints.sampleTasks("train", 1, 0);
  const res = await app.request("/envs/ezpoints/v1/prompt", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      input: { task, history: [], observation: padded, historyLength: 0, turn: 1 },
    }),
  });
  assert.equal(res.status, 400);
  assert.equal((await res.json()).errors[0].path, "input.observation.image.rgb_base64");
});

Deno.test("an expert handed an observation its env cannot show answers 400 at observation.text, not 500", async () => {
  const app = createEnvApp([sokoban, ezpoints]);
  const post = (path: string, body: unknown) =>
    app.request(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  for (const env of [sokoban, ezpoints]) {
    const [task] = env.sampleTasks("train", 1, 0);
    const { expert_id } = await (await post(`/envs/${env.id}/v1/experts`, { task })).json();
    for (const text of ["garbage", "# # #\n# P #\n# X O"]) {
      const res = await post(`/envs/${env.id}/v1/experts/${expert_id}/act`, {
        observation: { text },
      });
      assert.equal(res.status, 400, `${env.id}: ${text}`);
      assert.equal((await res.json()).errors[0].path, "observation.text");
    }
  }
});

/**
 * `deno task api` as a user starts it: the task's own command line (deno.json) over a fresh data
 * folder (embedded PGlite and embedded S3 server), read until it listens; and its stop.
 */
import assert from "node:assert/strict";
import { serveApi } from "../../api/main.ts";
import { startApiFixture } from "./_fixture.ts";

const repoRoot = new URL("../../", import.meta.url);

Deno.test("deno task api runs with --unstable-no-legacy-abort, as deno task serve does, and starts without Deno's legacy request-abort warning", async () => {
  const tasks = JSON.parse(await Deno.readTextFile(new URL("deno.json", repoRoot))).tasks;
  const args: string[] = tasks.api.split(/\s+/);
  assert.equal(args[0], "deno");
  assert.ok(args.includes("--unstable-no-legacy-abort"), tasks.api);
  assert.ok(tasks.serve.split(/\s+/).includes("--unstable-no-legacy-abort"), tasks.serve);
  // Without the flag, the embedded store's node:http server (s3rver) reads request.signal and
  // Deno prints its legacy-behaviour warning on the API's first lines.
  const dataDir = await Deno.makeTempDir({ prefix: "seed-data-" });
  const child = new Deno.Command(Deno.execPath(), {
    args: args.slice(1),
    cwd: repoRoot,
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "",
      HOME: Deno.env.get("HOME") ?? "",
      SEED_DATA_DIR: dataDir,
      PORT: "0",
    },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  try {
    const stderr = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "";
    while (!lines.some((l) => l.includes("api listening"))) {
      const { value, done } = await stderr.read();
      if (done) break;
      buffered += value;
      const parts = buffered.split("\n");
      buffered = parts.pop()!;
      lines.push(...parts);
    }
    stderr.releaseLock();
    assert.ok(lines.some((l) => l.includes("api listening")), lines.join("\n"));
    assert.deepEqual(lines.filter((l) => /legacy behavior|legacy-abort/.test(l)), []);
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await child.stderr.cancel().catch(() => {});
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test({
  name: "a stopping API does not wait forever for an open event stream",
  async fn() {
    const fx = await startApiFixture();
    const serverEnv = { ...fx.s3Env, DATABASE_URL: fx.url, SEED_SECRETS_KEY: "5a".repeat(32) };
    for (const [k, v] of Object.entries(serverEnv)) Deno.env.set(k, v);
    const api = await serveApi({ port: 0 });
    const base = `http://127.0.0.1:${api.port}`;
    const auth = { authorization: `Bearer ${fx.keyA}` };
    try {
      const submitted = await fetch(`${base}/v1/jobs`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ env: { id: "sokoban" } }),
      });
      assert.equal(submitted.status, 201);
      const { id } = await submitted.json();
      // A queued job with no worker: its event stream stays open until the server ends it.
      const events = await fetch(`${base}/v1/jobs/${id}/events`, {
        headers: { ...auth, accept: "text/event-stream" },
      });
      const reader = events.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      assert.match(first, /retry: 1000|event: status/);
      const stopped = api.stop(300).then(() => "stopped");
      // A bound, not a measurement: before the grace period existed stop() never returned.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const bound = new Promise((r) => timer = setTimeout(() => r("still waiting"), 30_000));
      assert.equal(await Promise.race([stopped, bound]), "stopped");
      clearTimeout(timer);
      // The stream then ends (closed after an error event, or cut): the client reconnects.
      for (;;) {
        const chunk = await reader.read().catch(() => ({ done: true }));
        if (chunk.done) break;
      }
    } finally {
      await fx.close();
      for (const k of Object.keys(serverEnv)) Deno.env.delete(k);
    }
  },
  sanitizeOps: false,
  sanitizeResources: false,
});

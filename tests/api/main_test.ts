/**
 * `deno task api` as a user starts it: the task's own command line (deno.json) over a fresh data
 * folder (embedded PGlite and embedded S3 server), read until it listens; and its stop.
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { apiSettingsErrorMessage, apiSettingsFromEnv, serveApi } from "../../api/main.ts";
import { startApiFixture } from "./_fixture.ts";

const repoRoot = new URL("../../", import.meta.url);

/** Asserts that a log line's `time` is an ISO 8601 instant (`2025-01-01T12:00:00.000Z`). */
function assertLogTime(time: unknown) {
  assert.equal(typeof time, "string");
  assert.match(time as string, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  assert.equal(new Date(time as string).toISOString(), time);
}

Deno.test("deno task api runs with --unstable-no-legacy-abort, as deno task serve and deno task worker do, and starts without Deno's legacy request-abort warning", async () => {
  const tasks = JSON.parse(await Deno.readTextFile(new URL("deno.json", repoRoot))).tasks;
  const args: string[] = tasks.api.split(/\s+/);
  assert.equal(args[0], "deno");
  assert.ok(args.includes("--unstable-no-legacy-abort"), tasks.api);
  assert.ok(tasks.serve.split(/\s+/).includes("--unstable-no-legacy-abort"), tasks.serve);
  // A worker that is the first process on a data folder starts the embedded store itself.
  assert.ok(tasks.worker.split(/\s+/).includes("--unstable-no-legacy-abort"), tasks.worker);
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
    const listening = lines.find((l) => l.includes("api listening"));
    assert.ok(listening, lines.join("\n"));
    assert.deepEqual(lines.filter((l) => /legacy behavior|legacy-abort/.test(l)), []);
    // The worker's shape (jobs/logger.ts): an operator who reads both streams together orders the
    // lines by time and tells them apart by service.
    const line = JSON.parse(listening);
    assert.deepEqual(Object.keys(line), ["time", "level", "msg", "service", "hostname", "port"]);
    const { time, port, ...rest } = line;
    assertLogTime(time);
    assert.ok(port > 0, listening);
    assert.deepEqual(rest, {
      level: "info",
      msg: "api listening",
      service: "api",
      hostname: "127.0.0.1",
    });
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

/** The one line an API started with `env` exits with (apiSettingsErrorMessage). */
function startError(env: Record<string, string>): string {
  try {
    apiSettingsFromEnv(env);
  } catch (e) {
    assert.ok(e instanceof z.ZodError, String(e));
    return apiSettingsErrorMessage(e, env);
  }
  assert.fail(`${JSON.stringify(env)} was accepted`);
}

Deno.test("the API's settings default to 127.0.0.1:8787, an hourly sweep, a day's grace and info logs; empty counts as unset", () => {
  assert.deepEqual(apiSettingsFromEnv({}), {
    HOST: "127.0.0.1",
    PORT: 8787,
    SWEEPER_INTERVAL_MS: 3_600_000,
    SWEEPER_GRACE_MS: 86_400_000,
    LOG_LEVEL: "info",
  });
  assert.deepEqual(
    apiSettingsFromEnv({
      HOST: "",
      PORT: "",
      SWEEPER_INTERVAL_MS: "",
      SWEEPER_GRACE_MS: "",
      LOG_LEVEL: "",
    }),
    apiSettingsFromEnv({}),
  );
  // PORT=0 (a free port) is how the demo, the benchmarks and the tests start it.
  assert.deepEqual(
    apiSettingsFromEnv({
      HOST: "0.0.0.0",
      PORT: "0",
      SWEEPER_INTERVAL_MS: "0",
      SWEEPER_GRACE_MS: "7200000",
      LOG_LEVEL: "WARN",
    }),
    {
      HOST: "0.0.0.0",
      PORT: 0,
      SWEEPER_INTERVAL_MS: 0,
      SWEEPER_GRACE_MS: 7_200_000,
      LOG_LEVEL: "warn",
    },
  );
  assert.equal(apiSettingsFromEnv({ PORT: "65535" }).PORT, 65535);
});

Deno.test("a bad PORT or sweeper time is one line naming the variable, its rule and its value", () => {
  // Number() reads " " as 0, "1e3" as 1000 and "0x10" as 16: each is refused, not taken.
  for (const value of ["abc", "65536", "-1", "80.5", "1e3", "0x10", " ", " 80"]) {
    assert.equal(
      startError({ PORT: value }),
      `Cannot start the API as PORT must be a whole number from 0 to 65535: current value is ${
        JSON.stringify(value)
      }`,
      value,
    );
  }
  for (const value of ["1e3", "0x10", " ", "-1", "1h", "604800001"]) {
    assert.equal(
      startError({ SWEEPER_INTERVAL_MS: value }),
      "Cannot start the API as SWEEPER_INTERVAL_MS must be a whole number of ms from 0 to " +
        `604800000: current value is ${JSON.stringify(value)}`,
      value,
    );
  }
  // A grace under an hour would let a sweep delete the objects of an upload whose row is not
  // committed yet (a checkpoint being saved, a model being uploaded): 0 is refused, not "none".
  for (const value of ["1e3", "0", "1000", "3599999", "31536000001"]) {
    assert.equal(
      startError({ SWEEPER_GRACE_MS: value }),
      "Cannot start the API as SWEEPER_GRACE_MS must be a whole number of ms from 3600000 to " +
        `31536000000: current value is ${JSON.stringify(value)}`,
      value,
    );
  }
  assert.equal(apiSettingsFromEnv({ SWEEPER_GRACE_MS: "3600000" }).SWEEPER_GRACE_MS, 3_600_000);
});

/**
 * Runs `deno task api`'s entry with only `env` set (and a data folder it must leave empty). An API
 * that took the settings would serve until stopped: it is killed after 60 s (a bound, not a
 * measurement; it exits in well under a second).
 */
async function startApi(env: Record<string, string>) {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-never-used-" });
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("../../api/main.ts", import.meta.url).pathname],
      clearEnv: true,
      env: {
        PATH: Deno.env.get("PATH") ?? "",
        HOME: Deno.env.get("HOME") ?? "",
        SEED_DATA_DIR: dataDir,
        ...env,
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(60_000),
    }).output();
    const opened = [...Deno.readDirSync(dataDir)].map((e) => e.name);
    return {
      code: out.code,
      text: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
      opened,
    };
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
}

Deno.test("an API started with PORT=abc exits 1 at start with one line naming PORT, before opening anything", async () => {
  const { code, text, opened } = await startApi({ PORT: "abc" });
  assert.equal(code, 1, text);
  const lines = text.trim().split("\n");
  assert.equal(lines.length, 1, text);
  const line = JSON.parse(lines[0]);
  // The worker's shape (jobs/logger.ts): time, level, msg, then the service it came from.
  assert.deepEqual(Object.keys(line), ["time", "level", "msg", "service", "error"]);
  const { time, ...rest } = line;
  assertLogTime(time);
  assert.deepEqual(rest, {
    level: "error",
    msg: "the api cannot start",
    service: "api",
    error:
      'Cannot start the API as PORT must be a whole number from 0 to 65535: current value is "abc"',
  });
  assert.deepEqual(opened, [], "no database or store was opened");
});

Deno.test("an API started with SWEEPER_INTERVAL_MS=1e3 and a blank SWEEPER_GRACE_MS names both in its one line", async () => {
  const { code, text, opened } = await startApi({
    PORT: "0",
    SWEEPER_INTERVAL_MS: "1e3",
    SWEEPER_GRACE_MS: " ",
  });
  assert.equal(code, 1, text);
  const lines = text.trim().split("\n");
  assert.equal(lines.length, 1, text);
  assert.equal(
    JSON.parse(lines[0]).error,
    "Cannot start the API as SWEEPER_INTERVAL_MS must be a whole number of ms from 0 to 604800000: " +
      'current value is "1e3"; SWEEPER_GRACE_MS must be a whole number of ms from 3600000 to ' +
      '31536000000: current value is " "',
  );
  assert.deepEqual(opened, []);
});

Deno.test("an API started with LOG_LEVEL=debg exits 1 at start with one error line naming LOG_LEVEL", async () => {
  const { code, text, opened } = await startApi({ PORT: "0", LOG_LEVEL: "debg" });
  assert.equal(code, 1, text);
  const lines = text.trim().split("\n");
  assert.equal(lines.length, 1, text);
  const line = JSON.parse(lines[0]);
  assert.equal(line.level, "error");
  assert.equal(line.service, "api");
  assert.equal(
    line.error,
    'Cannot start the API as LOG_LEVEL must be one of debug, info, warn, error: current value is "debg"',
  );
  assert.deepEqual(opened, []);
});

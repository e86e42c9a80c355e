import assert from "node:assert/strict";
import { z } from "zod";
import { workerConfigErrorMessage, workerConfigFromEnv } from "../../../workers/worker/mod.ts";
import { PREFIX_CACHE_BYTES } from "../../../workers/model/policy.ts";

/** The issues of the ZodError `fn` throws, as `path: message` lines. */
function issues(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof z.ZodError, String(e));
    return e.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  }
  assert.fail("expected a ZodError");
}

/** The one line a worker started with `env` exits with (workerConfigErrorMessage). */
function startError(env: Record<string, string>): string {
  try {
    workerConfigFromEnv(env);
  } catch (e) {
    assert.ok(e instanceof z.ZodError, String(e));
    return workerConfigErrorMessage(e, env);
  }
  assert.fail(`${JSON.stringify(env)} was accepted`);
}

Deno.test("a gpu worker tries cuda, webgpu, then cpu; a cpu worker only cpu", () => {
  assert.deepEqual(workerConfigFromEnv({}).executionProviders, ["cpu"]);
  assert.deepEqual(workerConfigFromEnv({ WORKER_DEVICE: "cpu" }).executionProviders, ["cpu"]);
  assert.deepEqual(
    workerConfigFromEnv({ WORKER_DEVICE: "gpu" }).executionProviders,
    ["cuda", "webgpu", "cpu"],
  );
  assert.deepEqual(
    workerConfigFromEnv({ WORKER_DEVICE: "gpu", WORKER_EXECUTION_PROVIDERS: "" })
      .executionProviders,
    ["cuda", "webgpu", "cpu"],
  );
});

Deno.test("WORKER_EXECUTION_PROVIDERS overrides the order, spaces allowed", () => {
  const env = { WORKER_DEVICE: "gpu", WORKER_EXECUTION_PROVIDERS: "webgpu, cuda" };
  assert.deepEqual(workerConfigFromEnv(env).executionProviders, ["webgpu", "cuda"]);
  assert.deepEqual(
    workerConfigFromEnv({ WORKER_EXECUTION_PROVIDERS: "cpu" }).executionProviders,
    ["cpu"],
  );
});

Deno.test("a bad WORKER_EXECUTION_PROVIDERS is an error naming the variable and the entry", () => {
  assert.deepEqual(
    issues(() =>
      workerConfigFromEnv({ WORKER_DEVICE: "gpu", WORKER_EXECUTION_PROVIDERS: "cuda,metal" })
    ),
    ["WORKER_EXECUTION_PROVIDERS.1: a comma-separated list of cuda, webgpu, cpu"],
  );
  assert.deepEqual(
    issues(() =>
      workerConfigFromEnv({ WORKER_DEVICE: "gpu", WORKER_EXECUTION_PROVIDERS: "cuda,cuda" })
    ),
    [
      "WORKER_EXECUTION_PROVIDERS: a comma-separated list of cuda, webgpu, cpu " +
      "that names each provider once",
    ],
  );
  assert.deepEqual(
    issues(() => workerConfigFromEnv({ WORKER_EXECUTION_PROVIDERS: "webgpu,cpu" })),
    [
      "WORKER_EXECUTION_PROVIDERS: cpu when WORKER_DEVICE is cpu " +
      "(set WORKER_DEVICE=gpu to use webgpu)",
    ],
  );
});

Deno.test("WORKER_PREFIX_CACHE_MB sets the teacher pass's prefix KV budget in bytes; unset or empty keeps the policy's", () => {
  assert.equal(workerConfigFromEnv({}).prefixCacheBytes, undefined);
  assert.equal(workerConfigFromEnv({ WORKER_PREFIX_CACHE_MB: "" }).prefixCacheBytes, undefined);
  assert.equal(workerConfigFromEnv({ WORKER_PREFIX_CACHE_MB: "0" }).prefixCacheBytes, 0);
  assert.equal(workerConfigFromEnv({ WORKER_PREFIX_CACHE_MB: "512" }).prefixCacheBytes, 2 ** 29);
  assert.equal(
    workerConfigFromEnv({ WORKER_PREFIX_CACHE_MB: "65536" }).prefixCacheBytes,
    65_536 * 2 ** 20,
  );
  // The documented default (README.md, workers/worker/config.ts) is the policy's own.
  assert.equal(PREFIX_CACHE_BYTES, 128 * 2 ** 20);
});

Deno.test("a bad WORKER_PREFIX_CACHE_MB is an error naming the variable, the rule and the value", () => {
  for (const value of ["1.5", "-1", "1e3", "0x10", "lots", " 8", "65537"]) {
    assert.equal(
      startError({ WORKER_PREFIX_CACHE_MB: value }),
      "Cannot start the worker as WORKER_PREFIX_CACHE_MB must be a whole number of MiB from 0 to " +
        `65536: current value is ${JSON.stringify(value)}`,
      value,
    );
  }
});

Deno.test("a bad lease, poll, reaper or retry time is an error naming the variable, the range and the value", () => {
  const cases: [string, string, string][] = [
    ["WORKER_LEASE_MS", "abc", "from 300 to 3600000"],
    ["WORKER_LEASE_MS", "100", "from 300 to 3600000"],
    ["WORKER_POLL_MS", "-5", "from 10 to 600000"],
    ["REAPER_INTERVAL_MS", "5s", "from 0 to 3600000"],
    ["WORKER_RETRY_FOR_MS", "1e3", "from 0 to 86400000"],
  ];
  for (const [name, value, range] of cases) {
    assert.equal(
      startError({ [name]: value }),
      `Cannot start the worker as ${name} must be a whole number of ms ${range}: ` +
        `current value is ${JSON.stringify(value)}`,
      `${name}=${value}`,
    );
  }
  const c = workerConfigFromEnv({ WORKER_LEASE_MS: "1000", REAPER_INTERVAL_MS: "0" });
  assert.deepEqual(
    [c.leaseMs, c.pollMs, c.reaperIntervalMs, c.retryForMs],
    [1_000, 5_000, 0, 600_000],
  );
});

/** Runs `deno task worker`'s entry with `env` (and no database: it must stop before one). */
async function startWorker(env: Record<string, string>) {
  const dir = await Deno.makeTempDir({ prefix: "seed-never-used-" });
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../../../workers/main.ts", import.meta.url).pathname],
    env: { ...env, SEED_DATA_DIR: dir },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output().finally(() => Deno.remove(dir, { recursive: true }));
  return {
    code: out.code,
    text: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
  };
}

Deno.test("a worker with an invalid provider list exits at start naming the variable", async () => {
  const { code, text } = await startWorker({ WORKER_EXECUTION_PROVIDERS: "cuda" });
  assert.notEqual(code, 0);
  assert.match(text, /WORKER_EXECUTION_PROVIDERS/);
  assert.match(text, /must be cpu when WORKER_DEVICE is cpu/);
});

Deno.test("a worker with a bad WORKER_PREFIX_CACHE_MB exits at start naming the variable and value", async () => {
  const { code, text } = await startWorker({ WORKER_PREFIX_CACHE_MB: "1.5" });
  assert.equal(code, 1);
  const line = JSON.parse(text.trim());
  assert.equal(line.msg, "the worker cannot start");
  assert.equal(
    line.error,
    "Cannot start the worker as WORKER_PREFIX_CACHE_MB must be a whole number of MiB from 0 to " +
      '65536: current value is "1.5"',
  );
});

Deno.test("LOG_LEVEL takes debug, info, warn or error in any case; unset or empty is info", () => {
  assert.equal(workerConfigFromEnv({}).logLevel, "info");
  assert.equal(workerConfigFromEnv({ LOG_LEVEL: "" }).logLevel, "info");
  assert.equal(workerConfigFromEnv({ LOG_LEVEL: "warn" }).logLevel, "warn");
  assert.equal(workerConfigFromEnv({ LOG_LEVEL: "DEBUG" }).logLevel, "debug");
});

Deno.test("a LOG_LEVEL that is not a level is an error naming it, the levels and the value", () => {
  // "constructor" was read as a level once: a key every object has.
  for (const value of ["debg", "information", "constructor", "2", " info"]) {
    assert.equal(
      startError({ LOG_LEVEL: value }),
      "Cannot start the worker as LOG_LEVEL must be one of debug, info, warn, error: " +
        `current value is ${JSON.stringify(value)}`,
      value,
    );
  }
});

Deno.test("a worker with LOG_LEVEL=debg exits 1 at start with one line naming LOG_LEVEL", async () => {
  // With a second bad variable, so that a worker that took LOG_LEVEL for some level would stop too.
  const { code, text } = await startWorker({ LOG_LEVEL: "debg", WORKER_POLL_MS: "5s" });
  assert.equal(code, 1, text);
  const lines = text.trim().split("\n");
  assert.equal(lines.length, 1, text);
  const line = JSON.parse(lines[0]);
  assert.equal(line.level, "error");
  assert.equal(line.msg, "the worker cannot start");
  assert.equal(
    line.error,
    'Cannot start the worker as WORKER_POLL_MS must be a whole number of ms from 10 to 600000: current value is "5s"; ' +
      'LOG_LEVEL must be one of debug, info, warn, error: current value is "debg"',
  );
});

Deno.test("a gpu worker told not to fall back to cpu exits at start when no GPU provider loads", async (t) => {
  const { code, text } = await startWorker({
    WORKER_DEVICE: "gpu",
    WORKER_EXECUTION_PROVIDERS: "webgpu",
    LOG_LEVEL: "info",
  });
  if (code === 0 || /execution provider chosen/.test(text)) {
    await t.step({ name: "(webgpu loads here: nothing to check)", ignore: true, fn() {} });
    return;
  }
  assert.match(text, /probing execution providers/);
  assert.match(
    text,
    /NoExecutionProviderError: Cannot choose an execution provider as one of webgpu must load: webgpu: no WebGPU adapter: /,
  );
});

/** The server's settings from the environment (workers/serve/main.ts `serveConfigFromEnv`). */
import assert from "node:assert/strict";
import { z } from "zod";
import { serveConfigErrorMessage, serveConfigFromEnv } from "../../../workers/serve/main.ts";

Deno.test("serve settings default to the CPU, 8 named models, 256 names and 256 MiB of prefixes, and read provider lists and bounds", () => {
  const d = serveConfigFromEnv({});
  assert.deepEqual(d.SERVE_EXECUTION_PROVIDERS, ["cpu"]);
  assert.equal(d.SERVE_MAX_NAMED_MODELS, 8);
  assert.equal(d.SERVE_MAX_REGISTERED_NAMES, 256);
  assert.equal(d.SERVE_PREFIX_CACHE_MB, 256);
  const c = serveConfigFromEnv({
    SERVE_EXECUTION_PROVIDERS: "cuda,webgpu,cpu",
    SERVE_MAX_NAMED_MODELS: "3",
    SERVE_MAX_REGISTERED_NAMES: "3",
    SERVE_PREFIX_CACHE_MB: "0",
  });
  assert.deepEqual(c.SERVE_EXECUTION_PROVIDERS, ["cuda", "webgpu", "cpu"]);
  assert.equal(c.SERVE_MAX_NAMED_MODELS, 3);
  assert.equal(c.SERVE_MAX_REGISTERED_NAMES, 3);
  assert.equal(c.SERVE_PREFIX_CACHE_MB, 0);
});

Deno.test("a bad serve setting is refused naming the variable", () => {
  for (
    const [name, value] of [
      ["SERVE_EXECUTION_PROVIDERS", "cuda,gpu"],
      ["SERVE_MAX_NAMED_MODELS", "0"],
      ["SERVE_MAX_REGISTERED_NAMES", "many"],
      ["SERVE_MAX_REGISTERED_NAMES", "2.5"],
      ["SERVE_MAX_REGISTERED_NAMES", "7"], // fewer than the 8 named models kept loaded
      ["SERVE_PREFIX_CACHE_MB", "-1"],
      ["SERVE_PREFIX_CACHE_MB", "0.5"],
      ["SERVE_PREFIX_CACHE_MB", "lots"],
    ]
  ) {
    assert.throws(() => serveConfigFromEnv({ [name]: value }), (e) => {
      assert.ok(e instanceof z.ZodError);
      assert.equal(e.issues[0].path[0], name);
      return true;
    });
  }
});

Deno.test("a setting below another's bound is refused in one line naming both and the value", () => {
  const env = { SERVE_MAX_NAMED_MODELS: "16", SERVE_MAX_REGISTERED_NAMES: "12" };
  assert.throws(() => serveConfigFromEnv(env), (e) => {
    assert.ok(e instanceof z.ZodError);
    assert.equal(
      serveConfigErrorMessage(e, env),
      'Cannot start the server as SERVE_MAX_REGISTERED_NAMES must be a whole number from SERVE_MAX_NAMED_MODELS (16) to 100000: current value is "12"',
    );
    return true;
  });
});

Deno.test("each bad serve setting reads 'Cannot start the server as <variable> must be <rule>: current value is <value>'", () => {
  const message = (env: Record<string, string>) => {
    try {
      serveConfigFromEnv(env);
    } catch (e) {
      assert.ok(e instanceof z.ZodError);
      return serveConfigErrorMessage(e, env);
    }
    assert.fail(`${JSON.stringify(env)} was accepted`);
  };
  assert.equal(
    message({ SERVE_MAX_REGISTERED_NAMES: "abc" }),
    'Cannot start the server as SERVE_MAX_REGISTERED_NAMES must be a whole number from 1 to 100000: current value is "abc"',
  );
  assert.equal(
    message({ SERVE_PREFIX_CACHE_MB: "1.5" }),
    'Cannot start the server as SERVE_PREFIX_CACHE_MB must be a whole number of MiB from 0 to 65536: current value is "1.5"',
  );
  // Only decimal digits: what Number() would read as 0 or 1000 is refused, not taken.
  for (const value of [" ", "1e3", "0x10", "-1", "65537"]) {
    assert.equal(
      message({ SERVE_PREFIX_CACHE_MB: value }),
      `Cannot start the server as SERVE_PREFIX_CACHE_MB must be a whole number of MiB from 0 to 65536: current value is ${
        JSON.stringify(value)
      }`,
    );
  }
  const ranges: Record<string, string> = {
    SERVE_PORT: "0 to 65535",
    SERVE_MAX_BATCH: "1 to 1024",
    SERVE_MAX_QUEUE: "0 to 100000",
    SERVE_MAX_MODELS: "1 to 256",
    SERVE_MAX_NAMED_MODELS: "1 to 256",
    SERVE_THREADS: "1 to 256",
    SERVE_DEFAULT_MAX_TOKENS: "1 to 1000000",
  };
  for (const [name, range] of Object.entries(ranges)) {
    assert.equal(
      message({ [name]: "2.5" }),
      `Cannot start the server as ${name} must be a whole number from ${range}: current value is "2.5"`,
    );
  }
  assert.equal(
    message({ SERVE_EXECUTION_PROVIDERS: "cuda,gpu" }),
    'Cannot start the server as SERVE_EXECUTION_PROVIDERS must be a comma-separated list of cuda, webgpu, cpu: current value is "cuda,gpu"',
  );
  // Two bad variables: both named, in one line.
  assert.equal(
    message({ SERVE_PORT: "http", SERVE_THREADS: "0" }),
    'Cannot start the server as SERVE_PORT must be a whole number from 0 to 65535: current value is "http"; SERVE_THREADS must be a whole number from 1 to 256: current value is "0"',
  );
});

Deno.test("serve's LOG_LEVEL takes a level in any case, and anything else is refused naming it", () => {
  assert.equal(serveConfigFromEnv({}).LOG_LEVEL, "info");
  assert.equal(serveConfigFromEnv({ LOG_LEVEL: "Warn" }).LOG_LEVEL, "warn");
  const env = { LOG_LEVEL: "debg" };
  assert.throws(() => serveConfigFromEnv(env), (e) => {
    assert.ok(e instanceof z.ZodError);
    assert.equal(
      serveConfigErrorMessage(e, env),
      'Cannot start the server as LOG_LEVEL must be one of debug, info, warn, error: current value is "debg"',
    );
    return true;
  });
});

Deno.test("an empty serve setting takes its default, so SERVE_PREFIX_CACHE_MB= keeps 256 MiB, not 0", () => {
  const defaults = serveConfigFromEnv({});
  assert.equal(serveConfigFromEnv({ SERVE_PREFIX_CACHE_MB: "" }).SERVE_PREFIX_CACHE_MB, 256);
  const names = Object.keys(defaults);
  assert.deepEqual(serveConfigFromEnv(Object.fromEntries(names.map((n) => [n, ""]))), defaults);
  // A list with spaces after its commas reads as without.
  assert.deepEqual(
    serveConfigFromEnv({ SERVE_EXECUTION_PROVIDERS: "cuda, cpu" }).SERVE_EXECUTION_PROVIDERS,
    ["cuda", "cpu"],
  );
});

Deno.test("deno task serve with a bad setting exits 1 with one log line naming the variable and its value", async () => {
  // a value every version refuses before opening anything, so the process ends either way
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../../../workers/serve/main.ts", import.meta.url).pathname],
    env: { SERVE_MAX_NAMED_MODELS: "0", NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 1, text);
  const lines = text.trim().split("\n");
  assert.equal(lines.length, 1, text);
  const line = JSON.parse(lines[0]);
  assert.equal(line.level, "error");
  assert.equal(
    line.error,
    'Cannot start the server as SERVE_MAX_NAMED_MODELS must be a whole number from 1 to 256: current value is "0"',
  );
});

Deno.test("deno task serve with LOG_LEVEL=debg exits 1 with one log line naming LOG_LEVEL", async () => {
  // With a second bad variable, so that a server that took LOG_LEVEL for some level would stop too.
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../../../workers/serve/main.ts", import.meta.url).pathname],
    env: { LOG_LEVEL: "debg", SERVE_THREADS: "0", NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 1, text);
  const lines = text.trim().split("\n");
  assert.equal(lines.length, 1, text);
  assert.equal(
    JSON.parse(lines[0]).error,
    'Cannot start the server as SERVE_THREADS must be a whole number from 1 to 256: current value is "0"; ' +
      'LOG_LEVEL must be one of debug, info, warn, error: current value is "debg"',
  );
});

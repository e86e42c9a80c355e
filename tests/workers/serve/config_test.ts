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
      'Cannot start the server as its settings must be valid: SERVE_MAX_REGISTERED_NAMES: must be at least SERVE_MAX_NAMED_MODELS (16) (current value "12")',
    );
    return true;
  });
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
    'Cannot start the server as its settings must be valid: SERVE_MAX_NAMED_MODELS: Too small: expected number to be >=1 (current value "0")',
  );
});

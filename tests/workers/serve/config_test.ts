/** The server's settings from the environment (workers/serve/main.ts `serveConfigFromEnv`). */
import assert from "node:assert/strict";
import { z } from "zod";
import { serveConfigFromEnv } from "../../../workers/serve/main.ts";

Deno.test("serve settings default to the CPU and 8 named models, and read provider lists and bounds", () => {
  const d = serveConfigFromEnv({});
  assert.deepEqual(d.SERVE_EXECUTION_PROVIDERS, ["cpu"]);
  assert.equal(d.SERVE_MAX_NAMED_MODELS, 8);
  const c = serveConfigFromEnv({
    SERVE_EXECUTION_PROVIDERS: "cuda,webgpu,cpu",
    SERVE_MAX_NAMED_MODELS: "3",
  });
  assert.deepEqual(c.SERVE_EXECUTION_PROVIDERS, ["cuda", "webgpu", "cpu"]);
  assert.equal(c.SERVE_MAX_NAMED_MODELS, 3);
});

Deno.test("a bad serve setting is refused naming the variable", () => {
  for (
    const [name, value] of [["SERVE_EXECUTION_PROVIDERS", "cuda,gpu"], [
      "SERVE_MAX_NAMED_MODELS",
      "0",
    ]]
  ) {
    assert.throws(() => serveConfigFromEnv({ [name]: value }), (e) => {
      assert.ok(e instanceof z.ZodError);
      assert.equal(e.issues[0].path[0], name);
      return true;
    });
  }
});

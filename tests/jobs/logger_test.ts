/** The structured logger's threshold (jobs/logger.ts). */
import assert from "node:assert/strict";
import { createLogger, logLevelFromEnv } from "../../jobs/mod.ts";

Deno.test("LOG_LEVEL names the threshold in any case; unset or empty is info", () => {
  assert.equal(logLevelFromEnv({}), "info");
  assert.equal(logLevelFromEnv({ LOG_LEVEL: "" }), "info");
  assert.equal(logLevelFromEnv({ LOG_LEVEL: "error" }), "error");
  assert.equal(logLevelFromEnv({ LOG_LEVEL: "Debug" }), "debug");
});

Deno.test("a LOG_LEVEL that is not a level is refused naming it, the levels and the value", () => {
  // "toString" and "constructor" are keys every object has: no level by them either.
  for (const value of ["debg", "verbose", "toString", "constructor", "info "]) {
    assert.throws(() => logLevelFromEnv({ LOG_LEVEL: value }), {
      name: "RangeError",
      message:
        `Cannot use LOG_LEVEL as it must be one of debug, info, warn, error: current value is ${
          JSON.stringify(value)
        }`,
    });
  }
});

Deno.test("a logger writes the lines at or above its level, and so do its children", () => {
  const lines: string[] = [];
  const log = createLogger({ service: "t" }, { level: "warn", sink: (l) => lines.push(l) });
  const child = log.child({ jobId: "j" });
  log.info("hidden");
  child.info("hidden too");
  log.warn("shown");
  child.error("shown too");
  assert.deepEqual(
    lines.map((l) => JSON.parse(l)).map(({ level, msg, service, jobId }) => ({
      level,
      msg,
      service,
      jobId,
    })),
    [
      { level: "warn", msg: "shown", service: "t", jobId: undefined },
      { level: "error", msg: "shown too", service: "t", jobId: "j" },
    ],
  );
});

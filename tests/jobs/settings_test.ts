/** Settings from environment variables (jobs/settings.ts), shared by the worker and the server. */
import assert from "node:assert/strict";
import { z } from "zod";
import { settingsErrorMessage, wholeNumberSetting } from "../../jobs/mod.ts";

/** The start-up line for `env` read through `schema`, or the parsed settings when none. */
function read(schema: z.ZodType, env: Record<string, string | undefined>): unknown {
  const r = schema.safeParse(env);
  return r.success ? r.data : settingsErrorMessage("the test process", r.error, env);
}

Deno.test("a whole-number setting reads decimal digits within its bounds", () => {
  const s = wholeNumberSetting(0, 65_536, { unit: "MiB" });
  assert.equal(s.parse("0"), 0);
  assert.equal(s.parse("512"), 512);
  assert.equal(s.parse("065536"), 65_536);
  assert.equal(s.optional().parse(undefined), undefined);
  assert.equal(wholeNumberSetting(1, 8).default(4).parse(undefined), 4);
});

Deno.test("a whole-number setting refuses what Number would read, and everything out of bounds, with one rule", () => {
  const schema = z.object({
    SIZE_MB: wholeNumberSetting(1, 64, { unit: "MiB" }).optional(),
    COUNT: wholeNumberSetting(2, 9).optional(),
  });
  for (
    const value of ["1.5", "1e1", "0x10", "-1", " 8", "8 ", "", "abc", "0", "65", "1".repeat(400)]
  ) {
    assert.equal(
      read(schema, { SIZE_MB: value }),
      `Cannot start the test process as SIZE_MB must be a whole number of MiB from 1 to 64: current value is ${
        JSON.stringify(value)
      }`,
      value,
    );
  }
  assert.equal(
    read(schema, { COUNT: "10" }),
    'Cannot start the test process as COUNT must be a whole number from 2 to 9: current value is "10"',
  );
});

Deno.test("the start-up line names every bad variable once, in the schema's order", () => {
  const schema = z.object({
    A_MS: wholeNumberSetting(10, 100, { unit: "ms" }).optional(),
    B: z.enum(["x", "y"], { error: "one of x, y" }).optional(),
  });
  const env = { B: "z", A_MS: "5" };
  assert.equal(
    read(schema, env),
    'Cannot start the test process as A_MS must be a whole number of ms from 10 to 100: current value is "5"; ' +
      'B must be one of x, y: current value is "z"',
  );
  assert.deepEqual(read(schema, { A_MS: "50" }), { A_MS: 50 });
});

import assert from "node:assert/strict";
import { EXIT_WITH_PARENT_VAR, exitWithParentFromEnv } from "../../jobs/mod.ts";

Deno.test("SEED_EXIT_WITH_PARENT is off when unset, empty or 0, and a value other than 1 is refused naming the variable", () => {
  assert.equal(exitWithParentFromEnv({}), false);
  assert.equal(exitWithParentFromEnv({ [EXIT_WITH_PARENT_VAR]: "" }), false);
  assert.equal(exitWithParentFromEnv({ [EXIT_WITH_PARENT_VAR]: "0" }), false);
  assert.throws(
    () => exitWithParentFromEnv({ [EXIT_WITH_PARENT_VAR]: "yes" }),
    new RangeError(
      "Cannot read SEED_EXIT_WITH_PARENT as it must be 1, 0 or empty: current value is yes",
    ),
  );
});

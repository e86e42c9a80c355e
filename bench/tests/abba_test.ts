import assert from "node:assert/strict";
import { abbaOrder } from "../_abba.ts";

Deno.test("A/B sides are measured A B B A, so each comes first once and last once", () => {
  assert.deepEqual(abbaOrder(["this", "compare"]), ["this", "compare", "compare", "this"]);
  assert.deepEqual(abbaOrder(["a", "b", "c"]), ["a", "b", "c", "c", "b", "a"]);
});

Deno.test("one side alone is measured once, and the sides given are left as they were", () => {
  assert.deepEqual(abbaOrder(["this"]), ["this"]);
  assert.deepEqual(abbaOrder([]), []);
  const sides = ["this", "compare"];
  abbaOrder(sides);
  assert.deepEqual(sides, ["this", "compare"]);
});

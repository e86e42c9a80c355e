import assert from "node:assert/strict";
import { hash32, mix32, Rng, seedOf } from "../../../workers/envs/_rng.ts";

// Golden values: every built-in environment's tasks derive from these functions, so a change here
// changes every generated task (they equal the values of the per-env copies this module replaced).
Deno.test("Rng (mulberry32) draws the pinned sequence for a seed", () => {
  const r = new Rng(2026);
  assert.deepEqual([r.nextU32(), r.nextU32(), r.int(100), r.range(5, 9)], [
    1955961175,
    1324980858,
    66,
    8,
  ]);
  assert.deepEqual(new Rng(1).shuffle([1, 2, 3, 4, 5]), [5, 3, 2, 1, 4]);
});

Deno.test("the seed hashes give their pinned values", () => {
  assert.equal(hash32("sokoban"), 1023183911);
  assert.equal(seedOf("train", 7), 1098128015);
  assert.equal(mix32(1), 1364076727);
});

Deno.test("the same seed repeats the same draws and next() is nextU32() / 2^32", () => {
  const a = new Rng(99);
  const b = new Rng(99);
  for (let i = 0; i < 100; i++) assert.equal(a.next(), b.nextU32() / 4294967296);
  assert.deepEqual(
    new Rng(7).sample(["a", "b", "c", "d"], 2),
    new Rng(7).sample(["a", "b", "c", "d"], 2),
  );
});

import assert from "node:assert/strict";
import { replaySubset } from "../../../workers/seed/warmup_stage.ts";

Deno.test("the analyzer stage replays as many distinct demonstrations as there are analyses", () => {
  const data = Array.from({ length: 100 }, (_, i) => i);
  const picked = replaySubset(data, 10, 7);
  assert.equal(picked.length, 10);
  assert.equal(new Set(picked).size, 10);
  for (const x of picked) assert.ok(x >= 0 && x < 100);
  assert.deepEqual(replaySubset(data, 10, 7), picked, "same seed, same subset");
  assert.notDeepEqual(replaySubset(data, 10, 8), picked, "another seed, another subset");
  assert.deepEqual(data, Array.from({ length: 100 }, (_, i) => i), "input left unchanged");
});

Deno.test("the replay keeps every demonstration when there are fewer than the analyses", () => {
  assert.deepEqual(replaySubset([1, 2, 3], 5, 1), [1, 2, 3]);
  assert.deepEqual(replaySubset([1, 2, 3], 0, 1), []);
});

import assert from "node:assert/strict";
import { replayCount, replaySubset } from "../../../../workers/seed/run/warmup_stage.ts";

Deno.test("the replayed demonstrations are distinct and drawn by the seed", () => {
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

Deno.test("the replay matches the analyses' response tokens, at least one demonstration each", () => {
  const seq = (n: number) => ({ response: Array.from({ length: n }, (_, i) => i) });
  // 2 analyses of 80 tokens vs demonstrations of 8 tokens: 160 / 8 = 20.
  assert.equal(replayCount([seq(80), seq(80)], [seq(8), seq(8), seq(8)]), 20);
  // Long demonstrations: still one per analysis.
  assert.equal(replayCount([seq(4), seq(4)], [seq(100)]), 2);
  assert.equal(replayCount([], [seq(8)]), 0);
  assert.equal(replayCount([seq(8)], []), 0);
});

import assert from "node:assert/strict";
import {
  argMax,
  Rng,
  sampleToken,
  SamplingError,
  stopStringHit,
} from "../../../workers/model/sampling.ts";

Deno.test("the same seed gives the same stream and different seeds differ", () => {
  const a = new Rng(42);
  const b = new Rng(42);
  const c = new Rng(43);
  const xs = Array.from({ length: 100 }, () => a.next());
  const ys = Array.from({ length: 100 }, () => b.next());
  const zs = Array.from({ length: 100 }, () => c.next());
  assert.deepEqual(xs, ys);
  assert.notDeepEqual(xs, zs);
  for (const x of xs) assert.ok(x >= 0 && x < 1);
});

Deno.test("xoshiro128** matches the reference output for a known state", () => {
  // Reference: the C code at https://prng.di.unimi.it/xoshiro128starstar.c with s = {1, 2, 3, 4}
  // gives 11520, 0, 5927040, 70819200 as its first four outputs.
  const rng = Rng.fromState({ algorithm: "xoshiro128**", s: [1, 2, 3, 4] });
  assert.deepEqual([1, 2, 3, 4].map(() => rng.nextUint32()), [11520, 0, 5927040, 70819200]);
});

Deno.test("a restored state continues the stream exactly and survives JSON", () => {
  const rng = new Rng(7);
  for (let i = 0; i < 10; i++) rng.next();
  const saved = JSON.parse(JSON.stringify(rng.state()));
  const expected = Array.from({ length: 20 }, () => rng.next());
  const restored = Rng.fromState(saved);
  assert.deepEqual(Array.from({ length: 20 }, () => restored.next()), expected);
});

Deno.test("a malformed state is rejected with a clear error", () => {
  assert.throws(
    () => Rng.fromState({ algorithm: "xoshiro128**", s: [0, 0, 0, 0] }),
    SamplingError,
  );
  assert.throws(() => new Rng(NaN), /seed must be finite/);
});

Deno.test("uniform draws have the right mean and normal draws the right moments", () => {
  const rng = new Rng(1);
  const n = 20000;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += rng.next();
  assert.ok(Math.abs(sum / n - 0.5) < 0.01);
  let s1 = 0;
  let s2 = 0;
  for (let i = 0; i < n; i++) {
    const z = rng.normal();
    s1 += z;
    s2 += z * z;
  }
  assert.ok(Math.abs(s1 / n) < 0.03);
  assert.ok(Math.abs(s2 / n - 1) < 0.05);
  const counts = [0, 0, 0];
  for (let i = 0; i < 3000; i++) counts[rng.nextInt(3)]++;
  for (const c of counts) assert.ok(c > 900 && c < 1100);
});

Deno.test("greedy sampling takes the arg-max with the lowest index on ties", () => {
  const logits = new Float32Array([0.5, 2, -1, 2]);
  const rng = new Rng(0);
  assert.equal(sampleToken(logits, { temperature: 1, topP: 1, greedy: true }, rng), 1);
  assert.equal(argMax(new Float32Array([-Infinity, -Infinity])), 0);
  assert.equal(argMax(new Float32Array([NaN, 3, NaN])), 1);
});

Deno.test("temperature near zero acts greedy and zero temperature is greedy", () => {
  const logits = new Float32Array([1, 1.5, 0.2, 1.4]);
  const rng = new Rng(3);
  for (let i = 0; i < 200; i++) {
    assert.equal(sampleToken(logits, { temperature: 1e-4, topP: 1, greedy: false }, rng), 1);
  }
  assert.equal(sampleToken(logits, { temperature: 0, topP: 1, greedy: false }, rng), 1);
});

Deno.test("sampling at temperature one follows the softmax distribution", () => {
  const logits = new Float32Array([Math.log(0.5), Math.log(0.3), Math.log(0.2), -Infinity]);
  const rng = new Rng(11);
  const counts = [0, 0, 0, 0];
  const n = 20000;
  for (let i = 0; i < n; i++) {
    counts[sampleToken(logits, { temperature: 1, topP: 1, greedy: false }, rng)]++;
  }
  assert.ok(Math.abs(counts[0] / n - 0.5) < 0.02);
  assert.ok(Math.abs(counts[1] / n - 0.3) < 0.02);
  assert.ok(Math.abs(counts[2] / n - 0.2) < 0.02);
  assert.equal(counts[3], 0);
});

Deno.test("top-p keeps the nucleus and never draws tail tokens", () => {
  // p = [0.5, 0.3, 0.15, 0.05]; topP 0.75 keeps {0, 1} (mass 0.8), renormalised to 5/8, 3/8.
  const logits = new Float32Array([0.5, 0.3, 0.15, 0.05].map(Math.log));
  const rng = new Rng(5);
  const counts = [0, 0, 0, 0];
  const n = 16000;
  for (let i = 0; i < n; i++) {
    counts[sampleToken(logits, { temperature: 1, topP: 0.75, greedy: false }, rng)]++;
  }
  assert.equal(counts[2] + counts[3], 0);
  assert.ok(Math.abs(counts[0] / n - 0.625) < 0.02);
  // topP small keeps only the top token.
  for (let i = 0; i < 100; i++) {
    assert.equal(sampleToken(logits, { temperature: 1, topP: 0.01, greedy: false }, rng), 0);
  }
});

Deno.test("sampling rejects a bad topP and all-masked logits", () => {
  const rng = new Rng(0);
  assert.throws(
    () => sampleToken(new Float32Array([1, 2]), { temperature: 1, topP: 0, greedy: false }, rng),
    /topP must be in \(0, 1\]/,
  );
  assert.throws(
    () =>
      sampleToken(new Float32Array([-Infinity]), { temperature: 1, topP: 1, greedy: false }, rng),
    SamplingError,
  );
});

Deno.test("stopStringHit finds the earliest stop string", () => {
  assert.equal(stopStringHit("go north</action> more <|im_end|>", ["<|im_end|>", "</action>"]), 8);
  assert.equal(stopStringHit("nothing here", ["</action>", ""]), -1);
  assert.equal(stopStringHit("abc", []), -1);
});

import assert from "node:assert/strict";
import { llama3Frequency, ropeInverseFrequencies } from "../../../workers/model/rope.ts";
import { TINY_LLAMA, TINY_LLAMA3 } from "./_tiny.ts";

Deno.test("plain RoPE frequencies are theta^(-2i/D)", () => {
  assert.deepEqual(ropeInverseFrequencies(TINY_LLAMA), [1, 1 / 100]); // θ = 1e4, D = 4
});

Deno.test("Llama 3 scaling keeps high frequencies, divides low ones and blends the band between", () => {
  const s = TINY_LLAMA3.rope_scaling!; // L = 64, λ kept below 16, divided above 64, factor 8
  const base = [1, 100 ** -0.25, 0.1, 100 ** -0.75]; // θ = 100, D = 8
  const got = ropeInverseFrequencies(TINY_LLAMA3);
  assert.equal(got[0], base[0]); // λ ≈ 6.3 < 16
  assert.equal(got[3], base[3] / 8); // λ ≈ 198.7 > 64
  for (const i of [1, 2]) { // 16 ≤ λ ≤ 64: s = (L/λ − 1) / (4 − 1)
    const smooth = (64 / (2 * Math.PI / base[i]) - 1) / 3;
    assert.ok(smooth > 0 && smooth < 1);
    assert.ok(Math.abs(got[i] - ((1 - smooth) * base[i] / 8 + smooth * base[i])) < 1e-15);
  }
  // Continuous at both band edges (λ = 16 and λ = 64).
  const at = (wavelength: number) => llama3Frequency(2 * Math.PI / wavelength, s);
  assert.ok(Math.abs(at(16) - 2 * Math.PI / 16) < 1e-12);
  assert.ok(Math.abs(at(64) - 2 * Math.PI / 64 / 8) < 1e-12);
});

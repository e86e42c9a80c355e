import assert from "node:assert/strict";
import { answerF1, exactMatch, normalizeAnswer } from "../../../../workers/envs/search/answer.ts";

Deno.test("normalisation lowercases, drops punctuation and the articles a, an, the", () => {
  assert.equal(normalizeAnswer("The Silent Harbor"), "silent harbor");
  assert.equal(normalizeAnswer("  the   SILENT harbor!! "), "silent harbor");
  assert.equal(normalizeAnswer("An Orchard, a Tower."), "orchard tower");
  // Articles go only as whole words: "Theo" and "Anna" stay.
  assert.equal(normalizeAnswer("Theo Anna"), "theo anna");
  // Punctuation is deleted, not replaced by a space (SQuAD's remove_punc).
  assert.equal(normalizeAnswer("Silent-Harbor"), "silentharbor");
  assert.equal(normalizeAnswer('"1931"'), "1931");
  assert.equal(normalizeAnswer("the"), "");
});

Deno.test("exact match ignores case, punctuation and articles but not other words", () => {
  assert.equal(exactMatch("the silent harbor", "The Silent Harbor"), true);
  assert.equal(exactMatch("Silent Harbor.", "The Silent Harbor"), true);
  assert.equal(exactMatch("PAFORD!", "Paford"), true);
  assert.equal(exactMatch("a painter", "painter"), true);
  assert.equal(exactMatch("Paford city", "Paford"), false);
  assert.equal(exactMatch("Jemi", "Jemi Shonland"), false);
  assert.equal(exactMatch("the", "Paford"), false);
});

Deno.test("F1 is the token-overlap harmonic mean, 0 without overlap", () => {
  assert.equal(answerF1("Paford", "Paford"), 1);
  assert.equal(answerF1("The Paford.", "paford"), 1);
  // 1 of 1 predicted token is right, 1 of 2 gold tokens found: p = 1, r = 0.5, F1 = 2/3.
  assert.ok(Math.abs(answerF1("Jemi", "Jemi Shonland") - 2 / 3) < 1e-12);
  // p = 1/3, r = 1/2: F1 = 2·(1/6)/(5/6) = 0.4.
  assert.ok(Math.abs(answerF1("Jemi Drodo Vose", "Jemi Shonland") - 0.4) < 1e-12);
  // Repeated tokens count as often as they occur on both sides (multiset overlap): c = 1.
  assert.ok(Math.abs(answerF1("Jemi Jemi", "Jemi Shonland") - 0.5) < 1e-12);
  assert.equal(answerF1("Zunport", "Paford"), 0);
  assert.equal(answerF1("the", "Paford"), 0);
  assert.equal(answerF1("", "Paford"), 0);
});

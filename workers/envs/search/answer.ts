/**
 * Answer scoring of the search environment, as in SQuAD (Rajpurkar et al. 2016, its official
 * `evaluate-v1.1.py`) and Search-R1 (Jin et al. 2025, `qa_em.py`): both texts are normalised
 * (lowercased, punctuation removed, the articles `a`, `an`, `the` removed, whitespace collapsed);
 * exact match is equality of the normalised texts, F1 the harmonic mean of token precision and
 * recall over the normalised words (a multiset overlap).
 */

/**
 * SQuAD's `normalize_answer`: lowercase, drop punctuation and symbols (any Unicode `P` or `S`
 * character), drop the words `a`, `an`, `the`, collapse whitespace. `"The  Silent-Harbor!"` →
 * `"silentharbor"`.
 */
export function normalizeAnswer(text: string): string {
  return text.toLowerCase()
    .replace(/[\p{P}\p{S}]/gu, "")
    .replace(/\b(a|an|the)\b/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

/** True when the normalised texts are equal. */
export function exactMatch(prediction: string, gold: string): boolean {
  return normalizeAnswer(prediction) === normalizeAnswer(gold);
}

/**
 * Token F1 in [0, 1] of `prediction` against `gold` over normalised words: with c the size of
 * the multiset intersection, precision p = c / |prediction|, recall r = c / |gold|,
 * F1 = 2pr / (p + r); 0 when c = 0 (also when either side normalises to nothing).
 */
export function answerF1(prediction: string, gold: string): number {
  const predicted = normalizeAnswer(prediction).split(" ").filter((w) => w !== "");
  const wanted = normalizeAnswer(gold).split(" ").filter((w) => w !== "");
  const counts = new Map<string, number>();
  for (const w of wanted) counts.set(w, (counts.get(w) ?? 0) + 1);
  let common = 0;
  for (const w of predicted) {
    const left = counts.get(w) ?? 0;
    if (left > 0) {
      common++;
      counts.set(w, left - 1);
    }
  }
  if (common === 0) return 0;
  const precision = common / predicted.length, recall = common / wanted.length;
  return (2 * precision * recall) / (precision + recall);
}

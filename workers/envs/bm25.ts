/**
 * Okapi BM25 keyword search over a fixed list of documents (Robertson & Zaragoza 2009, "The
 * Probabilistic Relevance Framework: BM25 and Beyond", eq. 3.15 with the non-negative idf of
 * Lucene): k1 = 1.2, b = 0.75, idf = ln(1 + (N − df + 0.5) / (df + 0.5)). Shared by the webshop
 * catalog search and the search environment's passage retrieval. Ranking is deterministic: ties
 * break by document index.
 */

const K1 = 1.2;
const B = 0.75;

/** Lowercase word tokens: runs of ASCII letters or digits (`x-large` → `x`, `large`). */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[a-z]+|[0-9]+/g) ?? [];
}

/** A BM25 index over documents given as texts; a document is known by its index in that list. */
export class Bm25Index {
  /** term → (document index → term frequency). */
  readonly #postings = new Map<string, Map<number, number>>();
  /** Tokens per document. */
  readonly #lengths: number[] = [];
  readonly #averageLength: number;

  /** Indexes `documents` (tokenized by {@link tokenize}). */
  constructor(documents: readonly string[]) {
    documents.forEach((text, id) => {
      const terms = tokenize(text);
      this.#lengths.push(terms.length);
      for (const term of terms) {
        let posting = this.#postings.get(term);
        if (posting === undefined) this.#postings.set(term, posting = new Map());
        posting.set(id, (posting.get(id) ?? 0) + 1);
      }
    });
    this.#averageLength = this.#lengths.reduce((a, b) => a + b, 0) /
      Math.max(1, this.#lengths.length);
  }

  /** Number of documents indexed. */
  get size(): number {
    return this.#lengths.length;
  }

  /**
   * Document indexes ranked by BM25 score for `query` (best first, at most `limit`); documents
   * that match no query term are left out. Repeated query terms count once.
   */
  search(query: string, limit = 50): number[] {
    const scores = new Map<number, number>();
    const n = this.#lengths.length;
    for (const term of new Set(tokenize(query))) {
      const posting = this.#postings.get(term);
      if (posting === undefined) continue;
      const idf = Math.log(1 + (n - posting.size + 0.5) / (posting.size + 0.5));
      for (const [id, tf] of posting) {
        const norm = K1 * (1 - B + B * this.#lengths[id] / this.#averageLength);
        scores.set(id, (scores.get(id) ?? 0) + idf * tf * (K1 + 1) / (tf + norm));
      }
    }
    return [...scores].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, limit)
      .map(([id]) => id);
  }
}

/**
 * Keyword search over the catalog: Okapi BM25 (Robertson & Zaragoza 2009) over each product's
 * title, type, category, attributes and option values, k1 = 1.2, b = 0.75,
 * idf = ln(1 + (N − df + 0.5) / (df + 0.5)). Ties break by product id, so ranking is
 * deterministic. WebShop itself uses Pyserini BM25 over similar fields.
 */
import { CATALOG, type Product } from "./catalog.ts";

const K1 = 1.2;
const B = 0.75;

/** Lowercase word tokens: runs of letters or digits (`x-large` → `x`, `large`). */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[a-z]+|[0-9]+/g) ?? [];
}

function documentText(p: Product): string {
  return [p.title, p.type, p.category, ...p.attributes, ...Object.values(p.options).flat()]
    .join(" ");
}

interface Index {
  /** term → (product id → term frequency). */
  postings: Map<string, Map<number, number>>;
  lengths: number[];
  averageLength: number;
}

function buildIndex(products: readonly Product[]): Index {
  const postings = new Map<string, Map<number, number>>();
  const lengths: number[] = [];
  for (const p of products) {
    const terms = tokenize(documentText(p));
    lengths.push(terms.length);
    for (const term of terms) {
      let posting = postings.get(term);
      if (posting === undefined) postings.set(term, posting = new Map());
      posting.set(p.id, (posting.get(p.id) ?? 0) + 1);
    }
  }
  const averageLength = lengths.reduce((a, b) => a + b, 0) / Math.max(1, lengths.length);
  return { postings, lengths, averageLength };
}

const INDEX = buildIndex(CATALOG);

/**
 * Product ids ranked by BM25 score for `query` (best first, at most `limit`); products that
 * match no query term are left out. Repeated query terms count once.
 */
export function searchCatalog(query: string, limit = 50): number[] {
  const scores = new Map<number, number>();
  const n = INDEX.lengths.length;
  for (const term of new Set(tokenize(query))) {
    const posting = INDEX.postings.get(term);
    if (posting === undefined) continue;
    const idf = Math.log(1 + (n - posting.size + 0.5) / (posting.size + 0.5));
    for (const [id, tf] of posting) {
      const norm = K1 * (1 - B + B * INDEX.lengths[id] / INDEX.averageLength);
      scores.set(id, (scores.get(id) ?? 0) + idf * tf * (K1 + 1) / (tf + norm));
    }
  }
  return [...scores].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, limit).map(([id]) => id);
}

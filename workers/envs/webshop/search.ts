/**
 * Keyword search over the catalog: Okapi BM25 (workers/envs/bm25.ts: k1 = 1.2, b = 0.75) over
 * each product's title, type, category, attributes and option values. Ties break by product id,
 * so ranking is deterministic. WebShop itself uses Pyserini BM25 over similar fields.
 */
import { Bm25Index } from "../bm25.ts";
import { CATALOG, type Product } from "./catalog.ts";

function documentText(p: Product): string {
  return [p.title, p.type, p.category, ...p.attributes, ...Object.values(p.options).flat()]
    .join(" ");
}

/** Document i is CATALOG[i] (product ids are their catalog indexes). */
const INDEX = new Bm25Index(CATALOG.map(documentText));

/**
 * Product ids ranked by BM25 score for `query` (best first, at most `limit`); products that
 * match no query term are left out. Repeated query terms count once.
 */
export function searchCatalog(query: string, limit = 50): number[] {
  return INDEX.search(query, limit);
}

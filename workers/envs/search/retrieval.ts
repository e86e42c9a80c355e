/**
 * Passage retrieval for the search environment: Okapi BM25 (workers/envs/bm25.ts, the webshop's
 * ranking) over the text of every passage of the world (world.ts). Ties break by passage id.
 */
import { Bm25Index } from "../bm25.ts";
import { WORLD } from "./world.ts";

/** Document i is WORLD.passages[i]. */
const INDEX = new Bm25Index(WORLD.passages.map((p) => p.text));

/**
 * Passage ids ranked by BM25 for `query`, best first, at most `topK`; passages that share no
 * word with the query are left out (so a query of unknown words finds nothing).
 */
export function searchPassages(query: string, topK: number): number[] {
  return INDEX.search(query, topK);
}

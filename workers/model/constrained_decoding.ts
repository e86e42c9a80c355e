/**
 * Structured generation: decoding under a JSON object schema. At each step only the tokens that
 * keep the generated text a prefix of an accepted object are allowed (json_automaton.ts), and
 * only those after which the object can still be closed within the new-token budget; once the
 * object is closed the sequence stops. So every output parses, for any tokenizer whose tokens'
 * bytes are known (token_bytes.ts), including tokens that span several JSON characters
 * (`"},`) or part of one (byte-level BPE).
 *
 * How the mask is computed (the approach of Willard & Louf 2023, "Efficient Guided Generation
 * for Large Language Models", arXiv 2307.09702, §3: index the vocabulary by automaton state):
 * - the vocabulary's byte strings form a trie, walked once per automaton state with the state
 *   stepped along each edge, so shared prefixes are stepped once and a rejected prefix prunes
 *   its subtree;
 * - each token that survives gets the cost of its successor state: the fewest tokens that spell
 *   the canonical completion of that state (`JsonObjectAutomaton.completion`, segmented by
 *   dynamic programming over the trie). A token is allowed with `r` new tokens left (itself
 *   included) iff its cost ≤ r − 1. Because the canonical completion of a successor is the rest
 *   of the completion, the first token of the best segmentation always qualifies: while
 *   cost(state) ≤ r, some token is allowed and the invariant holds after it, so the object
 *   closes by the last token;
 * - the costs per token are cached by the automaton state with the value length clamped
 *   (`maskKey`): inside a long value every step reuses one array;
 * - jump-forward decoding (`forcedTokens`): where the automaton allows one byte at a time, the
 *   run of such bytes is spelled in the fewest tokens and handed to `generate` to append without
 *   a draw (Zheng et al. 2024, "SGLang", arXiv 2312.07104, §4, compressed finite state machine).
 */
import { JsonObjectAutomaton, type JsonObjectSchema, STATE_FIELDS } from "./json_automaton.ts";
import type { TokenConstraint } from "./sampling.ts";

/**
 * Thrown when a vocabulary cannot write the object, a budget is too small, or a token is not
 * allowed.
 */
export class ConstraintError extends Error {
  override name = "ConstraintError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** Cost of a token that may not follow (never allowed). */
const BLOCKED = 0xffff;

/** The vocabulary's byte strings as a trie (first-child / next-sibling arrays). */
class TokenTrie {
  readonly firstChild: Int32Array;
  readonly nextSibling: Int32Array;
  readonly edge: Uint8Array;
  /** First token id ending at a node, -1 for none; further ones via `tokenNext`. */
  readonly tokenHead: Int32Array;
  readonly tokenNext: Int32Array;
  /** Longest token (bytes). */
  readonly maxDepth: number;

  constructor(tokens: readonly (Uint8Array | null)[]) {
    const child = new Map<number, number>(); // node * 256 + byte → node
    const firstChild = [-1], nextSibling = [-1], edge = [0], tokenHead = [-1];
    const tokenNext = new Int32Array(tokens.length).fill(-1);
    let maxDepth = 0;
    tokens.forEach((bytes, id) => {
      if (!bytes || bytes.length === 0) return;
      let node = 0;
      for (const b of bytes) {
        let next = child.get(node * 256 + b);
        if (next === undefined) {
          next = firstChild.length;
          firstChild.push(-1), nextSibling.push(firstChild[node]), edge.push(b), tokenHead.push(-1);
          firstChild[node] = next;
          child.set(node * 256 + b, next);
        }
        node = next;
      }
      tokenNext[id] = tokenHead[node];
      tokenHead[node] = id;
      maxDepth = Math.max(maxDepth, bytes.length);
    });
    this.firstChild = Int32Array.from(firstChild);
    this.nextSibling = Int32Array.from(nextSibling);
    this.edge = Uint8Array.from(edge);
    this.tokenHead = Int32Array.from(tokenHead);
    this.tokenNext = tokenNext;
    this.maxDepth = maxDepth;
  }

  /** The child of `node` along byte `b`, or -1. */
  child(node: number, b: number): number {
    for (let c = this.firstChild[node]; c >= 0; c = this.nextSibling[c]) {
      if (this.edge[c] === b) return c;
    }
    return -1;
  }
}

/** Options of {@link JsonConstrainedDecoder}. */
export interface JsonDecoderOptions {
  /**
   * Width of a logits row (the model's vocab_size); ids at or past `tokens.length` are never
   * allowed.
   */
  vocabSize?: number;
  /** Most cached per-state cost arrays (each `vocabSize` × 2 bytes); default 256. */
  maxCachedStates?: number;
}

/**
 * A JSON object schema compiled against one vocabulary (see module doc). Build once per
 * (tokenizer, schema) and call `start()` per generated sequence.
 */
export class JsonConstrainedDecoder {
  readonly automaton: JsonObjectAutomaton;
  /** Fewest new tokens that can write an accepted object: smaller budgets throw. */
  readonly minTokens: number;
  readonly vocabSize: number;
  readonly #tokens: readonly (Uint8Array | null)[];
  readonly #trie: TokenTrie;
  readonly #costs = new Map<number, number>(); // completion key → tokens to finish
  readonly #masks = new Map<string, Uint16Array>(); // mask key → cost per token
  readonly #maxCached: number;
  readonly #walk: Int32Array; // one state per trie depth
  readonly #nodes: Int32Array;
  readonly #scratch = new Int32Array(STATE_FIELDS);
  readonly #jump = new Int32Array(2 * STATE_FIELDS); // forcedTokens' two states

  /**
   * @param tokens bytes written per token id (`tokenBytes`); null/empty ones are never allowed.
   * @throws {JsonSchemaError} on a bad schema; {ConstraintError} when the vocabulary cannot
   *   spell an accepted object.
   */
  constructor(
    tokens: readonly (Uint8Array | null)[],
    schema: JsonObjectSchema,
    options: JsonDecoderOptions = {},
  ) {
    this.automaton = new JsonObjectAutomaton(schema);
    this.vocabSize = options.vocabSize ?? tokens.length;
    this.#tokens = tokens.slice(0, this.vocabSize);
    this.#trie = new TokenTrie(this.#tokens);
    this.#maxCached = options.maxCachedStates ?? 256;
    this.#walk = new Int32Array((this.#trie.maxDepth + 1) * STATE_FIELDS);
    this.#nodes = new Int32Array(this.#trie.maxDepth + 1);
    const start = new Int32Array(STATE_FIELDS);
    this.automaton.init(start, 0);
    this.minTokens = this.cost(start, 0);
    if (!Number.isFinite(this.minTokens)) {
      throw new ConstraintError(
        `Cannot constrain decoding as the vocabulary must spell ${
          JSON.stringify(this.exampleObject())
        }: some byte of it is no token's`,
      );
    }
  }

  /** The shortest accepted object (the start state's canonical completion). */
  exampleObject(): string {
    const start = new Int32Array(STATE_FIELDS);
    this.automaton.init(start, 0);
    return new TextDecoder().decode(
      Uint8Array.from(this.automaton.completion(start, 0, this.#scratch)),
    );
  }

  /** A new sequence at the start state. */
  start(): JsonSequenceConstraint {
    return new JsonSequenceConstraint(this);
  }

  /**
   * Fewest tokens that spell the canonical completion of the state at `o` (0 when done;
   * Infinity when no segmentation exists).
   */
  cost(st: Int32Array, o: number): number {
    const key = this.automaton.completionKey(st, o);
    let cost = this.#costs.get(key);
    if (cost === undefined) {
      cost = this.#segmentCost(this.automaton.completion(st, o, this.#scratch));
      this.#costs.set(key, cost);
    }
    return cost;
  }

  /** Fewest tokens whose bytes concatenate to `bytes` (dynamic programming from the end). */
  #segmentCost(bytes: number[]): number {
    return this.#segment(bytes).best[0];
  }

  /**
   * The segmentation DP of `bytes`: `best[i]` the fewest tokens that spell bytes[i..n) (Infinity
   * when none do), `node[i]` the trie node of the first token of such a spelling (the longest
   * one on ties; -1 where no token starts) and `end[i]` where that token ends.
   */
  #segment(bytes: number[]): { best: Float64Array; node: Int32Array; end: Int32Array } {
    const trie = this.#trie, n = bytes.length;
    const best = new Float64Array(n + 1).fill(Infinity);
    const first = new Int32Array(n + 1).fill(-1), end = new Int32Array(n + 1);
    best[n] = 0;
    for (let i = n - 1; i >= 0; i--) {
      let node = 0;
      for (let j = i; j < n; j++) {
        node = trie.child(node, bytes[j]);
        if (node < 0) break;
        if (trie.tokenHead[node] >= 0 && 1 + best[j + 1] <= best[i]) {
          best[i] = 1 + best[j + 1];
          first[i] = node;
          end[i] = j + 1;
        }
      }
    }
    return { best, node: first, end };
  }

  /**
   * Jump-forward decoding (after SGLang's compressed finite state machine: Zheng et al. 2024,
   * "SGLang: Efficient Execution of Structured Language Model Programs", arXiv 2312.07104, §4):
   * the token ids that spell the state's forced byte run (`JsonObjectAutomaton.forcedBytes`), in
   * the fewest tokens (longest first token on ties; the lowest id among tokens of equal bytes).
   * Unless the run closes the object its last token is dropped when a longer token could start
   * with it (a byte that may follow the run continues its trie node: ` ` before ` right`), so
   * the model still chooses how the text after the run is spelled. Tokens are dropped from the
   * end until the object still closes within `remaining` minus their number (the budget
   * invariant of `maskLogits`). Pure: the state at `o` is not changed. [] when the next token
   * is a real choice.
   */
  forcedTokens(st: Int32Array, o: number, remaining: number): number[] {
    const a = this.automaton, trie = this.#trie, walk = this.#jump, F = STATE_FIELDS;
    if (remaining <= 0 || a.isDone(st, o)) return [];
    const bytes = a.forcedBytes(st, o, walk, 0, remaining * trie.maxDepth);
    if (bytes.length === 0) return [];
    const seg = this.#segment(bytes);
    // the run's tokens with where each ends; a run no token spells is cut where spelling stops
    const nodes: number[] = [], ends: number[] = [];
    for (let i = 0; i < bytes.length && seg.node[i] >= 0; i = seg.end[i]) {
      nodes.push(seg.node[i]);
      ends.push(seg.end[i]);
    }
    if (nodes.length === 0) return [];
    // walk now holds the state after the whole run (forcedBytes left it there)
    const closes = ends.at(-1) === bytes.length && a.isDone(walk, 0);
    if (!closes) {
      let extendable = ends.at(-1)! < bytes.length; // the run was cut: keep it short
      for (let c = trie.firstChild[nodes.at(-1)!]; c >= 0 && !extendable; c = trie.nextSibling[c]) {
        walk.copyWithin(F, 0, F);
        extendable = a.step(walk, F, trie.edge[c]);
      }
      if (extendable) nodes.pop(), ends.pop();
    }
    // the budget: after k forced tokens the object must still close in remaining − k
    let k = Math.min(nodes.length, remaining);
    while (k > 0) {
      walk.set(st.subarray(o, o + F), 0);
      for (let i = 0; i < ends[k - 1]; i++) a.step(walk, 0, bytes[i]);
      if (this.cost(walk, 0) <= remaining - k) break;
      k--;
    }
    return nodes.slice(0, k).map((node) => this.#lowestId(node));
  }

  /** The lowest token id whose bytes end at trie node `node`. */
  #lowestId(node: number): number {
    let id = this.#trie.tokenHead[node];
    for (let t = id; t >= 0; t = this.#trie.tokenNext[t]) id = Math.min(id, t);
    return id;
  }

  /**
   * Per token id (vocabSize,): the cost of the state after it (`cost`), or 0xffff when it may not
   * follow the state at `o`. Cached by `maskKey`; the array must not be modified.
   */
  costsAfter(st: Int32Array, o: number): Uint16Array {
    const key = this.automaton.maskKey(st, o, this.#trie.maxDepth);
    let costs = this.#masks.get(key);
    if (costs) return costs;
    costs = this.#walkTrie(st, o);
    if (this.#masks.size >= this.#maxCached) this.#masks.clear();
    this.#masks.set(key, costs);
    return costs;
  }

  /** Depth-first walk of the trie from the state at `o`, stepping the automaton per edge. */
  #walkTrie(st: Int32Array, o: number): Uint16Array {
    const costs = new Uint16Array(this.vocabSize).fill(BLOCKED);
    const trie = this.#trie, a = this.automaton, walk = this.#walk, nodes = this.#nodes;
    const F = STATE_FIELDS;
    walk.set(st.subarray(o, o + F), 0);
    let depth = 1, node = trie.firstChild[0];
    while (depth > 0) {
      if (node < 0) { // no more siblings: back up one level
        depth--;
        if (depth > 0) node = trie.nextSibling[nodes[depth]];
        continue;
      }
      const at = depth * F;
      walk.copyWithin(at, at - F, at);
      if (a.step(walk, at, trie.edge[node])) {
        if (trie.tokenHead[node] >= 0) {
          const c = Math.min(this.cost(walk, at), BLOCKED - 1);
          for (let t = trie.tokenHead[node]; t >= 0; t = trie.tokenNext[t]) costs[t] = c;
        }
        if (trie.firstChild[node] >= 0 && !a.isDone(walk, at)) {
          nodes[depth] = node;
          depth++;
          node = trie.firstChild[node];
          continue;
        }
      }
      node = trie.nextSibling[node];
    }
    return costs;
  }

  /** Bytes written by token `id` (null when it writes none). */
  bytesOf(id: number): Uint8Array | null {
    return this.#tokens[id] ?? null;
  }
}

/**
 * One sequence decoded under a {@link JsonConstrainedDecoder}: masks each row of logits and
 * follows the drawn tokens (the `TokenConstraint` hook of `generate`).
 */
export class JsonSequenceConstraint implements TokenConstraint {
  readonly #decoder: JsonConstrainedDecoder;
  readonly #state = new Int32Array(STATE_FIELDS);
  #done = false;

  constructor(decoder: JsonConstrainedDecoder) {
    this.#decoder = decoder;
    decoder.automaton.init(this.#state, 0);
  }

  /** True once the object is closed. */
  get done(): boolean {
    return this.#done;
  }

  /** Fewest tokens that still close the object from here. */
  tokensToFinish(): number {
    return this.#decoder.cost(this.#state, 0);
  }

  /**
   * Sets to −Infinity, in place, the logits (vocabSize,) of every token not allowed next with
   * `remaining` new tokens left (this one included).
   * @throws {ConstraintError} when the object is already closed, or cannot be closed within
   *   `remaining` tokens (the budget is below `minTokens`).
   */
  maskLogits(logits: Float32Array, remaining: number): void {
    const need = this.tokensToFinish();
    if (this.#done || !(remaining >= need)) {
      throw new ConstraintError(
        this.#done
          ? "Cannot mask logits as the JSON object must still be open: it is closed"
          : `Cannot write the JSON object as the new-token budget must be ≥ ${need} tokens for this tokenizer: current value is ${remaining}`,
      );
    }
    const costs = this.#decoder.costsAfter(this.#state, 0);
    const limit = Math.min(remaining, BLOCKED); // allowed iff cost ≤ remaining − 1
    const n = Math.min(logits.length, costs.length);
    for (let t = 0; t < n; t++) if (costs[t] >= limit) logits[t] = -Infinity;
    for (let t = n; t < logits.length; t++) logits[t] = -Infinity;
  }

  /**
   * Jump-forward decoding: the tokens that must come next with `remaining` new tokens left
   * (`JsonConstrainedDecoder.forcedTokens`; [] once the object is closed). The caller passes
   * each to `accept`.
   */
  forcedTokens(remaining: number): number[] {
    return this.#done ? [] : this.#decoder.forcedTokens(this.#state, 0, remaining);
  }

  /**
   * Follows drawn token `id`; returns true when it closed the object.
   * @throws {ConstraintError} when the token may not follow.
   */
  accept(id: number): boolean {
    const bytes = this.#decoder.bytesOf(id);
    const a = this.#decoder.automaton;
    let ok = !this.#done && bytes !== null && bytes.length > 0;
    for (let i = 0; ok && i < bytes!.length; i++) ok = a.step(this.#state, 0, bytes![i]);
    if (!ok) {
      throw new ConstraintError(
        `Cannot follow token ${id} as it must continue the JSON object: it does not (masked logits were not used?)`,
      );
    }
    this.#done = a.isDone(this.#state, 0);
    return this.#done;
  }
}

/**
 * Text patterns for structured generation: a small regular grammar (literals, sequences, choices,
 * repetitions) compiled into a deterministic automaton over UTF-8 bytes, so a JSON string value
 * can be constrained to the sentences of a grammar (json_automaton.ts, `JsonStringField.pattern`)
 * — e.g. the skill sentences an environment's reference analyzer writes, so every skill an
 * analyzer decodes is one of them.
 *
 * Compilation: Thompson's construction of an ε-NFA (built right to left, with byte states
 * hash-consed so equal suffixes share states), then the subset construction (Aho, Lam, Sethi &
 * Ullman, "Compilers", 2nd ed., §3.7.1 and §3.7.4). Each DFA state also gets its distance (fewest
 * bytes to an accepting state, by a backward breadth-first search) and its canonical next byte
 * (the lowest byte that lowers the distance by one), so the shortest completion from any state is
 * known; states that cannot reach acceptance are removed (no transition enters them). Transitions
 * are stored per state (CSR), ~15 bytes a state: the household skill grammar's 637k states take
 * 11 MB and compile in 1.3–1.9 s (workers/model/README.md, "The analyzer (structured generation)").
 */

/**
 * A regular text pattern:
 * - a string matches itself (its UTF-8 bytes);
 * - `{ seq }` each part in order; `{ oneOf }` any one alternative (≥ 1);
 * - `{ repeat, min, separator }` the item `min` (0 or 1, default 1) or more times, with
 *   `separator` between two consecutive items (e.g. `up then left then up`).
 *
 * A pattern may use one object in several places (a graph, not only a tree): the compiler builds
 * it once per continuation, so a rest of text that many choices share costs its size once.
 */
export type TextPattern =
  | string
  | { readonly seq: readonly TextPattern[] }
  | { readonly oneOf: readonly TextPattern[] }
  | {
    readonly repeat: TextPattern;
    readonly min?: 0 | 1;
    readonly separator?: TextPattern;
  };

/** Thrown when a pattern cannot be compiled (empty choice, too many states). */
export class TextPatternError extends Error {
  override name = "TextPatternError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** No transition (also: into a state that cannot reach acceptance). */
export const NO_STATE = -1;

/** Default bound on DFA states (each costs ~15 bytes in the compiled automaton). */
const DEFAULT_MAX_STATES = 4_000_000;

/**
 * The compiled automaton of a {@link TextPattern}. State 0 is the start state; every state can
 * reach acceptance. Transitions are stored compressed by state (CSR): the edges of state `s` are
 * `edgeBytes[offsets[s] .. offsets[s + 1])` (ascending bytes) with the same slice of
 * `edgeTargets`; use {@link TextPatternDfa.step}.
 */
export class TextPatternDfa {
  /** (states + 1,) int32: where each state's edges start in `edgeBytes`/`edgeTargets`. */
  readonly offsets: Int32Array;
  /** (edges,) uint8: the byte of each edge, ascending within a state. */
  readonly edgeBytes: Uint8Array;
  /** (edges,) int32: the state each edge leads to. */
  readonly edgeTargets: Int32Array;
  /** (states,) 1 where the text so far is a whole sentence of the pattern. */
  readonly accepting: Uint8Array;
  /** (states,) fewest bytes from the state to an accepting state. */
  readonly distance: Int32Array;
  /** (states,) lowest byte on a shortest path to acceptance, −1 on accepting states. */
  readonly canonical: Int16Array;
  /** Short identifier of the pattern (a 64-bit FNV-1a fingerprint of its JSON), for cache keys. */
  readonly id: string;

  constructor(parts: {
    offsets: Int32Array;
    edgeBytes: Uint8Array;
    edgeTargets: Int32Array;
    accepting: Uint8Array;
    distance: Int32Array;
    canonical: Int16Array;
    id: string;
  }) {
    this.offsets = parts.offsets;
    this.edgeBytes = parts.edgeBytes;
    this.edgeTargets = parts.edgeTargets;
    this.accepting = parts.accepting;
    this.distance = parts.distance;
    this.canonical = parts.canonical;
    this.id = parts.id;
  }

  /** Number of states. */
  get size(): number {
    return this.accepting.length;
  }

  /**
   * The state after byte `b` (0–255) from state `s`, or {@link NO_STATE} when `b` cannot follow.
   */
  step(s: number, b: number): number {
    let lo = this.offsets[s], hi = this.offsets[s + 1];
    // most states have one or two edges: a linear scan beats bisection there
    if (hi - lo <= 8) {
      for (; lo < hi; lo++) if (this.edgeBytes[lo] === b) return this.edgeTargets[lo];
      return NO_STATE;
    }
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const m = this.edgeBytes[mid];
      if (m === b) return this.edgeTargets[mid];
      if (m < b) lo = mid + 1;
      else hi = mid;
    }
    return NO_STATE;
  }

  /** The bytes that can follow state `s`, ascending (a view into the automaton: do not write). */
  bytesFrom(s: number): Uint8Array {
    return this.edgeBytes.subarray(this.offsets[s], this.offsets[s + 1]);
  }

  /** The bytes each state accepts (a set over 0–255, across all states). */
  alphabet(): Set<number> {
    const seen = new Uint8Array(256);
    for (const b of this.edgeBytes) seen[b] = 1;
    const out = new Set<number>();
    for (let b = 0; b < 256; b++) if (seen[b]) out.add(b);
    return out;
  }

  /** True when `text` is a whole sentence of the pattern. */
  matches(text: string): boolean {
    const s = this.walk(text);
    return s !== NO_STATE && this.accepting[s] === 1;
  }

  /** True when `text` can be continued into a sentence of the pattern (or already is one). */
  isPrefix(text: string): boolean {
    return this.walk(text) !== NO_STATE;
  }

  /** The state after the UTF-8 bytes of `text` from the start, or {@link NO_STATE}. */
  walk(text: string): number {
    let s = 0;
    for (const b of new TextEncoder().encode(text)) {
      s = this.step(s, b);
      if (s === NO_STATE) return NO_STATE;
    }
    return s;
  }

  /** The shortest sentence of the pattern (the canonical completion of the start state). */
  shortest(): string {
    const bytes: number[] = [];
    for (let s = 0; !this.accepting[s]; s = this.step(s, this.canonical[s])) {
      bytes.push(this.canonical[s]);
    }
    return new TextDecoder().decode(Uint8Array.from(bytes));
  }

  /** So that a schema holding this automaton serialises to a short cache key. */
  toJSON(): { text_pattern: string } {
    return { text_pattern: this.id };
  }
}

/** A growable int32 array (amortised doubling). */
class IntList {
  data: Int32Array;
  length = 0;
  constructor(capacity = 1024) {
    this.data = new Int32Array(capacity);
  }
  push(v: number): void {
    if (this.length === this.data.length) {
      const grown = new Int32Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = v;
  }
  view(): Int32Array {
    return this.data.subarray(0, this.length);
  }
}

/**
 * ε-NFA under construction, built right to left: `add(p, k)` returns a state from which reading
 * a sentence of `p` leads (through ε edges) to the state `k`. A state has either one byte edge
 * (`byte`, `target`; byte −1 when none) or ε edges. Byte states are hash-consed on (byte,
 * target), so equal suffixes share their states (as in a minimal acyclic automaton), and a
 * pattern object that occurs several times (a DAG) is built once per continuation.
 */
class Nfa {
  readonly byte = new IntList(1 << 16);
  readonly target = new IntList(1 << 16);
  readonly epsilon: number[][] = [];
  readonly #encoder = new TextEncoder();
  readonly #encoded = new Map<string, Uint8Array>();
  /** Hash-consing of byte states: open addressing over states, keyed by (target, byte). */
  #byteTable = new Int32Array(1 << 16).fill(-1);
  #byteCount = 0;
  readonly #built = new Map<object, Map<number, number>>(); // pattern → continuation → start

  state(): number {
    this.byte.push(-1);
    this.target.push(-1);
    this.epsilon.push(NO_EPSILON);
    return this.epsilon.length - 1;
  }

  /** A state with ε edges to `targets` (the array is kept). */
  fork(targets: number[]): number {
    const s = this.state();
    this.epsilon[s] = targets;
    return s;
  }

  #byteState(b: number, to: number): number {
    const table = this.#byteTable, mask = table.length - 1;
    let i = (Math.imul(to, 0x9e3779b1) ^ b) & mask;
    for (let s = table[i]; s !== -1; s = table[i = (i + 1) & mask]) {
      if (this.byte.data[s] === b && this.target.data[s] === to) return s;
    }
    const s = this.state();
    this.byte.data[s] = b;
    this.target.data[s] = to;
    table[i] = s;
    if (++this.#byteCount * 2 > table.length) this.#rehash();
    return s;
  }

  #rehash(): void {
    const old = this.#byteTable;
    const table = this.#byteTable = new Int32Array(old.length * 2).fill(-1);
    const mask = table.length - 1;
    for (const s of old) {
      if (s === -1) continue;
      let i = (Math.imul(this.target.data[s], 0x9e3779b1) ^ this.byte.data[s]) & mask;
      while (table[i] !== -1) i = (i + 1) & mask;
      table[i] = s;
    }
  }

  /** Adds `p` followed by the state `k`; returns its start state. */
  add(p: TextPattern, k: number): number {
    if (typeof p === "string") {
      let bytes = this.#encoded.get(p);
      if (bytes === undefined) this.#encoded.set(p, bytes = this.#encoder.encode(p));
      for (let i = bytes.length - 1; i >= 0; i--) k = this.#byteState(bytes[i], k);
      return k;
    }
    let memo = this.#built.get(p);
    if (memo === undefined) this.#built.set(p, memo = new Map());
    let start = memo.get(k);
    if (start === undefined) memo.set(k, start = this.#build(p, k));
    return start;
  }

  #build(p: Exclude<TextPattern, string>, k: number): number {
    if ("seq" in p) return p.seq.reduceRight((at: number, part) => this.add(part, at), k);
    if ("oneOf" in p) {
      if (p.oneOf.length === 0) {
        throw new TextPatternError(
          "Cannot compile the text pattern as oneOf must hold ≥ 1 alternative",
        );
      }
      return p.oneOf.length === 1
        ? this.add(p.oneOf[0], k)
        : this.fork(p.oneOf.map((alt) => this.add(alt, k)));
    }
    // repeat: item (separator item)*, optionally skipped as a whole when min is 0
    const after = this.fork([k]); // after an item: leave, or (below) go round again
    const item = this.add(p.repeat, after);
    this.epsilon[after].push(p.separator === undefined ? item : this.add(p.separator, item));
    return p.min === 0 ? this.fork([item, k]) : item;
  }
}

/** The ε edges of a byte state (shared, never written). */
const NO_EPSILON: number[] = [];

/**
 * The JSON text of `pattern`, except that an object met again is written `{"$ref":n}` (n: its
 * index in first-visit order), so a pattern that shares sub-patterns serialises at the size of its
 * graph. For a tree it is exactly `JSON.stringify(pattern)`.
 */
function serialize(pattern: TextPattern): string {
  const seen = new Map<object, number>();
  const out: string[] = [];
  const write = (v: unknown): void => {
    if (v === null || typeof v !== "object") return void out.push(JSON.stringify(v));
    const ref = seen.get(v);
    if (ref !== undefined) return void out.push(`{"$ref":${ref}}`);
    seen.set(v, seen.size);
    if (Array.isArray(v)) {
      out.push("[");
      v.forEach((x, i) => (i > 0 && out.push(","), write(x)));
      out.push("]");
      return;
    }
    out.push("{");
    let first = true;
    for (const [key, x] of Object.entries(v)) {
      if (x === undefined) continue;
      if (!first) out.push(",");
      first = false;
      out.push(JSON.stringify(key), ":");
      write(x);
    }
    out.push("}");
  };
  write(pattern);
  return out.join("");
}

/**
 * A 64-bit fingerprint of a string, hex, with its length: FNV-1a (32 bit) from two offset bases
 * (the standard one and its bitwise complement), so two patterns share a key with chance ~2⁻⁶⁴.
 */
function fnv1a(text: string): string {
  let h = 0x811c9dc5, g = ~0x811c9dc5 >>> 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h = Math.imul(h ^ c, 0x01000193) >>> 0;
    g = Math.imul(g ^ c, 0x01000193) >>> 0;
  }
  const hex = (x: number) => x.toString(16).padStart(8, "0");
  return `${hex(h)}${hex(g)}-${text.length}`;
}

/**
 * Compiles `pattern` into a {@link TextPatternDfa}.
 *
 * A DFA state is the set of NFA states with a byte edge in an ε-closure (the "important" states,
 * Aho et al. §3.9.1) plus whether the closure holds the final state; sets live in one flat int32
 * pool, found again through an open-addressing hash table, so a pattern of ~10⁶ states compiles
 * without a JavaScript object per state.
 * @throws {TextPatternError} on an empty `oneOf`, an empty language, or more than `maxStates`
 *   DFA states.
 */
export function compileTextPattern(
  pattern: TextPattern,
  options: { maxStates?: number } = {},
): TextPatternDfa {
  // each phase in its own function, so the previous phase's tables can be freed
  const nfa = buildNfa(pattern);
  const dfa = subsetConstruction(nfa, options.maxStates ?? DEFAULT_MAX_STATES);
  return pruned(dfa, fnv1a(serialize(pattern)));
}

/** The ε-NFA of a pattern as flat arrays (see {@link Nfa}). */
interface NfaTables {
  byte: Int32Array;
  target: Int32Array;
  epsilon: number[][];
  start: number;
  final: number;
}

function buildNfa(pattern: TextPattern): NfaTables {
  const nfa = new Nfa();
  const final = nfa.state();
  const start = nfa.add(pattern, final);
  return { byte: nfa.byte.view(), target: nfa.target.view(), epsilon: nfa.epsilon, start, final };
}

/** A DFA before pruning: CSR edges (ascending bytes per state) and acceptance. */
interface RawDfa {
  offsets: Int32Array;
  edgeBytes: Int32Array;
  edgeTargets: Int32Array;
  accepting: Int32Array;
}

/**
 * The subset construction over `nfa`.
 * @throws {TextPatternError} past `maxStates` states.
 */
function subsetConstruction(nfa: NfaTables, maxStates: number): RawDfa {
  const { byte: nfaByte, target: nfaTarget, epsilon, start, final } = nfa;
  // ε-closure of `seeds` → the sorted important states in `closed`, and whether final is in it
  const mark = new Int32Array(nfaByte.length).fill(-1);
  let stamp = 0;
  const stack = new IntList();
  const closed = new IntList();
  const closure = (seeds: ArrayLike<number>, count: number): boolean => {
    closed.length = stack.length = 0;
    if (count === 1 && epsilon[seeds[0]].length === 0) { // a byte state (or the final one)
      if (nfaByte[seeds[0]] >= 0) closed.push(seeds[0]);
      return seeds[0] === final;
    }
    stamp++;
    let hasFinal = false;
    for (let i = 0; i < count; i++) {
      if (mark[seeds[i]] !== stamp) (mark[seeds[i]] = stamp, stack.push(seeds[i]));
    }
    while (stack.length > 0) {
      const s = stack.data[--stack.length];
      if (s === final) hasFinal = true;
      if (nfaByte[s] >= 0) closed.push(s);
      for (const t of epsilon[s]) if (mark[t] !== stamp) (mark[t] = stamp, stack.push(t));
    }
    closed.view().sort();
    return hasFinal;
  };

  // DFA states: their sets in `pool` (setStart[d] .. setStart[d + 1]), acceptance, hash table
  const pool = new IntList(1 << 16);
  const setStart = new IntList();
  const accepting = new IntList();
  let table = new Int32Array(1 << 12).fill(-1);
  const hashOf = (set: Int32Array, fin: boolean): number => {
    let h = fin ? 0x9e3779b1 : 0x811c9dc5;
    for (let i = 0; i < set.length; i++) h = Math.imul(h ^ set[i], 0x01000193);
    return h >>> 0;
  };
  const sameSet = (d: number, set: Int32Array, fin: boolean): boolean => {
    const from = setStart.data[d],
      to = d + 1 < setStart.length ? setStart.data[d + 1] : pool.length;
    if (to - from !== set.length || (accepting.data[d] === 1) !== fin) return false;
    for (let i = 0; i < set.length; i++) if (pool.data[from + i] !== set[i]) return false;
    return true;
  };
  const insert = (d: number, h: number): void => {
    let i = h & (table.length - 1);
    while (table[i] !== -1) i = (i + 1) & (table.length - 1);
    table[i] = d;
  };
  /** The DFA state of the set in `closed` (added when new). */
  const stateOf = (fin: boolean): number => {
    const set = closed.view();
    const h = hashOf(set, fin);
    for (let i = h & (table.length - 1); table[i] !== -1; i = (i + 1) & (table.length - 1)) {
      if (sameSet(table[i], set, fin)) return table[i];
    }
    const d = setStart.length;
    if (d >= maxStates) {
      throw new TextPatternError(
        `Cannot compile the text pattern as its automaton must have ≤ ${maxStates} states: it has more`,
      );
    }
    setStart.push(pool.length);
    for (let i = 0; i < set.length; i++) pool.push(set[i]);
    accepting.push(fin ? 1 : 0);
    if ((d + 1) * 2 > table.length) { // keep the load ≤ 1/2
      table = new Int32Array(table.length * 2).fill(-1);
      for (let e = 0; e < d; e++) {
        const to = setStart.data[e + 1];
        insert(e, hashOf(pool.data.subarray(setStart.data[e], to), accepting.data[e] === 1));
      }
      insert(d, h);
    } else insert(d, h);
    return d;
  };

  // subset construction; each state's edges are appended in ascending byte order (CSR)
  stateOf(closure([start], 1));
  const offsets = new IntList();
  const edgeBytes = new IntList();
  const edgeTargets = new IntList();
  const moves: number[] = [];
  const bytes: number[] = [];
  const byteSeen = new Int32Array(256);
  for (let d = 0; d < setStart.length; d++) {
    offsets.push(edgeBytes.length);
    const from = setStart.data[d],
      to = d + 1 < setStart.length ? setStart.data[d + 1] : pool.length;
    // the distinct bytes out of the set, ascending (usually one)
    bytes.length = 0;
    for (let i = from; i < to; i++) {
      const b = nfaByte[pool.data[i]];
      if (byteSeen[b] !== d + 1) (byteSeen[b] = d + 1, bytes.push(b));
    }
    if (bytes.length > 1) bytes.sort((x, y) => x - y);
    for (const b of bytes) {
      moves.length = 0;
      // index pool.data afresh: stateOf may grow the pool (its data array is replaced)
      for (let i = from; i < to; i++) {
        const s = pool.data[i];
        if (nfaByte[s] === b) moves.push(nfaTarget[s]);
      }
      const t = stateOf(closure(moves, moves.length));
      edgeBytes.push(b);
      edgeTargets.push(t);
    }
  }
  offsets.push(edgeBytes.length);
  return {
    offsets: offsets.view(),
    edgeBytes: edgeBytes.view(),
    edgeTargets: edgeTargets.view(),
    accepting: accepting.view(),
  };
}

/**
 * The automaton of `raw` with distances and canonical bytes, its dead states removed.
 * @throws {TextPatternError} when the start state cannot reach acceptance.
 */
function pruned(raw: RawDfa, id: string): TextPatternDfa {
  const { offsets: off, edgeBytes: eb, edgeTargets: et, accepting: acceptingOf } = raw;
  const n = acceptingOf.length;

  // backward BFS from the accepting states over the reversed edges (CSR by target)
  const revStart = new Int32Array(n + 1);
  for (let e = 0; e < et.length; e++) revStart[et[e] + 1]++;
  for (let s = 0; s < n; s++) revStart[s + 1] += revStart[s];
  const revSource = new Int32Array(et.length);
  const fill = revStart.slice(0, n);
  for (let s = 0; s < n; s++) {
    for (let e = off[s]; e < off[s + 1]; e++) revSource[fill[et[e]]++] = s;
  }
  const distance = new Int32Array(n).fill(-1);
  const queue = new Int32Array(n);
  let tail = 0;
  for (let s = 0; s < n; s++) if (acceptingOf[s]) (distance[s] = 0, queue[tail++] = s);
  for (let q = 0; q < tail; q++) {
    const t = queue[q];
    for (let e = revStart[t]; e < revStart[t + 1]; e++) {
      const p = revSource[e];
      if (distance[p] < 0) (distance[p] = distance[t] + 1, queue[tail++] = p);
    }
  }
  if (distance[0] < 0) {
    throw new TextPatternError(
      "Cannot compile the text pattern as it must accept some text: it accepts none",
    );
  }
  // renumber the live states (the start stays 0), dropping edges into dead ones
  const renumber = new Int32Array(n).fill(NO_STATE);
  let live = 0;
  for (let s = 0; s < n; s++) if (distance[s] >= 0) renumber[s] = live++;
  let liveEdges = 0;
  for (let s = 0; s < n; s++) {
    if (renumber[s] === NO_STATE) continue;
    for (let e = off[s]; e < off[s + 1]; e++) if (renumber[et[e]] !== NO_STATE) liveEdges++;
  }
  const outOffsets = new Int32Array(live + 1);
  const outBytes = new Uint8Array(liveEdges);
  const outTargets = new Int32Array(liveEdges);
  const acc = new Uint8Array(live);
  const dist = new Int32Array(live);
  const canonical = new Int16Array(live).fill(-1);
  let k = 0;
  for (let s = 0; s < n; s++) {
    const r = renumber[s];
    if (r === NO_STATE) continue;
    outOffsets[r] = k;
    acc[r] = acceptingOf[s];
    dist[r] = distance[s];
    for (let e = off[s]; e < off[s + 1]; e++) {
      const t = et[e], b = eb[e];
      if (renumber[t] === NO_STATE) continue;
      outBytes[k] = b;
      outTargets[k++] = renumber[t];
      // bytes ascend, so the first byte that lowers the distance is the lowest
      if (!acceptingOf[s] && canonical[r] < 0 && distance[t] === distance[s] - 1) canonical[r] = b;
    }
  }
  outOffsets[live] = k;
  return new TextPatternDfa({
    offsets: outOffsets,
    edgeBytes: outBytes,
    edgeTargets: outTargets,
    accepting: acc,
    distance: dist,
    canonical,
    id,
  });
}

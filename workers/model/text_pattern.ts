/**
 * Text patterns for structured generation: a small regular grammar (literals, sequences, choices,
 * repetitions) compiled into a deterministic automaton over UTF-8 bytes, so a JSON string value
 * can be constrained to the sentences of a grammar (json_automaton.ts, `JsonStringField.pattern`)
 * — e.g. the skill sentences an environment's reference analyzer writes, so every skill an
 * analyzer decodes is one of them.
 *
 * Compilation: Thompson's construction of an ε-NFA, then the subset construction (Aho, Lam,
 * Sethi & Ullman, "Compilers", 2nd ed., §3.7.1 and §3.7.4). Each DFA state also gets its distance
 * (fewest bytes to an accepting state, by a backward breadth-first search) and its canonical next
 * byte (the lowest byte that lowers the distance by one), so the shortest completion from any
 * state is known; states that cannot reach acceptance are removed (no transition enters them).
 */

/**
 * A regular text pattern:
 * - a string matches itself (its UTF-8 bytes);
 * - `{ seq }` each part in order; `{ oneOf }` any one alternative (≥ 1);
 * - `{ repeat, min, separator }` the item `min` (0 or 1, default 1) or more times, with
 *   `separator` between two consecutive items (e.g. `up then left then up`).
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

/** Default bound on DFA states (each costs 1 KiB of transitions). */
const DEFAULT_MAX_STATES = 65_536;

/**
 * The compiled automaton of a {@link TextPattern}. State 0 is the start state; every state can
 * reach acceptance. `next` is (states × 256,) int32 with {@link NO_STATE} for a missing edge.
 */
export class TextPatternDfa {
  /** Transitions: `next[s * 256 + b]` is the state after byte `b` from state `s`. */
  readonly next: Int32Array;
  /** (states,) 1 where the text so far is a whole sentence of the pattern. */
  readonly accepting: Uint8Array;
  /** (states,) fewest bytes from the state to an accepting state. */
  readonly distance: Int32Array;
  /** (states,) lowest byte on a shortest path to acceptance, −1 on accepting states. */
  readonly canonical: Int16Array;
  /** Short identifier of the pattern (a 64-bit FNV-1a fingerprint of its JSON), for cache keys. */
  readonly id: string;

  constructor(parts: {
    next: Int32Array;
    accepting: Uint8Array;
    distance: Int32Array;
    canonical: Int16Array;
    id: string;
  }) {
    this.next = parts.next;
    this.accepting = parts.accepting;
    this.distance = parts.distance;
    this.canonical = parts.canonical;
    this.id = parts.id;
  }

  /** Number of states. */
  get size(): number {
    return this.accepting.length;
  }

  /** The bytes each state accepts (a set over 0–255, across all states). */
  alphabet(): Set<number> {
    const out = new Set<number>();
    for (let i = 0; i < this.next.length; i++) if (this.next[i] !== NO_STATE) out.add(i & 255);
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
      s = this.next[s * 256 + b];
      if (s === NO_STATE) return NO_STATE;
    }
    return s;
  }

  /** The shortest sentence of the pattern (the canonical completion of the start state). */
  shortest(): string {
    const bytes: number[] = [];
    for (let s = 0; !this.accepting[s]; s = this.next[s * 256 + this.canonical[s]]) {
      bytes.push(this.canonical[s]);
    }
    return new TextDecoder().decode(Uint8Array.from(bytes));
  }

  /** So that a schema holding this automaton serialises to a short cache key. */
  toJSON(): { text_pattern: string } {
    return { text_pattern: this.id };
  }
}

/** ε-NFA under construction: per state, byte edges and ε edges. */
class Nfa {
  readonly byteEdges: [number, number][][] = []; // state → [byte, target][]
  readonly epsilon: number[][] = [];

  state(): number {
    this.byteEdges.push([]);
    this.epsilon.push([]);
    return this.byteEdges.length - 1;
  }

  /** Adds the fragment of `p` from `from`; returns its end state. */
  add(p: TextPattern, from: number): number {
    if (typeof p === "string") {
      let at = from;
      for (const b of new TextEncoder().encode(p)) {
        const to = this.state();
        this.byteEdges[at].push([b, to]);
        at = to;
      }
      return at;
    }
    if ("seq" in p) return p.seq.reduce((at: number, part) => this.add(part, at), from);
    if ("oneOf" in p) {
      if (p.oneOf.length === 0) {
        throw new TextPatternError(
          "Cannot compile the text pattern as oneOf must hold ≥ 1 alternative",
        );
      }
      const end = this.state();
      for (const alt of p.oneOf) {
        const start = this.state();
        this.epsilon[from].push(start);
        this.epsilon[this.add(alt, start)].push(end);
      }
      return end;
    }
    // repeat: item (separator item)*, optionally skipped as a whole when min is 0
    const loop = this.state();
    const end = this.state();
    this.epsilon[from].push(loop);
    if (p.min === 0) this.epsilon[from].push(end);
    const itemEnd = this.add(p.repeat, loop);
    this.epsilon[itemEnd].push(end);
    const again = p.separator === undefined ? itemEnd : this.add(p.separator, itemEnd);
    this.epsilon[again].push(loop);
    return end;
  }
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
 * @throws {TextPatternError} on an empty `oneOf`, an empty language, or more than `maxStates`
 *   DFA states.
 */
export function compileTextPattern(
  pattern: TextPattern,
  options: { maxStates?: number } = {},
): TextPatternDfa {
  const maxStates = options.maxStates ?? DEFAULT_MAX_STATES;
  const nfa = new Nfa();
  const start = nfa.state();
  const final = nfa.add(pattern, start);

  const closure = (seeds: number[]): number[] => {
    const seen = new Set(seeds);
    const stack = [...seeds];
    while (stack.length > 0) {
      for (const t of nfa.epsilon[stack.pop()!]) {
        if (!seen.has(t)) (seen.add(t), stack.push(t));
      }
    }
    return [...seen].sort((a, b) => a - b);
  };

  // subset construction
  const sets: number[][] = [closure([start])];
  const index = new Map<string, number>([[sets[0].join(","), 0]]);
  const edges: Map<number, number>[] = [];
  for (let d = 0; d < sets.length; d++) {
    const moves = new Map<number, number[]>();
    for (const s of sets[d]) {
      for (const [b, t] of nfa.byteEdges[s]) {
        const list = moves.get(b);
        if (list) list.push(t);
        else moves.set(b, [t]);
      }
    }
    const out = new Map<number, number>();
    for (const [b, targets] of moves) {
      const set = closure(targets);
      const key = set.join(",");
      let id = index.get(key);
      if (id === undefined) {
        if (sets.length >= maxStates) {
          throw new TextPatternError(
            `Cannot compile the text pattern as its automaton must have ≤ ${maxStates} states: it has more`,
          );
        }
        id = sets.length;
        sets.push(set);
        index.set(key, id);
      }
      out.set(b, id);
    }
    edges.push(out);
  }

  const n = sets.length;
  const accepting = Uint8Array.from(sets, (set) => (set.includes(final) ? 1 : 0));
  // backward BFS from the accepting states
  const reverse: number[][] = Array.from({ length: n }, () => []);
  edges.forEach((out, s) => out.forEach((t) => reverse[t].push(s)));
  const distance = new Int32Array(n).fill(-1);
  const queue: number[] = [];
  for (let s = 0; s < n; s++) if (accepting[s]) (distance[s] = 0, queue.push(s));
  for (let q = 0; q < queue.length; q++) {
    for (const p of reverse[queue[q]]) {
      if (distance[p] < 0) (distance[p] = distance[queue[q]] + 1, queue.push(p));
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
  const next = new Int32Array(live * 256).fill(NO_STATE);
  const acc = new Uint8Array(live);
  const dist = new Int32Array(live);
  const canonical = new Int16Array(live).fill(-1);
  for (let s = 0; s < n; s++) {
    const r = renumber[s];
    if (r === NO_STATE) continue;
    acc[r] = accepting[s];
    dist[r] = distance[s];
    for (const [b, t] of edges[s]) {
      if (renumber[t] === NO_STATE) continue;
      next[r * 256 + b] = renumber[t];
      if (
        !accepting[s] && distance[t] === distance[s] - 1 && (canonical[r] < 0 || b < canonical[r])
      ) {
        canonical[r] = b;
      }
    }
  }
  return new TextPatternDfa({
    next,
    accepting: acc,
    distance: dist,
    canonical,
    id: fnv1a(JSON.stringify(pattern)),
  });
}

/**
 * A byte-level automaton that accepts exactly the prefixes of one JSON object with a fixed,
 * ordered list of string fields, e.g. `{"episode_skill": "…", "episode_summary": "…"}` — the
 * character-level half of structured generation (constrained_decoding.ts is the token half).
 *
 * Accepted language (RFC 8259 JSON, UTF-8; ws = space, tab, LF, CR, at most `maxWhitespace`
 * bytes per gap):
 *
 *     ws { ws "k1" ws : ws "v1" ws , ws "k2" ws : ws "v2" ws }
 *
 * Values are JSON strings: every escape of RFC 8259 §7 (`\" \\ \/ \b \f \n \r \t \uXXXX`, a
 * `\u` escape may not name a surrogate), no raw control byte, and raw UTF-8 that is well formed
 * (RFC 3629 §4: no overlong form, no surrogate, nothing past U+10FFFF). Per field, the decoded
 * value holds at most `maxUnits` UTF-16 code units (a JS string's `length`; an escape counts as
 * the one unit it decodes to), optionally at least one letter or digit (`\p{L}`/`\p{N}`), and
 * no raw code point of `forbiddenCodePoints`. Nothing follows the closing `}`. A field with a
 * `pattern` (text_pattern.ts) instead holds exactly one sentence of that pattern, written raw
 * (no escapes) and at most `maxUnits` bytes long.
 *
 * The state is a row of `STATE_FIELDS` int32 in a caller-owned buffer, so that a walk over a
 * token trie copies and steps states without allocating (see `JsonObjectAutomaton.step`).
 */
import { NO_STATE, type TextPatternDfa } from "./text_pattern.ts";

/** One string field of the object, in the order it must be written. */
export interface JsonStringField {
  /** The key: printable ASCII without `"` or `\`. */
  name: string;
  /** Most UTF-16 code units of the decoded value (≥ 1). */
  maxUnits: number;
  /** The value must hold a letter or digit (`\p{L}` or `\p{N}`). Default false. */
  requireAlnum?: boolean;
  /**
   * The value must be a sentence of this compiled pattern, raw bytes only; `maxUnits` then
   * bounds its UTF-8 bytes and `requireAlnum` is not used. Its sentences must hold no control
   * byte, `"`, `\\` or code point of `forbiddenCodePoints`, and its shortest must fit `maxUnits`.
   */
  pattern?: TextPatternDfa;
}

/** The object's shape. */
export interface JsonObjectSchema {
  /** Its string fields, in order (≥ 1, distinct names). */
  fields: readonly JsonStringField[];
  /** Most whitespace bytes in each gap between tokens of the object (default 4). */
  maxWhitespace?: number;
  /**
   * Code points a value may not hold raw (escaped as `\uXXXX` they are allowed), e.g. curly
   * quotes that a lenient reader turns into `"`. Each must be ≥ U+0080 and not end in a
   * continuation byte 0x80 (its low 6 bits non-zero), so the automaton's canonical completion
   * (lowest continuation bytes) never writes one.
   */
  forbiddenCodePoints?: readonly number[];
}

/** Thrown when a schema cannot be compiled into an automaton. */
export class JsonSchemaError extends Error {
  override name = "JsonSchemaError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** Int32 words per automaton state. */
export const STATE_FIELDS = 11;
// word offsets of a state row
const POS = 0; // index into the op program
const WS = 1; // whitespace bytes taken in the current gap
const LEN = 2; // UTF-16 units of the current value so far
const ALNUM = 3; // 1 once the current value holds a letter or digit
const ESC = 4; // 0 none, 1 after `\`, 2..5 after `\u` and 0..3 hex digits
const HEX = 5; // value of the hex digits read so far
const NEED = 6; // UTF-8 continuation bytes still needed
const LO = 7; // lowest allowed next continuation byte
const HI = 8; // highest allowed next continuation byte
const CP = 9; // code point bits read so far
const PAT = 10; // state of the current value's pattern automaton (0 at a value's start)

// op kinds of the program
const OP_WS = 0, OP_BYTE = 1, OP_STRING = 2, OP_DONE = 3;

const QUOTE = 0x22, BACKSLASH = 0x5c;

/**
 * Checks that a field's pattern writes no byte a raw JSON string cannot hold (control bytes, `"`,
 * `\\`), no code point of `forbidden` (its values are raw, never escaped) and that its shortest
 * sentence fits `maxUnits` bytes.
 * @throws {JsonSchemaError} otherwise.
 */
function checkPattern(f: JsonStringField, forbidden: readonly number[]): void {
  const pattern = f.pattern!;
  // a sentence holds cp raw iff its UTF-8 bytes lead on from some state (every state is live,
  // and cp's lead byte cannot continue another character, so the bytes start a character there)
  for (const cp of forbidden) {
    const bytes = new TextEncoder().encode(String.fromCodePoint(cp));
    for (let s = 0; s < pattern.size; s++) {
      let at = s;
      for (const b of bytes) if (at !== NO_STATE) at = pattern.step(at, b);
      if (at !== NO_STATE) {
        throw new JsonSchemaError(
          `Cannot compile the JSON schema as the pattern of ${f.name} must write no forbidden code point: it writes U+${
            cp.toString(16).toUpperCase().padStart(4, "0")
          }`,
        );
      }
    }
  }
  const bad = [...pattern.alphabet()].find((b) => b < 0x20 || b === QUOTE || b === BACKSLASH);
  if (bad !== undefined) {
    throw new JsonSchemaError(
      `Cannot compile the JSON schema as the pattern of ${f.name} must write no control byte, " or \\: it writes byte ${bad}`,
    );
  }
  if (pattern.distance[0] > f.maxUnits) {
    throw new JsonSchemaError(
      `Cannot compile the JSON schema as maxUnits of ${f.name} must hold the pattern's shortest sentence (${
        pattern.distance[0]
      } bytes): current value is ${f.maxUnits}`,
    );
  }
}
const SIMPLE_ESCAPES = new Set(Array.from('"\\/bfnrt', (c) => c.charCodeAt(0)));
const isWhitespace = (b: number) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
const isAsciiAlnum = (b: number) =>
  (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a);
const hexValue = (b: number) =>
  b >= 0x30 && b <= 0x39
    ? b - 0x30
    : b >= 0x61 && b <= 0x66
    ? b - 0x57
    : b >= 0x41 && b <= 0x46
    ? b - 0x37
    : -1;
const ALNUM_RE = /[\p{L}\p{N}]/u;
const isAlnumCodePoint = (cp: number) => ALNUM_RE.test(String.fromCodePoint(cp));

/** The compiled automaton of one `JsonObjectSchema` (see module doc). */
export class JsonObjectAutomaton {
  readonly schema: JsonObjectSchema;
  /** Op program: kind, literal byte (OP_BYTE) or field index (OP_STRING). */
  readonly #kind: Uint8Array;
  readonly #arg: Int32Array;
  readonly #maxWs: number;
  readonly #maxUnits: Int32Array;
  readonly #requireAlnum: Uint8Array;
  readonly #forbidden: Set<number>;
  /** Per field, its pattern automaton or null. */
  readonly #patterns: (TextPatternDfa | null)[];
  /** Per field, the largest distance to acceptance of its pattern's states (0 without one). */
  readonly #maxDistance: Int32Array;

  /** @throws {JsonSchemaError} on an empty field list, a bad key, bound or forbidden code point. */
  constructor(schema: JsonObjectSchema) {
    const { fields } = schema;
    const maxWs = schema.maxWhitespace ?? 4;
    if (fields.length === 0) {
      throw new JsonSchemaError("Cannot compile the JSON schema as it must have ≥ 1 field");
    }
    if (!(Number.isInteger(maxWs) && maxWs >= 0 && maxWs <= 64)) {
      throw new JsonSchemaError(
        `Cannot compile the JSON schema as maxWhitespace must be an integer in [0, 64]: current value is ${maxWs}`,
      );
    }
    const names = new Set<string>();
    for (const f of fields) {
      if (!/^[\x20\x21\x23-\x5b\x5d-\x7e]+$/.test(f.name) || names.has(f.name)) {
        throw new JsonSchemaError(
          `Cannot compile the JSON schema as field names must be distinct printable ASCII without " or \\: current value is ${
            JSON.stringify(f.name)
          }`,
        );
      }
      names.add(f.name);
      if (!(Number.isInteger(f.maxUnits) && f.maxUnits >= 1 && f.maxUnits <= 1 << 20)) {
        throw new JsonSchemaError(
          `Cannot compile the JSON schema as maxUnits of ${f.name} must be an integer in [1, 2^20]: current value is ${f.maxUnits}`,
        );
      }
    }
    for (const cp of schema.forbiddenCodePoints ?? []) {
      if (!(Number.isInteger(cp) && cp >= 0x80 && cp <= 0x10ffff && (cp & 0x3f) !== 0)) {
        throw new JsonSchemaError(
          `Cannot compile the JSON schema as a forbidden code point must be in [U+0080, U+10FFFF] with low 6 bits non-zero: current value is ${cp}`,
        );
      }
    }
    for (const f of fields) if (f.pattern) checkPattern(f, schema.forbiddenCodePoints ?? []);
    const kind: number[] = [], arg: number[] = [];
    const op = (k: number, a = 0) => (kind.push(k), arg.push(a));
    const literal = (text: string) => {
      for (const c of text) op(OP_BYTE, c.charCodeAt(0));
    };
    op(OP_WS);
    literal("{");
    fields.forEach((f, i) => {
      if (i > 0) (op(OP_WS), literal(","));
      op(OP_WS);
      literal(`"${f.name}"`);
      op(OP_WS);
      literal(":");
      op(OP_WS);
      literal('"');
      op(OP_STRING, i);
    });
    op(OP_WS);
    literal("}");
    op(OP_DONE);
    this.schema = schema;
    this.#kind = Uint8Array.from(kind);
    this.#arg = Int32Array.from(arg);
    this.#maxWs = maxWs;
    this.#maxUnits = Int32Array.from(fields, (f) => f.maxUnits);
    this.#requireAlnum = Uint8Array.from(fields, (f) => (f.requireAlnum ? 1 : 0));
    this.#forbidden = new Set(schema.forbiddenCodePoints ?? []);
    this.#patterns = fields.map((f) => f.pattern ?? null);
    this.#maxDistance = Int32Array.from(
      fields,
      (f) => f.pattern ? f.pattern.distance.reduce((a, b) => Math.max(a, b), 0) : 0,
    );
  }

  /** Writes the start state into `st` at word offset `o`. */
  init(st: Int32Array, o: number): void {
    st.fill(0, o, o + STATE_FIELDS);
    st[o + LO] = 0x80;
    st[o + HI] = 0xbf;
  }

  /** True when the state at `o` has closed the object (no byte is accepted any more). */
  isDone(st: Int32Array, o: number): boolean {
    return this.#kind[st[o + POS]] === OP_DONE;
  }

  /**
   * Advances the state at `o` over byte `b` in place. Returns false (state then unspecified)
   * when `b` cannot follow: the text would no longer be a prefix of an accepted object.
   */
  step(st: Int32Array, o: number, b: number): boolean {
    while (true) {
      const pos = st[o + POS];
      switch (this.#kind[pos]) {
        case OP_WS:
          if (isWhitespace(b) && st[o + WS] < this.#maxWs) {
            st[o + WS]++;
            return true;
          }
          st[o + POS] = pos + 1; // the gap ends; the next op must take b
          st[o + WS] = 0;
          continue;
        case OP_BYTE:
          if (b !== this.#arg[pos]) return false;
          st[o + POS] = pos + 1;
          return true;
        case OP_STRING:
          return this.#stringByte(st, o, this.#arg[pos], b);
        default:
          return false; // done: nothing may follow
      }
    }
  }

  /** One byte inside the string value of field `f`. */
  #stringByte(st: Int32Array, o: number, f: number, b: number): boolean {
    const pattern = this.#patterns[f];
    if (pattern) return this.#patternByte(st, o, pattern, this.#maxUnits[f], b);
    if (st[o + NEED] > 0) { // a continuation byte of a multi-byte character
      if (b < st[o + LO] || b > st[o + HI]) return false;
      st[o + CP] = (st[o + CP] << 6) | (b & 0x3f);
      st[o + LO] = 0x80;
      st[o + HI] = 0xbf;
      if (--st[o + NEED] > 0) return true;
      const cp = st[o + CP];
      if (this.#forbidden.has(cp)) return false;
      if (!st[o + ALNUM] && this.#requireAlnum[f] && isAlnumCodePoint(cp)) st[o + ALNUM] = 1;
      return true;
    }
    const esc = st[o + ESC];
    if (esc === 1) { // after a backslash
      if (b === 0x75) st[o + ESC] = 2, st[o + HEX] = 0;
      else if (SIMPLE_ESCAPES.has(b)) st[o + ESC] = 0; // none of these is a letter or digit
      else return false;
      return true;
    }
    if (esc >= 2) { // inside \uXXXX
      const d = hexValue(b);
      if (d < 0) return false;
      const hex = st[o + HEX] * 16 + d;
      if (esc === 3 && hex >= 0xd8 && hex <= 0xdf) return false; // a surrogate
      st[o + HEX] = hex;
      if (esc < 5) {
        st[o + ESC] = esc + 1;
        return true;
      }
      st[o + ESC] = 0;
      if (!st[o + ALNUM] && this.#requireAlnum[f] && isAlnumCodePoint(hex)) st[o + ALNUM] = 1;
      return true;
    }
    if (b === QUOTE) { // closes the value
      if (this.#requireAlnum[f] && !st[o + ALNUM]) return false;
      st[o + POS]++;
      st[o + LEN] = 0;
      st[o + ALNUM] = 0;
      return true;
    }
    if (b < 0x20) return false; // raw control characters are not JSON
    // a new character: it takes 1 unit (2 for 4-byte UTF-8); while the value still needs a
    // letter or digit, one unit stays free for it unless this character is one
    const units = b >= 0xf0 ? 2 : 1;
    const known = b < 0x80 && isAsciiAlnum(b);
    const reserve = this.#requireAlnum[f] && !st[o + ALNUM] && !known ? 1 : 0;
    if (st[o + LEN] + units + reserve > this.#maxUnits[f]) return false;
    if (b < 0x80) {
      if (b === BACKSLASH) st[o + ESC] = 1;
      else if (known) st[o + ALNUM] = 1;
      st[o + LEN] += units;
      return true;
    }
    // RFC 3629 §4: lead bytes and the range of the first continuation byte
    let need = 0, lo = 0x80, hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) lo = 0xa0;
      if (b === 0xed) hi = 0x9f; // no surrogates
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) lo = 0x90;
      if (b === 0xf4) hi = 0x8f;
    } else return false;
    st[o + NEED] = need;
    st[o + LO] = lo;
    st[o + HI] = hi;
    st[o + CP] = b & (need === 1 ? 0x1f : need === 2 ? 0x0f : 0x07);
    st[o + LEN] += units;
    return true;
  }

  /** One byte inside a value held to `pattern` (raw bytes, at most `maxBytes`). */
  #patternByte(
    st: Int32Array,
    o: number,
    pattern: TextPatternDfa,
    maxBytes: number,
    b: number,
  ): boolean {
    const at = st[o + PAT];
    if (b === QUOTE) { // closes the value: only a whole sentence
      if (!pattern.accepting[at]) return false;
      st[o + POS]++;
      st[o + LEN] = 0;
      st[o + PAT] = 0;
      return true;
    }
    const to = pattern.step(at, b);
    // the byte must lead on, and the shortest sentence through it must still fit
    if (to === NO_STATE || st[o + LEN] + 1 + pattern.distance[to] > maxBytes) return false;
    st[o + PAT] = to;
    st[o + LEN]++;
    return true;
  }

  /**
   * The next byte of the canonical completion from the state at `o`, or -1 when it is done:
   * the lowest allowed continuation byte, `n` after a backslash, `0` inside `\u`, `a` while a
   * value still needs a letter or digit, else the closing quote; outside values, the next
   * literal byte (gaps take no whitespace); in a value held to a pattern, the pattern's
   * canonical byte (its shortest completion), then the quote. Following it from any state reaches
   * done, and the completion of a successor is the rest of the completion (so its token cost can
   * only drop).
   */
  canonicalNext(st: Int32Array, o: number): number {
    let pos = st[o + POS];
    while (this.#kind[pos] === OP_WS) pos++;
    switch (this.#kind[pos]) {
      case OP_BYTE:
        return this.#arg[pos];
      case OP_STRING: {
        const pattern = this.#patterns[this.#arg[pos]];
        if (pattern) return pattern.accepting[st[o + PAT]] ? QUOTE : pattern.canonical[st[o + PAT]];
        if (st[o + NEED] > 0) return st[o + LO];
        if (st[o + ESC] === 1) return 0x6e; // n
        if (st[o + ESC] >= 2) return 0x30; // 0
        if (this.#requireAlnum[this.#arg[pos]] && !st[o + ALNUM]) return 0x61; // a
        return QUOTE;
      }
      default:
        return -1;
    }
  }

  /**
   * The one byte the state at `o` accepts next, or -1 when it accepts none (done) or several —
   * a step of jump-forward decoding (constrained_decoding.ts). Outside values a literal byte is
   * forced only where no whitespace may come first (`maxWhitespace` 0, or the gap is full). In a
   * pattern value the byte is forced when the pattern state has one out-edge that fits the byte
   * bound and is not accepting; an accepting state with no such edge forces the closing quote. A
   * free-text value forces its closing quote only when its bound leaves room for nothing else.
   * Equals the unique `b` in 0–255 with `step(st, o, b)` true, when there is one (tested).
   */
  forcedNext(st: Int32Array, o: number): number {
    let pos = st[o + POS];
    if (this.#kind[pos] === OP_WS) {
      if (st[o + WS] < this.#maxWs) return -1; // whitespace or the next byte
      pos++;
    }
    switch (this.#kind[pos]) {
      case OP_BYTE:
        return this.#arg[pos];
      case OP_STRING: {
        const f = this.#arg[pos];
        const pattern = this.#patterns[f];
        if (!pattern) {
          // free text: only the quote once no character fits (the letter is then written)
          const full = st[o + ESC] === 0 && st[o + NEED] === 0 && st[o + LEN] >= this.#maxUnits[f];
          return full ? QUOTE : -1;
        }
        const at = st[o + PAT], room = this.#maxUnits[f] - st[o + LEN] - 1;
        let only = pattern.accepting[at] ? QUOTE : -1;
        for (let e = pattern.offsets[at]; e < pattern.offsets[at + 1]; e++) {
          if (pattern.distance[pattern.edgeTargets[e]] > room) continue;
          if (only >= 0) return -1;
          only = pattern.edgeBytes[e];
        }
        return only;
      }
      default:
        return -1;
    }
  }

  /**
   * The forced byte run from the state at `o`: `forcedNext` followed while it gives a byte, at
   * most `maxBytes` bytes. The state at `o` is not changed; `scratch` must have room for one
   * state at offset `so`. Every accepted continuation of the state starts with these bytes.
   */
  forcedBytes(
    st: Int32Array,
    o: number,
    scratch: Int32Array,
    so = 0,
    maxBytes = Infinity,
  ): number[] {
    scratch.set(st.subarray(o, o + STATE_FIELDS), so);
    const out: number[] = [];
    while (out.length < maxBytes) {
      const b = this.forcedNext(scratch, so);
      if (b < 0) break;
      if (!this.step(scratch, so, b)) {
        throw new Error(`Cannot follow the forced byte ${b} as the automaton must accept it`);
      }
      out.push(b);
    }
    return out;
  }

  /**
   * The canonical completion (bytes) of the state at `o` (see `canonicalNext`); `scratch`
   * must have room for one state at offset `so`.
   */
  completion(st: Int32Array, o: number, scratch: Int32Array, so = 0): number[] {
    scratch.set(st.subarray(o, o + STATE_FIELDS), so);
    const out: number[] = [];
    for (let b = this.canonicalNext(scratch, so); b >= 0; b = this.canonicalNext(scratch, so)) {
      if (!this.step(scratch, so, b)) {
        throw new Error(`Cannot complete the JSON object as byte ${b} must be accepted`);
      }
      out.push(b);
    }
    return out;
  }

  /**
   * A number that identifies the canonical completion of the state at `o` (equal keys, equal
   * completions): the op position with the string sub-state that the completion reads.
   */
  completionKey(st: Int32Array, o: number): number {
    let pos = st[o + POS];
    while (this.#kind[pos] === OP_WS) pos++;
    if (this.#kind[pos] !== OP_STRING) return pos;
    // a pattern value's completion depends on its pattern state only (negative keys)
    if (this.#patterns[this.#arg[pos]]) return -1 - (pos + this.#kind.length * st[o + PAT]);
    const needsAlnum = this.#requireAlnum[this.#arg[pos]] && !st[o + ALNUM] ? 1 : 0;
    const need = st[o + NEED];
    const lo = need > 0 ? st[o + LO] - 0x80 : 0; // < 64
    // needsAlnum < 2, esc < 8, lo < 64, need < 4: 4096 sub-states per position; the partial
    // code point decides whether the pending character is a letter, so it is part of the key then
    const base = needsAlnum + 2 * (st[o + ESC] + 8 * (lo + 64 * (need + 4 * pos)));
    const span = 4096 * this.#kind.length;
    return needsAlnum && need > 0 ? base + span * (st[o + CP] + 1) : base;
  }

  /**
   * A string that identifies everything the acceptance of the next `lookahead` bytes depends
   * on: the state with its value length replaced by the free room, clamped at `lookahead + 2`
   * (two states with the same key accept the same byte strings of length ≤ lookahead). In a
   * pattern value the i-th byte also needs room for the shortest sentence after it
   * (i + distance ≤ room), so the room is clamped at `lookahead + 2 + ` the pattern's largest
   * distance there.
   */
  maskKey(st: Int32Array, o: number, lookahead: number): string {
    const pos = st[o + POS];
    if (this.#kind[pos] !== OP_STRING) return `${pos}:${st[o + WS]}`;
    const f = this.#arg[pos];
    const room = Math.min(this.#maxUnits[f] - st[o + LEN], lookahead + 2 + this.#maxDistance[f]);
    if (this.#patterns[f]) return `${pos}:p${st[o + PAT]}:${room}`;
    return `${pos}:${room}:${st[o + ALNUM]}:${st[o + ESC]}:${st[o + HEX]}:${st[o + NEED]}:${
      st[o + LO]
    }:${st[o + HI]}:${st[o + CP]}`;
  }
}

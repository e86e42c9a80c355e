/**
 * Lenient recovery of JSON objects from model output (internal to workers/skills).
 *
 * A small policy acting as analyzer (workers/seed/README.md, Algorithm, step 3) writes JSON with
 * prose around it, inside ```json fences, with trailing commas, single quotes, bare keys, raw
 * newlines or stray double quotes inside strings. These helpers find every top-level `{…}` slice
 * and parse it strictly first, then after a conservative repair. Nothing here throws.
 */

const CLOSERS = new Set([",", "}", "]", ":"]);

/** Index of the next non-whitespace character at or after `i` (text.length when none). */
function skipSpace(text: string, i: number): number {
  while (i < text.length && /\s/.test(text[i])) i++;
  return i;
}

/** The last non-whitespace character before `i`, or "" when none. */
function previousNonSpace(text: string, i: number): string {
  let j = i - 1;
  while (j >= 0 && /\s/.test(text[j])) j--;
  return j >= 0 ? text[j] : "";
}

/**
 * Reads a string starting at the quote at `start`. A quote closes the string only when the next
 * non-space character is `, } ] :` or the end of the text; any other quote is content (this is
 * what makes `don't` and `the "box"` survive). Returns the decoded content and the index after
 * the closing quote, or null when the string never closes.
 */
function readString(text: string, start: number): { value: string; end: number } | null {
  const quote = text[start];
  let value = "";
  for (let i = start + 1; i < text.length; i++) {
    const c = text[i];
    if (c === "\\" && i + 1 < text.length) {
      const next = text[i + 1];
      const simple: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f" };
      if (next === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
        value += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
        i += 5;
      } else {
        value += simple[next] ?? next;
        i += 1;
      }
      continue;
    }
    if (c === quote) {
      const after = skipSpace(text, i + 1);
      if (after >= text.length || CLOSERS.has(text[after])) return { value, end: i + 1 };
    }
    value += c;
  }
  return null;
}

/** True when a quote at `i` opens a string: it follows `{ [ , :` (or starts the slice). */
function opensString(text: string, i: number): boolean {
  if (text[i] === '"') return true;
  const prev = previousNonSpace(text, i);
  return prev === "" || prev === "{" || prev === "[" || prev === "," || prev === ":";
}

/** Every balanced top-level `{…}` slice of `text`, in order of appearance. */
export function objectSlices(text: string): string[] {
  const slices: string[] = [];
  let depth = 0;
  let start = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (depth > 0 && (c === '"' || c === "'") && opensString(text, i)) {
      const read = readString(text, i);
      if (read === null) break; // an unterminated string: nothing balanced follows
      i = read.end - 1;
      continue;
    }
    if (c === "{") {
      if (depth === 0) start = i;
      depth++;
    } else if (c === "}" && depth > 0) {
      depth--;
      if (depth === 0) slices.push(text.slice(start, i + 1));
    }
  }
  return slices;
}

/**
 * Rewrites a near-JSON object into JSON: single-quoted and sloppily quoted strings become proper
 * JSON strings, bare identifier keys get quotes, trailing commas before `}`/`]` go away.
 */
export function repairJson(slice: string): string {
  let out = "";
  for (let i = 0; i < slice.length; i++) {
    const c = slice[i];
    if ((c === '"' || c === "'") && opensString(slice, i)) {
      const read = readString(slice, i);
      if (read === null) return out + slice.slice(i); // leave it broken; parse will fail
      out += JSON.stringify(read.value);
      i = read.end - 1;
    } else if (/[A-Za-z_$]/.test(c) && /[{,]/.test(previousNonSpace(slice, i))) {
      const match = /^[A-Za-z_$][\w$-]*/.exec(slice.slice(i));
      const word = match ? match[0] : c;
      const after = skipSpace(slice, i + word.length);
      out += slice[after] === ":" ? JSON.stringify(word) : word;
      i += word.length - 1;
    } else if (c === ",") {
      const after = skipSpace(slice, i + 1);
      if (slice[after] !== "}" && slice[after] !== "]") out += c;
    } else {
      out += c;
    }
  }
  return out;
}

/** Parses `slice` strictly, then repaired; returns the object or null (never throws). */
export function parseObject(slice: string): Record<string, unknown> | null {
  for (const candidate of [slice, repairJson(slice)]) {
    try {
      const value: unknown = JSON.parse(candidate);
      if (value !== null && typeof value === "object" && !Array.isArray(value)) {
        return value as Record<string, unknown>;
      }
    } catch {
      // try the next candidate
    }
  }
  return null;
}

/**
 * The last `key: "value"` pair of `text` whose value is a closed string (either quote style),
 * decoded; null when there is none. A fallback for output whose braces never balance.
 */
export function lastStringField(text: string, key: string): string | null {
  const pattern = new RegExp(`["']?${key}["']?\\s*:\\s*(?=["'])`, "g");
  let found: string | null = null;
  for (const match of text.matchAll(pattern)) {
    const read = readString(text, match.index + match[0].length);
    if (read !== null) found = read.value;
  }
  return found;
}

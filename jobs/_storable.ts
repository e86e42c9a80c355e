/**
 * Internal: text and JSON that Postgres can store. Postgres `text` rejects U+0000 (`invalid byte
 * sequence for encoding "UTF8": 0x00`) and `jsonb` rejects the escape `\u0000` and unpaired
 * UTF-16 surrogates (`unsupported Unicode escape sequence`), so a worker write carrying such a
 * string (an environment's observation, a generated skill, an error quoting either) failed and
 * the job could not even be marked failed. Writers pass their text through these first; each
 * offending character becomes U+FFFD (the Unicode replacement character).
 */

// deno-lint-ignore no-control-regex
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** `text` with U+0000 and unpaired surrogates replaced by U+FFFD (unchanged when it has none). */
export function storableText(text: string): string {
  return text.replace(UNSTORABLE, "\ufffd");
}

/**
 * `JSON.stringify(value)` with every string and object key passed through {@link storableText},
 * so the result is accepted by a `::jsonb` cast.
 */
export function storableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === "string") return storableText(v);
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      const entries = Object.entries(v as Record<string, unknown>);
      if (entries.some(([k]) => storableText(k) !== k)) {
        return Object.fromEntries(entries.map(([k, x]) => [storableText(k), x]));
      }
    }
    return v;
  });
}

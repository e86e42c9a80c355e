/**
 * Limits every JSON request body must meet before schema validation, because zod and Postgres
 * cannot take the body otherwise (each was a 500 before this check):
 *
 * - nesting depth at most {@link MAX_JSON_DEPTH}: zod's recursive `z.json()` (JobSpec
 *   `env.options`) overflows the call stack on a few thousand nested arrays;
 * - no U+0000 and no unpaired UTF-16 surrogate in any string or key: Postgres `jsonb` rejects
 *   both (`unsupported Unicode escape sequence`, `invalid input syntax for type json`), so the
 *   insert of an otherwise valid job failed.
 *
 * The walk is iterative (no recursion, so a hostile depth cannot overflow it) and stops at the
 * first issue.
 */
import type { FieldIssue } from "./errors.ts";
import { formatPath } from "./errors.ts";

/** Deepest accepted nesting of arrays/objects in a request body (the JobSpec itself needs 3). */
export const MAX_JSON_DEPTH = 32;

/** A lone surrogate (high not followed by low, or low not preceded by high), or U+0000. */
// deno-lint-ignore no-control-regex
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The first limit `value` (a parsed JSON document) breaks, as a field issue with the path inside
 * the document in zod's notation (e.g. `env.options.a[0]`); undefined when it meets every limit.
 */
export function jsonLimitIssue(value: unknown): FieldIssue | undefined {
  const stack: { value: unknown; path: PropertyKey[] }[] = [{ value, path: [] }];
  while (stack.length > 0) {
    const { value: v, path } = stack.pop()!;
    if (typeof v === "string") {
      if (UNSTORABLE.test(v)) return unstorable(path, "a string");
      continue;
    }
    if (v === null || typeof v !== "object") continue;
    if (path.length >= MAX_JSON_DEPTH) {
      return {
        path: formatPath(path),
        code: "too_deep",
        message: `JSON must nest at most ${MAX_JSON_DEPTH} arrays/objects deep`,
      };
    }
    if (Array.isArray(v)) {
      v.forEach((item, i) => stack.push({ value: item, path: [...path, i] }));
      continue;
    }
    for (const [key, item] of Object.entries(v)) {
      if (UNSTORABLE.test(key)) return unstorable([...path, key], "a key");
      stack.push({ value: item, path: [...path, key] });
    }
  }
  return undefined;
}

function unstorable(path: readonly PropertyKey[], what: string): FieldIssue {
  return {
    // The path names the key, so it gets the same characters replaced to be storable/printable.
    // deno-lint-ignore no-control-regex
    path: formatPath(path).replace(/[\u0000\ud800-\udfff]/g, "\ufffd"),
    code: "invalid_string",
    message:
      `${what} must not contain U+0000 or an unpaired UTF-16 surrogate (they cannot be stored)`,
  };
}

/**
 * A job's labels (jobs/README.md, "Names and metadata"): `name` (OpenAI fine-tuning calls it
 * `suffix`; both are accepted) and `metadata`, a string → string map with OpenAI's limits (at most
 * 16 keys of at most 64 characters, values of at most 512). They are given at submit beside the
 * JobSpec's fields, stored in their own columns (not in the spec: they do not change what the job
 * does), returned in every job view and filterable in listings.
 */
import { z } from "zod";

/** Longest job name, in characters. */
export const MAX_JOB_NAME_CHARS = 128;
/** Most metadata keys (OpenAI's limit). */
export const MAX_METADATA_KEYS = 16;
/** Longest metadata key, in characters (OpenAI's limit). */
export const MAX_METADATA_KEY_CHARS = 64;
/** Longest metadata value, in characters (OpenAI's limit). */
export const MAX_METADATA_VALUE_CHARS = 512;

/**
 * No control characters: C0 and C1 controls (U+0000–U+001F, U+007F–U+009F), the line and
 * paragraph separators (U+2028, U+2029) and the bidirectional overrides and isolates
 * (U+202A–U+202E, U+2066–U+2069), which reorder what a list or a terminal prints after them.
 */
// deno-lint-ignore no-control-regex
const NO_CONTROL = /^[^\u0000-\u001f\u007f-\u009f\u2028-\u202e\u2066-\u2069]*$/;

/**
 * A job name: 1–128 characters, no control characters (it is printed in lists and titles; see
 * {@link NO_CONTROL}).
 */
export const JobName = z.string().min(1).max(MAX_JOB_NAME_CHARS).regex(NO_CONTROL, {
  message:
    "Cannot use this name as it must not hold control characters (NUL, newline, ESC, C1 controls, line separators, bidirectional overrides, …)",
});

/**
 * A metadata key: 1–64 characters, no control characters. `__proto__` is refused too, by
 * {@link reservedMetadataKeyIssues} (zod's record drops that key before its key schema sees it).
 */
export const MetadataKey = z.string()
  .min(1, { message: "Cannot use this metadata key as it must not be empty" })
  .max(MAX_METADATA_KEY_CHARS, {
    message:
      `Cannot use this metadata key as it must have at most ${MAX_METADATA_KEY_CHARS} characters`,
  })
  .regex(NO_CONTROL, {
    message:
      "Cannot use this metadata key as it must not hold control characters (NUL, newline, C1 controls, line separators, bidirectional overrides, …)",
  });

/** The metadata key refused because a JavaScript object cannot hold it as a plain key. */
export const RESERVED_METADATA_KEY = "__proto__";

/**
 * The issue at `<path>.__proto__` when `metadata` (a parsed JSON object or a null-prototype
 * object) holds `__proto__` as its own key: zod's record would drop it silently (the label lost,
 * or a listing filter ignored), so it is refused. `[]` otherwise.
 */
export function reservedMetadataKeyIssues(
  metadata: unknown,
  path: PropertyKey[] = ["metadata"],
): z.core.$ZodIssue[] {
  if (metadata === null || typeof metadata !== "object") return [];
  if (!Object.prototype.hasOwnProperty.call(metadata, RESERVED_METADATA_KEY)) return [];
  return [{
    code: "custom",
    path: [...path, RESERVED_METADATA_KEY],
    message:
      `Cannot use ${RESERVED_METADATA_KEY} as a metadata key as it is reserved (a JavaScript object cannot hold it)`,
    input: metadata,
  }];
}

/**
 * A metadata value: a string of at most 512 characters (empty allowed, as OpenAI's), without NUL
 * (U+0000): Postgres `jsonb` cannot hold it, so a listing filter `metadata[k]=a%00b` failed in SQL.
 * (A submit body holding U+0000 anywhere is refused before this schema.)
 */
export const MetadataValue = z.string().max(MAX_METADATA_VALUE_CHARS).refine(
  (v) => !v.includes("\u0000"),
  { message: "Cannot use this metadata value as it must not hold NUL (U+0000)" },
);

/** Job metadata: at most 16 string → string pairs. */
export const JobMetadata = z.record(MetadataKey, MetadataValue).refine(
  (m) => Object.keys(m).length <= MAX_METADATA_KEYS,
  { message: `Cannot use this metadata as it must have at most ${MAX_METADATA_KEYS} keys` },
);

/**
 * The label fields of `POST /v1/jobs`. `suffix` is OpenAI's name for `name`; giving both with
 * different values is an error at `suffix`.
 */
export const JobLabelsInput = z.object({
  /** A label for the job (1–128 characters). */
  name: JobName.nullable().optional().describe("A label for the job (1-128 characters)"),
  /** OpenAI fine-tuning's name for `name`. */
  suffix: JobName.nullable().optional().describe("OpenAI fine-tuning's name for `name`"),
  /** String → string labels: at most 16 keys (≤ 64 characters), values ≤ 512 characters. */
  metadata: JobMetadata.nullable().optional().describe(
    "String-to-string labels: at most 16 keys of at most 64 characters, values of at most 512",
  ),
}).strict();

/** Label field names of the submit body (see {@link JobLabelsInput}). */
export const JOB_LABEL_FIELDS = ["name", "suffix", "metadata"] as const;

/** A job's labels as stored. */
export interface JobLabels {
  name: string | null;
  metadata: Record<string, string>;
}

/**
 * The stored labels of parsed label fields: `name` (or `suffix`), `metadata` (`{}` when absent).
 * @returns an error message at `suffix` when `name` and `suffix` differ.
 */
export function jobLabelsOf(
  input: z.output<typeof JobLabelsInput>,
): JobLabels | { path: "suffix"; message: string } {
  const { name, suffix } = input;
  if (name != null && suffix != null && name !== suffix) {
    return {
      path: "suffix",
      message:
        `Cannot use suffix as it names the job like name does and must equal it when both are given: current values are ${
          JSON.stringify(name)
        } and ${JSON.stringify(suffix)}`,
    };
  }
  return { name: name ?? suffix ?? null, metadata: input.metadata ?? {} };
}

/**
 * A job's metadata in the order it was submitted (`keys`, the stored `metadata_keys`), for the
 * job views: jsonb, where `metadata` lives for its containment filter, keeps its own order
 * (shorter keys first). Keys missing from `keys` (jobs submitted before the order was kept) follow
 * in jsonb's order. One rule of JSON objects in JavaScript still applies on the way out: keys that
 * are whole numbers (`"1"`, `"2024"`) come first, in ascending order.
 */
export function metadataInOrder(
  metadata: Record<string, string>,
  keys: readonly string[],
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) if (Object.hasOwn(metadata, k)) out[k] = metadata[k];
  for (const [k, v] of Object.entries(metadata)) if (!Object.hasOwn(out, k)) out[k] = v;
  return out;
}

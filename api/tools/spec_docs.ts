/**
 * `deno task docs:spec`: generates the JobSpec reference of README.md (the part between
 * `<!-- spec:begin -->` and `<!-- spec:end -->`) from the zod schema in jobs/spec.ts — types,
 * defaults and bounds from `z.toJSONSchema`, descriptions from the JSDoc comment above each field
 * in jobs/spec.ts — and formats README.md as `deno fmt` would. `--check` only reports whether
 * README.md is current (exit 1 when stale).
 * tests/api/tools/spec_docs_test.ts fails when the README section is stale.
 */
import { z } from "zod";
import { JobSpecSchema } from "../../jobs/mod.ts";

/** Marker lines around the generated section. */
export const SPEC_BEGIN = "<!-- spec:begin -->";
/** See {@link SPEC_BEGIN}. */
export const SPEC_END = "<!-- spec:end -->";

/** Thrown when README.md lacks the markers (or has them out of order). */
export class SpecDocsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SpecDocsError";
  }
}

/**
 * Descriptions of fields that have no JSDoc in jobs/spec.ts (a comment there wins). Keep short;
 * better: add the comment to jobs/spec.ts and delete the line here.
 */
const FALLBACK_DESCRIPTIONS: Record<string, string> = {
  "optim.entropy_coef": "Weight of the entropy bonus (loss − entropy_coef·mean(H)).",
  "optim.kl_coef": "Weight of the k3 KL penalty to the warm-up (reference) policy.",
  "eval.splits": "Splits evaluated (`test_seen`: new episodes of training layouts; " +
    "`test_unseen`: held-out layouts/objects).",
  "requirements.device": "Device class of worker that may claim the job (its `WORKER_DEVICE`).",
};

type Json = Record<string, unknown>;

/** One documented leaf field of the spec. */
export interface SpecField {
  /** Dotted path, e.g. `rollout.group_size`. */
  path: string;
  type: string;
  /** Default as JSON text; `required` or `optional` when there is none. */
  default: string;
  /** Bounds and patterns as text ("" when none). */
  bounds: string;
  description: string;
}

function commentBefore(lines: string[], i: number): string | undefined {
  let j = i - 1;
  if (j < 0 || !lines[j].trim().endsWith("*/")) return undefined;
  const block: string[] = [];
  while (j >= 0) {
    block.unshift(lines[j]);
    if (lines[j].trim().startsWith("/**")) break;
    j--;
  }
  return block.join(" ").replace(/\/\*\*|\*\//g, "").replace(/\s*\*\s+/g, " ")
    .replace(/\s+/g, " ").trim();
}

/**
 * JSDoc descriptions of the schema's fields from the source of jobs/spec.ts: dotted path →
 * text. Fields inside a helper such as `WarmupStage(…)` are keyed by `*.<name>` (any parent).
 */
export function fieldComments(source: string): Map<string, string> {
  const lines = source.split("\n");
  const out = new Map<string, string>();
  const start = lines.findIndex((l) => l.startsWith("const JobSpecObject"));
  const stack: string[] = [];
  lines.forEach((line, i) => {
    const m = line.match(/^(\s*)([a-z_]+): /);
    if (!m) return;
    const comment = commentBefore(lines, i);
    if (i < start) {
      if (comment && line.includes("(")) out.set(`*.${m[2]}`, comment);
      return;
    }
    const depth = m[1].length / 2 - 1;
    stack.length = depth;
    stack.push(m[2]);
    if (comment) out.set(stack.join("."), comment);
  });
  return out;
}

function typeOf(s: Json): string {
  if (Array.isArray(s.enum)) return s.enum.map((v) => `\`${v}\``).join(" \\| ");
  if (s.type === "array") return `array of ${typeOf((s.items ?? {}) as Json)}`;
  if (s.type === "object") return "object";
  return String(s.type ?? "any");
}

function boundsOf(s: Json): string {
  const b: string[] = [];
  if (s.exclusiveMinimum !== undefined) b.push(`> ${s.exclusiveMinimum}`);
  if (s.minimum !== undefined && s.maximum !== undefined) b.push(`${s.minimum}–${s.maximum}`);
  else if (s.minimum !== undefined) b.push(`≥ ${s.minimum}`);
  else if (s.maximum !== undefined) b.push(`≤ ${s.maximum}`);
  if (s.minLength !== undefined) b.push(`≥ ${s.minLength} chars`);
  if (s.maxLength !== undefined) b.push(`≤ ${s.maxLength} chars`);
  if (s.minItems !== undefined || s.maxItems !== undefined) {
    b.push(`${s.minItems ?? 0}–${s.maxItems ?? "∞"} items`);
  }
  if (typeof s.pattern === "string") b.push(`\`${s.pattern}\``);
  return b.join(", ");
}

/** The documented leaf fields of the JobSpec, in schema order. */
export function specFields(comments: Map<string, string>): SpecField[] {
  const root = z.toJSONSchema(JobSpecSchema, { io: "input", unrepresentable: "any" }) as Json;
  const out: SpecField[] = [];
  const walk = (schema: Json, prefix: string, required: string[]) => {
    for (const [name, raw] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) {
      const path = prefix ? `${prefix}.${name}` : name;
      if (raw.type === "object" && raw.properties) {
        walk(raw, path, (raw.required ?? []) as string[]);
        continue;
      }
      const description = comments.get(path) ?? comments.get(`*.${name}`) ??
        FALLBACK_DESCRIPTIONS[path] ?? "";
      out.push({
        path,
        type: typeOf(raw),
        default: "default" in raw
          ? `\`${JSON.stringify(raw.default)}\``
          : required.includes(name)
          ? "**required**"
          : "optional",
        bounds: boundsOf(raw),
        description,
      });
    }
  };
  walk(root, "", (root.required ?? []) as string[]);
  return out;
}

const cell = (s: string) => s.replaceAll("|", "\\|").replaceAll("\\\\|", "\\|");

/** The generated markdown (without markers): an intro line and one table row per field. */
export function renderSpecReference(specSource: string): string {
  const rows = specFields(fieldComments(specSource)).map((f) =>
    `| \`${f.path}\` | ${f.type} | ${f.default} | ${cell(f.bounds)} | ${cell(f.description)} |`
  );
  return [
    "Generated from `JobSpecSchema` (jobs/spec.ts) by `deno task docs:spec`; do not edit by hand.",
    "Every object is strict (unknown fields are a 400 with the field path).",
    "",
    "| field | type | default | bounds | meaning |",
    "| --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

/**
 * Replaces the text between the markers of `readme` with `body`.
 * @throws SpecDocsError when the markers are missing or out of order.
 */
export function replaceSpecSection(readme: string, body: string): string {
  const begin = readme.indexOf(SPEC_BEGIN);
  const end = readme.indexOf(SPEC_END);
  if (begin < 0 || end < begin) {
    throw new SpecDocsError(
      `Cannot update README.md as it must hold ${SPEC_BEGIN} then ${SPEC_END}: they are missing or out of order`,
    );
  }
  return readme.slice(0, begin + SPEC_BEGIN.length) + "\n" + body + "\n" + readme.slice(end);
}

/**
 * Formats markdown as `deno fmt` does in this repository (its deno.json: line width 100), so the
 * generated README is stable under `deno fmt`. Runs `deno fmt --ext=md -` in the repository root.
 * @throws SpecDocsError when deno fmt fails.
 */
export async function formatMarkdown(text: string): Promise<string> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--ext=md", "-"],
    cwd: new URL("../..", import.meta.url),
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(text));
  await writer.close();
  const out = await child.output();
  if (!out.success) {
    throw new SpecDocsError(
      `Cannot format README.md as deno fmt must succeed: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
  return new TextDecoder().decode(out.stdout);
}

/** README.md with a freshly generated JobSpec section, formatted like `deno fmt`. */
export async function regeneratedReadme(readme: string, specSource: string): Promise<string> {
  return await formatMarkdown(replaceSpecSection(readme, renderSpecReference(specSource)));
}

/** Paths of README.md and jobs/spec.ts in this repository. */
export const README_URL = new URL("../../README.md", import.meta.url);
/** See {@link README_URL}. */
export const SPEC_SOURCE_URL = new URL("../../jobs/spec.ts", import.meta.url);

if (import.meta.main) {
  const readme = await Deno.readTextFile(README_URL);
  const next = await regeneratedReadme(readme, await Deno.readTextFile(SPEC_SOURCE_URL));
  if (Deno.args.includes("--check")) {
    if (next !== readme) {
      console.error("README.md's JobSpec reference is stale: run `deno task docs:spec`");
      Deno.exit(1);
    }
    console.log("README.md's JobSpec reference is current");
  } else if (next === readme) console.log("README.md's JobSpec reference is already current");
  else {
    await Deno.writeTextFile(README_URL, next);
    console.log("README.md's JobSpec reference updated");
  }
}

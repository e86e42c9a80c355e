/**
 * `deno task docs:spec`: generates `jobs/SPEC.md`, the JobSpec reference, from the zod schema in
 * jobs/spec.ts — types, defaults and bounds from `z.toJSONSchema`, descriptions from the JSDoc
 * comment above each field in jobs/spec.ts — with the demo preset (`DEMO_PRESETS.sokoban`,
 * jobs/presets.ts) as the fuller example, formatted as `deno fmt` would. `--check` only reports
 * whether the file is current (exit 1 when stale). tests/api/tools/spec_docs_test.ts fails when it
 * is stale.
 */
import { z } from "zod";
import { JobSpecSchema } from "../../jobs/mod.ts";
import { DEMO_PRESETS } from "../../jobs/presets.ts";

/** Thrown when the generated document cannot be formatted. */
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
    "Every object is strict (unknown fields are a 400 with the field path).",
    "",
    "| field | type | default | bounds | meaning |",
    "| --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

/** The whole of jobs/SPEC.md before formatting: what a JobSpec is, an example, the table. */
export function renderSpecDocument(specSource: string): string {
  return [
    "# The JobSpec",
    "",
    "<!-- Generated by `deno task docs:spec` (api/tools/spec_docs.ts); do not edit by hand. -->",
    "",
    '`{"env": {"id": "sokoban"}}` is a complete job; every other field has a default. A fuller',
    "example (the demo's: `DEMO_PRESETS.sokoban` in `jobs/presets.ts`, which `api/demo/specs.ts`",
    "submits):",
    "",
    "```json",
    JSON.stringify(DEMO_PRESETS.sokoban, null, 2),
    "```",
    "",
    "`model.base` is `builtin:tiny` (a small Llama-style model with a tokenizer built for the chosen",
    "environment), `builtin:tiny-vl` (the same plus an image encoder, for image observations),",
    "`s3://bucket/prefix/` or `model:<id>` (a Hugging Face folder of `LlamaForCausalLM`,",
    "`Qwen2ForCausalLM` or `Qwen3ForCausalLM`: workers/model/README.md), or `job:<id>[@step]` (a",
    "checkpoint of an earlier job). `env.id` names a built-in environment (workers/envs/README.md);",
    "an unknown id, or options the environment does not accept, is a 422 at submit with the field",
    "path (`env.id`, `env.options.size`, …).",
    "",
    "## Fields",
    "",
    renderSpecReference(specSource),
    "",
  ].join("\n");
}

/**
 * Formats markdown as `deno fmt` does in this repository (its deno.json: line width 100), so the
 * generated document is stable under `deno fmt`. Runs `deno fmt --ext=md -` in the repository root.
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
      `Cannot format the JobSpec reference as deno fmt must succeed: ${
        new TextDecoder().decode(out.stderr)
      }`,
    );
  }
  return new TextDecoder().decode(out.stdout);
}

/** jobs/SPEC.md as `deno task docs:spec` writes it, formatted like `deno fmt`. */
export async function generatedSpecDocument(specSource: string): Promise<string> {
  return await formatMarkdown(renderSpecDocument(specSource));
}

/** Paths of jobs/SPEC.md and jobs/spec.ts in this repository. */
export const SPEC_DOC_URL = new URL("../../jobs/SPEC.md", import.meta.url);
/** See {@link SPEC_DOC_URL}. */
export const SPEC_SOURCE_URL = new URL("../../jobs/spec.ts", import.meta.url);

if (import.meta.main) {
  const current = await Deno.readTextFile(SPEC_DOC_URL).catch(() => "");
  const next = await generatedSpecDocument(await Deno.readTextFile(SPEC_SOURCE_URL));
  if (Deno.args.includes("--check")) {
    if (next !== current) {
      console.error("jobs/SPEC.md is stale: run `deno task docs:spec`");
      Deno.exit(1);
    }
    console.log("jobs/SPEC.md is current");
  } else if (next === current) console.log("jobs/SPEC.md is already current");
  else {
    await Deno.writeTextFile(SPEC_DOC_URL, next);
    console.log("jobs/SPEC.md updated");
  }
}

/**
 * `deno task docs:layering`: writes the map of README.md's Architecture section (between
 * `<!-- layering:begin -->` and `<!-- layering:end -->`) from tests/layering.ts, formatted as
 * `deno fmt` would. `--check` only reports whether README.md is current (exit 1 when stale);
 * tests/layering_test.ts fails while it is stale.
 */
import { formatMarkdown } from "../api/tools/spec_docs.ts";
import { LAYER_EXCEPTIONS, type LayerException, LAYERS } from "./layering.ts";
import type { Layer } from "./layering.ts";

/** Marker lines around the generated map. */
export const LAYERING_BEGIN = "<!-- layering:begin -->";
/** See {@link LAYERING_BEGIN}. */
export const LAYERING_END = "<!-- layering:end -->";

/** Path of README.md in this repository. */
export const README_URL = new URL("../README.md", import.meta.url);

const code = (s: string) => `\`${s}\``;

/** The generated map: one table row per part, then the exceptions with their reasons. */
export function renderLayering(
  layers: Layer[] = LAYERS,
  exceptions: LayerException[] = LAYER_EXCEPTIONS,
): string {
  const product = new Set(
    layers.filter((l) => !["bench", "harness"].includes(l.name) && !l.name.startsWith("tests"))
      .map((l) => l.name),
  );
  const rows: string[] = [];
  const seen = new Set<string>();
  for (const l of layers) {
    const where = l.shown ?? l.paths.map(code).join(", ");
    if (seen.has(where)) continue; // one row for the environments that share a rule
    seen.add(where);
    const all = [...product].every((p) => l.imports.includes(p) || p === l.name);
    const rest = l.imports.filter((i) => !all || !product.has(i));
    const shownOf = (name: string) => {
      const part = layers.find((x) => x.name === name)!;
      return part.shown ?? part.paths.map(code).join(", ");
    };
    const imports = [...(all ? ["any product part"] : []), ...new Set(rest.map(shownOf))];
    const role = l.shown && l.name.startsWith("workers/envs/") && l.paths[0].endsWith("/")
      ? "each built-in environment (sokoban, household, webshop, ezpoints, search)"
      : l.role;
    rows.push(`| ${where} | ${role} | ${imports.join(", ") || "—"} |`);
  }
  return [
    "Generated from tests/layering.ts by `deno task docs:layering`; tests/layering_test.ts fails",
    "on an import that breaks it, naming the importing file. A file belongs to the part with the",
    "longest matching path; imports within a part are free; there is no import circle.",
    "",
    "| files | part | may import |",
    "| --- | --- | --- |",
    ...rows,
    "",
    "Single-file exceptions:",
    "",
    ...exceptions.map((x) => `- ${code(x.from)} → ${code(x.to)}: ${x.reason}.`),
  ].join("\n");
}

/**
 * Replaces the text between the markers of `readme` with `body`.
 * @throws Error when the markers are missing or out of order.
 */
export function replaceLayeringSection(readme: string, body: string): string {
  const begin = readme.indexOf(LAYERING_BEGIN);
  const end = readme.indexOf(LAYERING_END);
  if (begin < 0 || end < begin) {
    throw new Error(
      `Cannot update README.md as it must hold ${LAYERING_BEGIN} then ${LAYERING_END}: ` +
        "they are missing or out of order",
    );
  }
  return readme.slice(0, begin + LAYERING_BEGIN.length) + "\n\n" + body + "\n\n" +
    readme.slice(end);
}

/** README.md with a freshly generated map, formatted like `deno fmt`. */
export async function regeneratedReadme(readme: string): Promise<string> {
  return await formatMarkdown(replaceLayeringSection(readme, renderLayering()));
}

if (import.meta.main) {
  const readme = await Deno.readTextFile(README_URL);
  const next = await regeneratedReadme(readme);
  if (Deno.args.includes("--check")) {
    if (next !== readme) {
      console.error("README.md's layering map is stale: run `deno task docs:layering`");
      Deno.exit(1);
    }
    console.log("README.md's layering map is current");
  } else if (next === readme) console.log("README.md's layering map is already current");
  else {
    await Deno.writeTextFile(README_URL, next);
    console.log("README.md's layering map updated");
  }
}

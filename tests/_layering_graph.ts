/**
 * The import graph of the repository and its check against tests/layering.ts (pure but for
 * reading files): every relative import, re-export and string-literal dynamic import of every
 * tracked `.ts`/`.js` file, resolved to a repository path.
 */
import { type Layer, LAYER_EXCEPTIONS, LAYERS } from "./layering.ts";

/** One import edge between two repository files. */
export interface ImportEdge {
  /** The importing file, relative to the repository root. */
  from: string;
  /** The imported file, relative to the repository root. */
  to: string;
  /** 1-based line of the import in `from`. */
  line: number;
}

/** The repository root (the folder above tests/). */
export const ROOT = new URL("..", import.meta.url);

const SKIP_DIRS = new Set(["node_modules", ".git", ".seed", "demo-output", ".bench-out", ".gpu"]);

/** Every `.ts`/`.js` file under the root, relative paths, sorted. */
export function sourceFiles(root: URL = ROOT): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(new URL(dir, root))) {
      if (e.isDirectory) {
        if (!SKIP_DIRS.has(e.name) && !e.name.startsWith(".")) walk(`${dir}${e.name}/`);
      } else if (e.isFile && /\.(ts|js)$/.test(e.name)) out.push(`${dir}${e.name}`);
    }
  };
  walk("");
  return out.sort();
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(["'])([^"'\n]+)\1/gm;

/** The relative specifiers a source text imports, each with its 1-based line. */
export function importSpecifiers(source: string): { specifier: string; line: number }[] {
  const out: { specifier: string; line: number }[] = [];
  for (const m of source.matchAll(SPECIFIER)) {
    const specifier = m[2];
    if (!specifier.startsWith(".")) continue;
    out.push({ specifier, line: source.slice(0, m.index).split("\n").length });
  }
  return out;
}

/** Resolves `specifier` imported by `from` (both relative to the root) to a root-relative path. */
export function resolveImport(from: string, specifier: string): string {
  const url = new URL(specifier, new URL(from, "file:///r/"));
  return decodeURIComponent(url.pathname.slice("/r/".length));
}

/** Every import edge between files under the root. */
export function importGraph(root: URL = ROOT): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const from of sourceFiles(root)) {
    const text = Deno.readTextFileSync(new URL(from, root));
    for (const { specifier, line } of importSpecifiers(text)) {
      edges.push({ from, to: resolveImport(from, specifier), line });
    }
  }
  return edges;
}

/** The part a file belongs to: the layer with the longest matching path prefix, or undefined. */
export function layerOf(path: string, layers: Layer[] = LAYERS): Layer | undefined {
  let best: Layer | undefined;
  let bestLength = -1;
  for (const layer of layers) {
    for (const p of layer.paths) {
      if ((path === p || path.startsWith(p)) && p.length > bestLength) {
        best = layer;
        bestLength = p.length;
      }
    }
  }
  return best;
}

/**
 * The edges that break the layering, each as a message naming the importing file and line, the
 * imported file and the two parts.
 */
export function layeringViolations(edges: ImportEdge[], layers: Layer[] = LAYERS): string[] {
  const out: string[] = [];
  for (const e of edges) {
    const a = layerOf(e.from, layers);
    const b = layerOf(e.to, layers);
    if (!a || !b || a === b || a.imports.includes(b.name)) continue;
    if (LAYER_EXCEPTIONS.some((x) => x.from === e.from && x.to === e.to)) continue;
    out.push(
      `${e.from}:${e.line} imports ${e.to}: part "${a.name}" may not import part "${b.name}" ` +
        `(it may import: ${a.imports.join(", ") || "no other part"}; tests/layering.ts)`,
    );
  }
  return out;
}

/** Files of the repository that belong to no part (each must be placed in tests/layering.ts). */
export function unplacedFiles(files: string[], layers: Layer[] = LAYERS): string[] {
  return files.filter((f) => !layerOf(f, layers));
}

/**
 * Import circles among files: each strongly connected component of more than one file, as its
 * sorted file list (Tarjan's algorithm over the edges).
 */
export function importCircles(edges: ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges) {
    if (!next.has(e.from)) next.set(e.from, []);
    next.get(e.from)!.push(e.to);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let counter = 0;
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) out.push(component.sort());
    }
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return out;
}

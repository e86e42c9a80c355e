/**
 * The key of a warm-up checkpoint under `bench:learn --warmup-cache DIR` (`DIR/<key>`).
 *
 * A cached warm-up is what the code that trained it made of its spec: the same spec trained by
 * other code (another environment's demonstrations or vocabulary, another model, another trainer)
 * is another checkpoint. So the key covers three things: the parsed JobSpec, the onnxruntime
 * thread count (another count changes the float reductions) and a digest of the source files the
 * warm-up can depend on ({@link WARMUP_SOURCE_PATHS}), read from the working tree so that
 * uncommitted edits count. A cache folder written by other code is then never found, rather than
 * served as if it were this code's.
 */
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { type JobSpecInput, parseJobSpec } from "../jobs/spec.ts";

/** The repository's root folder (this file's folder's parent), as a file system path. */
export const REPO_ROOT: string = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");

/**
 * Where the warm-up's code lives, relative to the repository root: everything the trainer
 * imports (workers/, jobs/; neither imports api/ or bench/: tests/layering.ts), the in-memory
 * job context bench:learn runs it in, and the dependency pins. Of these, the `*.ts`, `*.js` and
 * `*.json` files and `deno.lock` count ({@link isWarmupSource}); docs do not.
 */
export const WARMUP_SOURCE_PATHS: readonly string[] = [
  "workers",
  "jobs",
  "bench/_memory_context.ts",
  "deno.json",
  "deno.lock",
];

/** Whether repository path `path` is code the digest covers: `*.ts`, `*.js`, `*.json`, deno.lock. */
export function isWarmupSource(path: string): boolean {
  return /\.(ts|js|json)$/.test(path) || path === "deno.lock";
}

/**
 * The source files under `paths` in the git work tree at `root`, relative to it and sorted by path
 * (UTF-16 code units): the tracked ones and the untracked ones git does not ignore (a new file the
 * code imports counts before it is committed), those that {@link isWarmupSource} keeps.
 *
 * @throws Error naming `root` when git cannot run there or `root` is not in a git work tree.
 */
export async function warmupSourceFiles(
  root: string,
  paths: readonly string[] = WARMUP_SOURCE_PATHS,
): Promise<string[]> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command("git", {
      args: ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ...paths],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (error) {
    throw new Error(
      `Cannot list the warm-up's source files as git must run in ${root}: ${
        (error as Error).message
      }`,
      { cause: error },
    );
  }
  if (!output.success) {
    throw new Error(
      `Cannot list the warm-up's source files as ${root} must be a git work tree: git ls-files ` +
        `exited ${output.code}: ${new TextDecoder().decode(output.stderr).trim()}`,
    );
  }
  const listed = new TextDecoder().decode(output.stdout).split("\0").filter((p) => p !== "");
  return [...new Set(listed)].filter(isWarmupSource).sort(byPath);
}

/** Orders paths by UTF-16 code units, the same on every machine and locale. */
function byPath(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The SHA-256 (64 hex digits) of files `files` (paths relative to `root`) as they are in the file
 * system now: over the files sorted by path, each one's path, byte length and bytes, each part
 * delimited so no two file sets hash the same stream. A listed file that is missing (deleted in
 * the work tree, not yet in git) hashes as absent, unlike an empty file. One read of each file.
 *
 * @throws the file system's error for a file that exists but cannot be read.
 */
export async function codeDigest(root: string, files: readonly string[]): Promise<string> {
  const hash = createHash("sha256");
  for (const path of [...new Set(files)].sort(byPath)) {
    let bytes: Uint8Array | null = null;
    try {
      bytes = await Deno.readFile(`${root}/${path}`);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    hash.update(`${path}\0${bytes === null ? "absent" : bytes.byteLength}\0`);
    if (bytes !== null) hash.update(bytes);
  }
  return hash.digest("hex");
}

/**
 * The digest ({@link codeDigest}) of the warm-up's source files in the work tree at `root`
 * ({@link warmupSourceFiles}).
 *
 * @throws as {@link warmupSourceFiles} and {@link codeDigest} do.
 */
export async function warmupCodeDigest(root: string = REPO_ROOT): Promise<string> {
  return await codeDigest(root, await warmupSourceFiles(root));
}

/**
 * The cache key (16 hex digits: the first 8 bytes of a SHA-256) of the warm-up of `spec` trained
 * with `threads` onnxruntime threads by the code whose digest is `code` ({@link warmupCodeDigest}).
 * Equal inputs give equal keys; another spec (after parsing and its defaults), thread count or
 * code gives another.
 *
 * @throws the spec's validation error when `spec` is not a valid JobSpec.
 */
export async function warmupCacheKey(
  spec: JobSpecInput,
  options: { threads: number; code: string },
): Promise<string> {
  // The default of 2 threads adds nothing to the key, as before the thread count was part of it.
  const threads = options.threads === 2 ? "" : `threads=${options.threads}`;
  const bytes = new TextEncoder().encode(
    `${JSON.stringify(parseJobSpec(spec))}${threads}\0code=${options.code}`,
  );
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(hash.subarray(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The compute processes' scratch folders (compute.ts): `seed-compute-{worker pid}-{random}` in the
 * system's temporary folder. A worker removes its own when a run stops; one killed with SIGKILL
 * cannot, so the next worker to start on the machine removes those whose worker is gone.
 */
import { join } from "node:path";

/** The name of a scratch folder: the worker's pid, then `Deno.makeTempDir`'s random suffix. */
const SCRATCH_NAME = /^seed-compute-(\d+)-[0-9a-zA-Z]+$/;

/** The prefix `Deno.makeTempDir` gives a scratch folder of the worker process `pid`. */
export function scratchPrefix(pid: number): string {
  return `seed-compute-${pid}-`;
}

/**
 * The folder `Deno.makeTempDir` creates scratch folders in: `$TMPDIR`, else `/tmp` (the rule of
 * Rust's `std::env::temp_dir`, which Deno uses, on Unix).
 */
export function scratchRoot(): string {
  return Deno.env.get("TMPDIR") || "/tmp";
}

/**
 * Whether process `pid` exists on this machine, read from `/proc/{pid}` (Linux). Where `/proc` is
 * missing every pid counts as alive, so nothing is removed.
 */
function isAlive(pid: number): boolean {
  try {
    Deno.statSync("/proc/self");
  } catch {
    return true; // no procfs: cannot tell, keep everything
  }
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
}

/**
 * Removes the scratch folders that workers killed before they could clean up left in `root`: only
 * direct entries of `root` that are real folders (not links) named exactly
 * `seed-compute-{pid}-{suffix}` whose `pid` no process has. A folder of a live process (this one
 * included) is kept, and so is every other entry. Errors on one folder (removed meanwhile, no
 * permission) skip it.
 *
 * @param root the folder to look in; default {@link scratchRoot}.
 * @returns the paths removed.
 */
export async function removeStaleScratch(root = scratchRoot()): Promise<string[]> {
  const removed: string[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(root));
  } catch {
    return removed; // no such root: nothing left behind
  }
  for (const entry of entries) {
    const m = entry.name.match(SCRATCH_NAME);
    if (!m || !entry.isDirectory || entry.isSymlink) continue;
    const pid = Number(m[1]);
    if (!Number.isSafeInteger(pid) || pid <= 0 || isAlive(pid)) continue;
    const path = join(root, entry.name);
    try {
      await Deno.remove(path, { recursive: true });
      removed.push(path);
    } catch { /* gone meanwhile, or not ours to remove */ }
  }
  return removed;
}

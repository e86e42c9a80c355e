/**
 * The compute processes' scratch folders (compute.ts): `seed-compute-{worker pid}-{random}` in the
 * system's temporary folder. A worker removes its own when a run stops; one killed with SIGKILL
 * cannot, so the next worker to start on the machine removes those whose worker is gone.
 *
 * Whether a folder's worker is gone is told by a lock, not by its pid: each folder holds a file
 * `lock` on which the worker that made it holds an exclusive advisory lock (flock) for the
 * folder's life. The kernel drops the lock when that process dies, however it dies, so a folder
 * whose lock can be taken has no owner. A pid says nothing across pid namespaces: workers in two
 * containers that share `/tmp` each see the other's pids as dead (or as some unrelated live
 * process), and the pid rule removed a live worker's folder under it. The lock is shared by every
 * process on one kernel whatever its namespace. (Folders shared between machines over a network
 * file system are outside this rule: give each machine its own `TMPDIR`.)
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

/** The file in a scratch folder its worker holds locked while the folder is in use. */
export const SCRATCH_LOCK = "lock";

/**
 * A folder without its lock file this long after it was last written (ms) is judged by the pid
 * in its name instead (see {@link removeStaleScratch}): a folder made by a worker of a version
 * before the lock, or one whose lock is about to be made (microseconds after the folder).
 */
export const LOCKLESS_GRACE_MS = 10 * 60_000;

/** A scratch folder held by this process (see the module doc). */
export interface Scratch {
  /** The folder's path. */
  path: string;
  /** Removes the folder and drops its lock. Idempotent; never throws. */
  remove(): void;
}

/**
 * Creates a scratch folder for this process in `root` (default {@link scratchRoot}) and locks it:
 * its lock file is held with an exclusive lock until {@link Scratch.remove} (or this process's
 * death, when the kernel drops it).
 */
export async function createScratch(root = scratchRoot()): Promise<Scratch> {
  const path = await Deno.makeTempDir({ dir: root, prefix: scratchPrefix(Deno.pid) });
  const lock = await Deno.open(join(path, SCRATCH_LOCK), { write: true, createNew: true });
  await lock.lock(true);
  let removed = false;
  return {
    path,
    remove() {
      if (removed) return;
      removed = true;
      try {
        Deno.removeSync(path, { recursive: true });
      } catch { /* already gone */ }
      try {
        lock.close();
      } catch { /* already closed */ }
    },
  };
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
 * Whether the scratch folder `path` has no live owner: its lock file can be locked (nobody holds
 * it). A folder without a lock file is judged as one made before the lock existed: ownerless when
 * it was last written over {@link LOCKLESS_GRACE_MS} ago and no process has the pid in its name.
 * @returns the open lock file, locked, to close once the folder is removed (null: no lock file);
 *   undefined when the folder is in use.
 */
async function ownerless(
  path: string,
  pid: number,
): Promise<Deno.FsFile | null | undefined> {
  let lock: Deno.FsFile;
  try {
    lock = await Deno.open(join(path, SCRATCH_LOCK), { read: true });
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) return undefined;
    const written = (await Deno.stat(path)).mtime?.getTime() ?? Date.now();
    return Date.now() - written > LOCKLESS_GRACE_MS && !isAlive(pid) ? null : undefined;
  }
  if (await lock.tryLock(true)) return lock;
  lock.close();
  return undefined;
}

/**
 * Removes the scratch folders that workers killed before they could clean up left in `root`: only
 * direct entries of `root` that are real folders (not links) named exactly
 * `seed-compute-{pid}-{suffix}` whose lock no process holds (see the module doc and
 * {@link ownerless}). A folder of a live process (this one included, and one in another pid
 * namespace) is kept, and so is every other entry. Errors on one folder (removed meanwhile, no
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
    if (!Number.isSafeInteger(pid) || pid <= 0) continue;
    const path = join(root, entry.name);
    try {
      const lock = await ownerless(path, pid);
      if (lock === undefined) continue;
      try {
        await Deno.remove(path, { recursive: true });
        removed.push(path);
      } finally {
        lock?.close();
      }
    } catch { /* gone meanwhile, or not ours to remove */ }
  }
  return removed;
}

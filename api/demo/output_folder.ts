/**
 * The demo's output folder: taken for one run when the run starts, so that two runs started at
 * the same instant never pick the same folder, and filled only once the whole download is
 * checked. Nothing that was in a folder before the run is ever replaced or removed.
 *
 * A run takes a folder by creating it (`mkdir`, which exactly one of several concurrent callers
 * wins) or, when it exists and is empty, by creating the folder {@link PARTIAL_FOLDER} inside it
 * (again one `mkdir`). The download goes into that partial folder; {@link publishDownload} then
 * moves its entries up, each by a step that fails rather than replace an entry already there.
 * While a run holds the folder it is never empty, so no other run takes it.
 *
 * A run killed outright (SIGKILL, a power cut) cannot give its folder back, so the next run to
 * try the folder removes the partial folder it left. Whether its run is gone is told by a lock,
 * not by a pid (as the compute scratch folders are, workers/worker/_scratch.ts): the run holds an
 * exclusive advisory lock (flock) on {@link PARTIAL_LOCK} in the partial folder for as long as it
 * holds the folder, and the kernel drops that lock when the process dies, however it dies. A pid
 * is reused and means nothing across pid namespaces (two containers sharing a folder); the lock
 * is shared by every process on one kernel. A partial folder whose lock some process holds, or
 * that has no lock file (one made by an older version, or one whose run died in the microseconds
 * between making it and locking it), or whose lock file this process cannot open (another
 * user's), is never removed. (Folders shared between machines over a
 * network file system are outside this rule.)
 */
import { dirname, join } from "node:path";

/** The folder inside a taken output folder that holds the run's download until it is checked. */
export const PARTIAL_FOLDER = ".demo-partial";

/**
 * The file in {@link PARTIAL_FOLDER} its run holds locked (see the module doc); never published.
 */
export const PARTIAL_LOCK = ".lock";

/** An output folder taken for one run by {@link claimOutputFolder}. */
export interface OutputFolder {
  /** The folder the run writes to: `asked`, or the first free `<asked>-N` (N = 2, 3, …). */
  path: string;
  /** The folder asked for. */
  asked: string;
  /**
   * Why `asked` was not free ("holds an earlier run's output", "holds another demo run's
   * unfinished download", "is not a folder"); null when `path` is `asked`.
   */
  reason: string | null;
  /** Whether the claim created `path` ({@link releaseOutputFolder} then removes it if empty). */
  created: boolean;
  /**
   * The partial folders of killed runs that the claim removed (`<folder>/.demo-partial`, in the
   * order met), each from a folder it tried; empty when it met none.
   */
  removedStale: string[];
  /** The open {@link PARTIAL_LOCK}, locked until the folder is published or given back. */
  lock: Deno.FsFile;
}

const IN_PROGRESS = "holds another demo run's unfinished download";

/**
 * Takes the folder a run writes to: `dir` when it does not exist or is an empty folder, else the
 * first free one of `dir-2`, `dir-3`, … Creates `dir`'s parent folders, the folder taken (when
 * absent) and {@link PARTIAL_FOLDER} in it. Concurrent calls for the same `dir`, in this process
 * or others, get different folders. A partial folder left by a killed run in a folder it tries is
 * removed first (listed in `removedStale`; see the module doc). Throws the file system's error
 * when a folder cannot be made or read (e.g. `Deno.errors.PermissionDenied`).
 */
export async function claimOutputFolder(dir: string): Promise<OutputFolder> {
  await Deno.mkdir(dirname(dir), { recursive: true });
  let reason: string | null = null;
  const removedStale: string[] = [];
  for (let n = 1;; n++) {
    const path = n === 1 ? dir : `${dir}-${n}`;
    const taken = await claim(path, removedStale);
    if (typeof taken !== "string") {
      return { path, asked: dir, reason, created: taken.created, removedStale, lock: taken.lock };
    }
    reason ??= taken;
  }
}

/**
 * Takes `path` for this run, first removing a killed run's partial folder in it (pushed on
 * `removed`); answers why it is not free when it is not.
 */
async function claim(
  path: string,
  removed: string[],
): Promise<{ created: boolean; lock: Deno.FsFile } | string> {
  let created = true;
  const partial = join(path, PARTIAL_FOLDER);
  try {
    await Deno.mkdir(path); // not recursive: AlreadyExists for all but one concurrent caller
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    created = false;
    let names = await entryNames(path);
    if (names === null) return "is not a folder";
    if (names.includes(PARTIAL_FOLDER)) {
      if (!(await removeIfStale(partial))) return IN_PROGRESS;
      removed.push(partial);
      names = names.filter((name) => name !== PARTIAL_FOLDER);
    }
    if (names.length > 0) return "holds an earlier run's output";
  }
  try {
    // Also when this call created `path`: another run that found it empty may have been first.
    await Deno.mkdir(partial);
  } catch (error) {
    if (error instanceof Deno.errors.AlreadyExists) return IN_PROGRESS;
    throw error;
  }
  return { created, lock: await lockPartial(partial) };
}

/**
 * Makes {@link PARTIAL_LOCK} in the new partial folder `partial`, already locked when it appears
 * under that name: made and locked under a name of its own, then renamed, so another run never
 * finds it unlocked while this run lives.
 */
async function lockPartial(partial: string): Promise<Deno.FsFile> {
  const staging = join(partial, `${PARTIAL_LOCK}-${crypto.randomUUID()}`);
  const lock = await Deno.open(staging, { write: true, createNew: true });
  try {
    await lock.lock(true);
    await Deno.rename(staging, join(partial, PARTIAL_LOCK));
  } catch (error) {
    lock.close();
    throw error;
  }
  return lock;
}

/**
 * Removes the partial folder `partial` when no process holds its lock (its run was killed);
 * answers whether it did. Kept: a folder whose lock is held, one without a lock file, one whose
 * lock file this process cannot open (another user's, a link that leads nowhere: it says nothing
 * of its run), and one removed or replaced meanwhile (the lock taken must still be the file at
 * `partial`: a run that gives its folder back unlinks the lock file before it lets go of it).
 */
async function removeIfStale(partial: string): Promise<boolean> {
  let lock: Deno.FsFile;
  try {
    lock = await Deno.open(join(partial, PARTIAL_LOCK), { read: true });
  } catch {
    return false; // passed over, as a folder whose run is alive: the next folder is tried
  }
  try {
    if (!(await lock.tryLock(true))) return false;
    const held = await lock.stat();
    const atPath = await Deno.stat(join(partial, PARTIAL_LOCK)).catch(() => null);
    if (atPath === null || atPath.ino !== held.ino || atPath.dev !== held.dev) return false;
    await Deno.remove(partial, { recursive: true });
    return true;
  } finally {
    lock.close();
  }
}

/** The names in folder `path`; null when `path` is not a folder (a file, a broken link). */
async function entryNames(path: string): Promise<string[] | null> {
  try {
    if (!(await Deno.stat(path)).isDirectory) return null;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  const names: string[] = [];
  for await (const entry of Deno.readDir(path)) names.push(entry.name);
  return names;
}

/**
 * Moves the checked download from `<folder.path>/.demo-partial/` into `folder.path` and removes
 * the partial folder. Each file is written with `createNew` and each folder made with a
 * non-recursive `mkdir` before the rename onto it, so an entry that appeared in the folder during
 * the run is never replaced: that throws `Deno.errors.AlreadyExists`, after taking back what this
 * call had moved (the partial folder is left to {@link releaseOutputFolder}).
 */
export async function publishDownload(folder: OutputFolder): Promise<void> {
  const partial = join(folder.path, PARTIAL_FOLDER);
  const entries: Deno.DirEntry[] = [];
  for await (const entry of Deno.readDir(partial)) {
    if (entry.name !== PARTIAL_LOCK) entries.push(entry);
  }
  const moved: string[] = [];
  let to = "";
  try {
    for (const entry of entries) {
      const from = join(partial, entry.name);
      to = join(folder.path, entry.name);
      if (entry.isDirectory) {
        await Deno.mkdir(to);
        try {
          // Onto the empty folder just made: fails, rather than replace, if it is not empty.
          await Deno.rename(from, to);
        } catch (error) {
          await Deno.remove(to).catch(() => {}); // not recursive: only while still empty
          throw error;
        }
        moved.push(to);
      } else {
        await Deno.writeFile(to, await Deno.readFile(from), { createNew: true });
        moved.push(to);
        await Deno.remove(from);
      }
    }
  } catch (error) {
    for (const path of moved) await Deno.remove(path, { recursive: true }).catch(() => {});
    if (error instanceof Deno.errors.AlreadyExists) {
      throw new Deno.errors.AlreadyExists(
        `Cannot move the download into ${folder.path} as ${to} must not exist: it was made there during the run, and is kept`,
        { cause: error },
      );
    }
    throw error;
  }
  await Deno.remove(join(partial, PARTIAL_LOCK)); // before letting go of it: see removeIfStale
  await Deno.remove(partial);
  closeLock(folder);
}

/** Lets go of the folder's lock; nothing when it was let go of already. */
function closeLock(folder: OutputFolder): void {
  try {
    folder.lock.close();
  } catch (error) {
    if (!(error instanceof Deno.errors.BadResource)) throw error;
  }
}

/**
 * Gives back a folder taken by {@link claimOutputFolder} for a run that ended before
 * {@link publishDownload}: removes its partial download and, when the claim created the folder,
 * the folder if it is then empty, and lets go of its lock. Removes nothing else. Safe to call more
 * than once. Throws the file system's error when the partial folder exists and cannot be removed
 * (the lock is then kept, so no other run removes it either).
 */
export async function releaseOutputFolder(folder: OutputFolder): Promise<void> {
  try {
    await Deno.remove(join(folder.path, PARTIAL_FOLDER), { recursive: true });
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  closeLock(folder);
  // Not recursive: fails, and is left, when anything else is in the folder.
  if (folder.created) await Deno.remove(folder.path).catch(() => {});
}

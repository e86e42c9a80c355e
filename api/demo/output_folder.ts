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
 */
import { dirname, join } from "node:path";

/** The folder inside a taken output folder that holds the run's download until it is checked. */
export const PARTIAL_FOLDER = ".demo-partial";

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
}

const IN_PROGRESS = "holds another demo run's unfinished download";

/**
 * Takes the folder a run writes to: `dir` when it does not exist or is an empty folder, else the
 * first free one of `dir-2`, `dir-3`, … Creates `dir`'s parent folders, the folder taken (when
 * absent) and {@link PARTIAL_FOLDER} in it. Concurrent calls for the same `dir`, in this process
 * or others, get different folders. Throws the file system's error when a folder cannot be made
 * or read (e.g. `Deno.errors.PermissionDenied`).
 */
export async function claimOutputFolder(dir: string): Promise<OutputFolder> {
  await Deno.mkdir(dirname(dir), { recursive: true });
  let reason: string | null = null;
  for (let n = 1;; n++) {
    const path = n === 1 ? dir : `${dir}-${n}`;
    const taken = await claim(path);
    if (typeof taken !== "string") return { path, asked: dir, reason, created: taken.created };
    reason ??= taken;
  }
}

/** Takes `path` for this run; answers why it is not free when it is not. */
async function claim(path: string): Promise<{ created: boolean } | string> {
  let created = true;
  try {
    await Deno.mkdir(path); // not recursive: AlreadyExists for all but one concurrent caller
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    created = false;
    const names = await entryNames(path);
    if (names === null) return "is not a folder";
    if (names.includes(PARTIAL_FOLDER)) return IN_PROGRESS;
    if (names.length > 0) return "holds an earlier run's output";
  }
  try {
    // Also when this call created `path`: another run that found it empty may have been first.
    await Deno.mkdir(join(path, PARTIAL_FOLDER));
  } catch (error) {
    if (error instanceof Deno.errors.AlreadyExists) return IN_PROGRESS;
    throw error;
  }
  return { created };
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
  for await (const entry of Deno.readDir(partial)) entries.push(entry);
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
  await Deno.remove(partial);
}

/**
 * Gives back a folder taken by {@link claimOutputFolder} for a run that ended before
 * {@link publishDownload}: removes its partial download and, when the claim created the folder,
 * the folder if it is then empty. Removes nothing else. Safe to call more than once. Throws the
 * file system's error when the partial folder exists and cannot be removed.
 */
export async function releaseOutputFolder(folder: OutputFolder): Promise<void> {
  try {
    await Deno.remove(join(folder.path, PARTIAL_FOLDER), { recursive: true });
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  // Not recursive: fails, and is left, when anything else is in the folder.
  if (folder.created) await Deno.remove(folder.path).catch(() => {});
}

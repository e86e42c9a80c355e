/**
 * The demo's output folder (`api/demo/output_folder.ts`) on the real file system: runs started at
 * the same instant take different folders, and nothing already in a folder is replaced or removed.
 */
import assert from "node:assert/strict";
import {
  claimOutputFolder,
  type OutputFolder,
  PARTIAL_FOLDER,
  publishDownload,
  releaseOutputFolder,
} from "../../../api/demo/output_folder.ts";

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) out.push(e.name);
  return out.sort();
}

async function withTmp(fn: (tmp: string) => Promise<void>): Promise<void> {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-folder-" });
  try {
    await fn(tmp);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

Deno.test("runs that take the same output folder at the same instant get different folders", async () => {
  await withTmp(async (tmp) => {
    const base = `${tmp}/demo-output`;
    const claims = await Promise.all([1, 2, 3, 4].map(() => claimOutputFolder(base)));
    const paths = claims.map((c) => c.path).sort();
    assert.deepEqual(paths, [base, `${base}-2`, `${base}-3`, `${base}-4`]);
    for (const c of claims) {
      assert.equal(c.asked, base);
      // Not `created`: a run may take the folder another made an instant before it (claim's doc).
      assert.deepEqual(await names(c.path), [PARTIAL_FOLDER]);
    }
    const first = claims.find((c) => c.path === base)!;
    assert.equal(first.reason, null);
    for (const c of claims.filter((c) => c !== first)) {
      assert.equal(c.reason, "holds another demo run's unfinished download");
    }
    for (const c of claims) await releaseOutputFolder(c);
  });
});

Deno.test("runs given the same empty folder at the same instant: one takes it, the other the next", async () => {
  await withTmp(async (tmp) => {
    const base = `${tmp}/empty`;
    await Deno.mkdir(base);
    const [a, b] = await Promise.all([claimOutputFolder(base), claimOutputFolder(base)]);
    assert.deepEqual([a.path, b.path].sort(), [base, `${base}-2`]);
    const inBase = a.path === base ? a : b;
    assert.equal(inBase.created, false);
    // Given back, the empty folder the user made stays; the one the claim made goes.
    await releaseOutputFolder(a);
    await releaseOutputFolder(b);
    assert.deepEqual(await names(tmp), ["empty"]);
    assert.deepEqual(await names(base), []);
  });
});

Deno.test("a folder holding anything, or a file of that name, is passed over and left as it was", async () => {
  await withTmp(async (tmp) => {
    await Deno.mkdir(`${tmp}/out`);
    await Deno.writeTextFile(`${tmp}/out/stale.txt`, "from an earlier run");
    const a = await claimOutputFolder(`${tmp}/out`);
    assert.equal(a.path, `${tmp}/out-2`);
    assert.equal(a.reason, "holds an earlier run's output");
    assert.deepEqual(await names(`${tmp}/out`), ["stale.txt"]);
    assert.equal(await Deno.readTextFile(`${tmp}/out/stale.txt`), "from an earlier run");

    await Deno.writeTextFile(`${tmp}/file`, "not a folder");
    const b = await claimOutputFolder(`${tmp}/file`);
    assert.equal(b.path, `${tmp}/file-2`);
    assert.equal(b.reason, "is not a folder");
    assert.equal(await Deno.readTextFile(`${tmp}/file`), "not a folder");

    // Parent folders are made; a folder that does not exist is taken as asked.
    const c = await claimOutputFolder(`${tmp}/a/b/absent`);
    assert.equal(c.path, `${tmp}/a/b/absent`);
    assert.equal(c.reason, null);
    for (const taken of [a, b, c]) await releaseOutputFolder(taken);
  });
});

Deno.test("a published download fills the folder it took, and nothing of the partial folder stays", async () => {
  await withTmp(async (tmp) => {
    const folder = await claimOutputFolder(`${tmp}/out`);
    const partial = `${folder.path}/${PARTIAL_FOLDER}`;
    await Deno.mkdir(`${partial}/checkpoint/step-1`, { recursive: true });
    await Deno.writeTextFile(`${partial}/checkpoint/step-1/model.safetensors`, "weights");
    await Deno.writeTextFile(`${partial}/job.json`, "{}");
    await publishDownload(folder);
    assert.deepEqual(await names(folder.path), ["checkpoint", "job.json"]);
    assert.equal(
      await Deno.readTextFile(`${folder.path}/checkpoint/step-1/model.safetensors`),
      "weights",
    );
    // Published, the folder is an earlier run's output to the next run.
    const next = await claimOutputFolder(`${tmp}/out`);
    assert.equal(next.path, `${tmp}/out-2`);
    assert.equal(next.reason, "holds an earlier run's output");
    await releaseOutputFolder(next);
  });
});

Deno.test("a file made in the folder during the run is never replaced by the download", async () => {
  await withTmp(async (tmp) => {
    const folder = await claimOutputFolder(`${tmp}/out`);
    const partial = `${folder.path}/${PARTIAL_FOLDER}`;
    await Deno.mkdir(`${partial}/checkpoint`);
    await Deno.writeTextFile(`${partial}/checkpoint/SHA256SUMS`, "sums");
    await Deno.writeTextFile(`${partial}/a.json`, "download");
    await Deno.writeTextFile(`${partial}/job.json`, "download");
    await Deno.writeTextFile(`${folder.path}/job.json`, "the user's");
    await assert.rejects(publishDownload(folder), (error: Error) => {
      assert.ok(error instanceof Deno.errors.AlreadyExists);
      assert.match(error.message, /Cannot move the download into .* as .*job\.json must not exist/);
      return true;
    });
    assert.equal(await Deno.readTextFile(`${folder.path}/job.json`), "the user's");
    // What had been moved is taken back; given back, the folder keeps the user's file only.
    await releaseOutputFolder(folder);
    assert.deepEqual(await names(folder.path), ["job.json"]);
  });
});

/** Starts a process that takes `dir` as a demo run does and holds it; resolves to what it took. */
async function holder(dir: string): Promise<{ child: Deno.ChildProcess; path: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./_claim_child.ts", import.meta.url).pathname, dir],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`Cannot take ${dir} in a child process: it exited first`);
    out += value;
  }
  await reader.cancel();
  return { child, path: out.trim() };
}

/** Kills process `pid` with SIGKILL (no clean-up runs) and waits until it has exited. */
async function killOutright(child: Deno.ChildProcess): Promise<void> {
  Deno.kill(child.pid, "SIGKILL");
  const status = await child.status;
  assert.equal(status.signal, "SIGKILL");
}

Deno.test("a killed run's unfinished download is removed by the next run; a live run's never is", async () => {
  await withTmp(async (tmp) => {
    const base = `${tmp}/out`;
    const killed = await holder(base);
    const live = await holder(base);
    assert.equal(killed.path, base);
    assert.equal(live.path, `${base}-2`);
    let next: OutputFolder | undefined;
    try {
      // While both run, both folders are theirs: passed over, nothing removed.
      const beside = await claimOutputFolder(base);
      assert.equal(beside.path, `${base}-3`);
      assert.equal(beside.reason, "holds another demo run's unfinished download");
      assert.deepEqual(beside.removedStale, []);
      await releaseOutputFolder(beside);

      await killOutright(killed.child);
      assert.deepEqual(await names(base), [PARTIAL_FOLDER]); // what SIGKILL leaves behind
      next = await claimOutputFolder(base);
      assert.equal(next.path, base);
      assert.equal(next.reason, null);
      assert.deepEqual(next.removedStale, [`${base}/${PARTIAL_FOLDER}`]);
      assert.equal(next.created, false);
      // The live run's folder is still its own.
      assert.deepEqual(await names(`${base}-2`), [PARTIAL_FOLDER]);
      const again = await claimOutputFolder(base);
      assert.equal(again.path, `${base}-3`);
      assert.deepEqual(again.removedStale, []);
      await releaseOutputFolder(again);
    } finally {
      if (next) await releaseOutputFolder(next);
      for (const { child } of [killed, live]) {
        try {
          Deno.kill(child.pid, "SIGKILL");
        } catch { /* exited already */ }
        await child.status;
      }
    }
  });
});

Deno.test("a partial folder without a lock file is kept: its run may be about to lock it", async () => {
  await withTmp(async (tmp) => {
    await Deno.mkdir(`${tmp}/out/${PARTIAL_FOLDER}`, { recursive: true });
    const taken = await claimOutputFolder(`${tmp}/out`);
    assert.equal(taken.path, `${tmp}/out-2`);
    assert.deepEqual(taken.removedStale, []);
    assert.deepEqual(await names(`${tmp}/out`), [PARTIAL_FOLDER]);
    await releaseOutputFolder(taken);
  });
});

Deno.test("a partial folder whose lock file cannot be opened is kept and passed over, not a failed run", async () => {
  await withTmp(async (tmp) => {
    // A lock this run cannot open (here a link to itself; another user's 0600 lock file alike)
    // says nothing of its run: the folder is passed over as before locks, not the demo stopped.
    await Deno.mkdir(`${tmp}/out/${PARTIAL_FOLDER}`, { recursive: true });
    await Deno.symlink(".lock", `${tmp}/out/${PARTIAL_FOLDER}/.lock`);
    const taken = await claimOutputFolder(`${tmp}/out`);
    assert.equal(taken.path, `${tmp}/out-2`);
    assert.equal(taken.reason, "holds another demo run's unfinished download");
    assert.deepEqual(taken.removedStale, []);
    assert.deepEqual(await names(`${tmp}/out/${PARTIAL_FOLDER}`), [".lock"]);
    await releaseOutputFolder(taken);
  });
});

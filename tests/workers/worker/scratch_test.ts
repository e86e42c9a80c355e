import assert from "node:assert/strict";
import { join } from "node:path";
import {
  createScratch,
  LOCKLESS_GRACE_MS,
  removeStaleScratch,
  SCRATCH_LOCK,
  scratchPrefix,
} from "../../../workers/worker/_scratch.ts";
import { createLogger } from "../../../jobs/mod.ts";
import { HandlerRegistry, Worker } from "../../../workers/worker/mod.ts";
import { openTestDatabase } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";

/** The pid of a process that has exited and been reaped (so no process has it now). */
async function deadPid(): Promise<number> {
  const child = new Deno.Command("true").spawn();
  await child.status;
  return child.pid;
}

/**
 * A folder `root` holding a dead worker's scratch folder (its lock file unheld) beside entries
 * that must stay; `live` is this process's folder, locked until `cleanup`.
 */
async function scratchRootWithLeftovers() {
  const root = await Deno.makeTempDir({ prefix: "seed-scratch-test-" });
  const dead = await deadPid();
  const stale = await Deno.makeTempDir({ dir: root, prefix: scratchPrefix(dead) });
  await Deno.writeTextFile(join(stale, SCRATCH_LOCK), "");
  await Deno.writeTextFile(join(stale, "write-1"), "a checkpoint part");
  const live = await createScratch(root);
  const kept = [
    // A live worker's folder: this process's, locked.
    live.path,
    // A folder just made, whose lock file is not there yet (and one of an older version whose
    // worker may live): without a lock, a folder is judged by its pid only after the grace.
    await Deno.makeTempDir({ dir: root, prefix: scratchPrefix(dead) }),
    // Names that only look alike.
    join(root, `seed-compute-${dead}`),
    join(root, `seed-compute-x${dead}-ab12`),
    join(root, `other-seed-compute-${dead}-ab12`),
    join(root, `seed-compute-${dead}-ab.12`),
  ];
  for (const path of kept.slice(2)) await Deno.mkdir(path);
  // A file with the exact name, and a link with the exact name to a folder elsewhere.
  const file = join(root, `${scratchPrefix(dead)}file1`);
  await Deno.writeTextFile(file, "not a folder");
  const target = await Deno.makeTempDir({ prefix: "seed-scratch-target-" });
  const link = join(root, `${scratchPrefix(dead)}link1`);
  await Deno.symlink(target, link);
  kept.push(file, link);
  const cleanup = async () => {
    live.remove();
    await Deno.remove(root, { recursive: true });
    await Deno.remove(target, { recursive: true });
  };
  return { root, stale, kept, target, cleanup };
}

const exists = (path: string) => Deno.lstat(path).then(() => true, () => false);

Deno.test("removeStaleScratch removes only scratch folders whose worker pid is dead", async () => {
  const { root, stale, kept, target, cleanup } = await scratchRootWithLeftovers();
  try {
    assert.deepEqual(await removeStaleScratch(root), [stale]);
    assert.equal(await exists(stale), false);
    for (const path of kept) assert.equal(await exists(path), true, `${path} must stay`);
    assert.equal(await exists(target), true);
    // A second pass finds nothing more.
    assert.deepEqual(await removeStaleScratch(root), []);
  } finally {
    await cleanup();
  }
});

Deno.test("a folder whose lock a live process holds is kept whatever its pid says; its lock dropped, it is removed", async () => {
  const root = await Deno.makeTempDir({ prefix: "seed-scratch-test-" });
  try {
    // The name carries a pid no process has here, as a worker in another pid namespace's folder
    // does when seen from this one; that worker holds the folder's lock.
    const dead = await deadPid();
    const path = await Deno.makeTempDir({ dir: root, prefix: scratchPrefix(dead) });
    const lock = await Deno.open(join(path, SCRATCH_LOCK), { write: true, createNew: true });
    await lock.lock(true);
    assert.deepEqual(await removeStaleScratch(root), []);
    assert.equal(await exists(path), true);
    lock.close(); // the owner dies: the kernel drops its lock
    assert.deepEqual(await removeStaleScratch(root), [path]);
    // A folder without a lock, written before the grace, whose pid is dead: an older version's.
    const old = await Deno.makeTempDir({ dir: root, prefix: scratchPrefix(dead) });
    const then = new Date(Date.now() - LOCKLESS_GRACE_MS - 60_000);
    await Deno.utime(old, then, then);
    assert.deepEqual(await removeStaleScratch(root), [old]);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

/** Whether this machine lets us run a process in a new pid namespace with its own /proc. */
const canUnshare = await new Deno.Command("unshare", {
  args: ["--pid", "--fork", "--mount-proc", "true"],
  stdout: "null",
  stderr: "null",
}).output().then((o) => o.success, () => false);

Deno.test({
  name:
    "a worker starting in another pid namespace keeps the scratch folder of a live worker in this one",
  ignore: !canUnshare,
  async fn() {
    const root = await Deno.makeTempDir({ prefix: "seed-scratch-test-" });
    const live = await createScratch(root);
    try {
      // The cleanup as a worker in a container of its own runs it: this process's pid is not in
      // its /proc, so the pid rule took the live folder for a dead worker's.
      const module = new URL("../../../workers/worker/_scratch.ts", import.meta.url).href;
      const out = await new Deno.Command("unshare", {
        args: [
          "--pid",
          "--fork",
          "--mount-proc",
          Deno.execPath(),
          "eval",
          `const { removeStaleScratch } = await import(${JSON.stringify(module)});` +
          `console.log(JSON.stringify({ pid: Deno.pid, removed: await removeStaleScratch(${
            JSON.stringify(root)
          }) }));`,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout);
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      const { pid, removed } = JSON.parse(text);
      assert.notEqual(pid, Deno.pid, "the cleanup ran in another pid namespace");
      assert.deepEqual(removed, []);
      assert.equal(await exists(live.path), true);
    } finally {
      live.remove();
      await Deno.remove(root, { recursive: true });
    }
  },
});

Deno.test("removeStaleScratch of a missing root removes nothing", async () => {
  assert.deepEqual(await removeStaleScratch("/nonexistent-seed-scratch-root"), []);
});

Deno.test("a worker removes dead workers' scratch folders in $TMPDIR when it starts", async () => {
  const { root, stale, kept, cleanup } = await scratchRootWithLeftovers();
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const before = Deno.env.get("TMPDIR");
  Deno.env.set("TMPDIR", root);
  try {
    const logs: string[] = [];
    const worker = new Worker({
      db,
      store: s3.store,
      workerId: "scratch-test",
      leaseMs: 3_000,
      pollMs: 50,
      reaperIntervalMs: 0,
      registry: new HandlerRegistry(),
      logger: createLogger({}, { sink: (l) => logs.push(l), level: "debug" }),
    });
    worker.drain(); // stops after its start, before it claims anything
    await worker.run();
    assert.equal(await exists(stale), false);
    for (const path of kept) assert.equal(await exists(path), true, `${path} must stay`);
    const line = logs.map((l) => JSON.parse(l)).find((l) =>
      l.msg === "removed stale scratch folders"
    );
    assert.deepEqual(line?.paths, [stale]);
  } finally {
    if (before === undefined) Deno.env.delete("TMPDIR");
    else Deno.env.set("TMPDIR", before);
    await s3.close();
    await close();
    await cleanup();
  }
});

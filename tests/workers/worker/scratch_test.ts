import assert from "node:assert/strict";
import { join } from "node:path";
import { removeStaleScratch, scratchPrefix } from "../../../workers/worker/_scratch.ts";
import { createLogger, HandlerRegistry, Worker } from "../../../workers/worker/mod.ts";
import { openTestDatabase } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";

/** The pid of a process that has exited and been reaped (so no process has it now). */
async function deadPid(): Promise<number> {
  const child = new Deno.Command("true").spawn();
  await child.status;
  return child.pid;
}

/** A folder `root` holding a dead worker's scratch folder beside entries that must stay. */
async function scratchRootWithLeftovers() {
  const root = await Deno.makeTempDir({ prefix: "seed-scratch-test-" });
  const dead = await deadPid();
  const stale = await Deno.makeTempDir({ dir: root, prefix: scratchPrefix(dead) });
  await Deno.writeTextFile(join(stale, "write-1"), "a checkpoint part");
  const kept = [
    // A live worker's folder: this process's.
    await Deno.makeTempDir({ dir: root, prefix: scratchPrefix(Deno.pid) }),
    // Names that only look alike.
    join(root, `seed-compute-${dead}`),
    join(root, `seed-compute-x${dead}-ab12`),
    join(root, `other-seed-compute-${dead}-ab12`),
    join(root, `seed-compute-${dead}-ab.12`),
  ];
  for (const path of kept.slice(1)) await Deno.mkdir(path);
  // A file with the exact name, and a link with the exact name to a folder elsewhere.
  const file = join(root, `${scratchPrefix(dead)}file1`);
  await Deno.writeTextFile(file, "not a folder");
  const target = await Deno.makeTempDir({ prefix: "seed-scratch-target-" });
  const link = join(root, `${scratchPrefix(dead)}link1`);
  await Deno.symlink(target, link);
  kept.push(file, link);
  const cleanup = async () => {
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

/**
 * Restarting over a data folder whose owner was SIGKILLed: its `pg.lock` stays behind, and the
 * pid written in it may belong to a live process again (a restarted container's process often
 * gets the same pid; any pid is reused eventually). Such a lock is stale and must be taken over.
 */
import assert from "node:assert/strict";
import { openDatabase, tenants } from "../../../jobs/mod.ts";

/** Opens the embedded database over a folder holding `lock` as `pg.lock`; checks it owns it. */
async function openOverStaleLock(lock: (dataDir: string) => Record<string, unknown>) {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-stale-lock-" });
  try {
    await Deno.writeTextFile(`${dataDir}/pg.lock`, JSON.stringify(lock(dataDir)));
    const db = await openDatabase({ dataDir, url: "" });
    try {
      await db.orm.insert(tenants).values({ name: "after-restart" });
      const written = JSON.parse(await Deno.readTextFile(`${dataDir}/pg.lock`));
      assert.equal(written.pid, Deno.pid);
      assert.equal(typeof written.start, "string");
    } finally {
      await db.close();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

Deno.test("a lock left by an earlier process with this process's pid is taken over", async () => {
  await openOverStaleLock(() => ({ pid: Deno.pid, start: "1", port: freePort() }));
});

Deno.test("a lock whose pid now names another live process is taken over", async () => {
  const other = new Deno.Command("sleep", { args: ["60"] }).spawn();
  try {
    await openOverStaleLock(() => ({ pid: other.pid, start: "1", port: freePort() }));
  } finally {
    other.kill("SIGKILL");
    await other.status;
  }
});

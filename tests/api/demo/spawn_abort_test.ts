/**
 * A demo's stop signal that lands while a child is being started (api/demo/processes.ts): the
 * start awaits its log file before it spawns, and a signal in that wait must start nothing, since
 * the demo has already stopped the children it knew of by the time the spawn would happen (such a
 * child would outlive the demo's cleanup, and the API would even be left out of it).
 */
import assert from "node:assert/strict";
import { type Child, createApiKey, spawnDeno, startApi } from "../../../api/demo/processes.ts";

/** An entry that would run for a minute if started. */
async function sleeperEntry(dir: string): Promise<string> {
  const path = `${dir}/sleeper.ts`;
  await Deno.writeTextFile(path, "await new Promise((r) => setTimeout(r, 60_000));\n");
  return path;
}

Deno.test("a start stopped while it opens its log starts no child and throws the stop's reason", async () => {
  const dir = await Deno.makeTempDir({ prefix: "seed-demo-spawn-abort-" });
  const started: Child[] = [];
  try {
    const reason = new Error("interrupted");
    // The worker's start: the stop comes right after the call, while the log file opens.
    const worker = new AbortController();
    const workerOptions = {
      name: "worker",
      entry: await sleeperEntry(dir),
      logPath: `${dir}/worker.log`,
      signal: worker.signal,
    };
    const spawning = spawnDeno(workerOptions);
    worker.abort(reason);
    await assert.rejects(spawning.then((c) => started.push(c)), (e) => e === reason);

    // The API's start: onSpawn would hand the demo a child it has already stopped everything of.
    const api = new AbortController();
    const apiOptions = {
      env: { SEED_DATA_DIR: `${dir}/data` },
      logPath: `${dir}/api.log`,
      onSpawn: (child: Child) => started.push(child),
      signal: api.signal,
    };
    const starting = startApi(apiOptions);
    api.abort(reason);
    await assert.rejects(starting, (e) => e === reason);

    // The key tool: stopped before it starts, it never runs.
    const keyOptions = {
      env: { SEED_DATA_DIR: `${dir}/data` },
      tenant: "demo",
      name: "demo-key",
      logPath: `${dir}/keys.log`,
      signal: AbortSignal.abort(reason),
    };
    await assert.rejects(createApiKey(keyOptions), (e) => e === reason);
    assert.deepEqual(started.map((c) => c.pid), []);
    assert.deepEqual((await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort(), [
      "api.log",
      "sleeper.ts",
      "worker.log",
    ]);
  } finally {
    for (const child of started) await child.stop(2000);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

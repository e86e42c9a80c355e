/**
 * `deno task api` as a user starts it: the task's own command line (deno.json) over a fresh data
 * folder (embedded PGlite and embedded S3 server), read until it listens.
 */
import assert from "node:assert/strict";

const repoRoot = new URL("../../", import.meta.url);

Deno.test("deno task api runs with --unstable-no-legacy-abort, as deno task serve does, and starts without Deno's legacy request-abort warning", async () => {
  const tasks = JSON.parse(await Deno.readTextFile(new URL("deno.json", repoRoot))).tasks;
  const args: string[] = tasks.api.split(/\s+/);
  assert.equal(args[0], "deno");
  assert.ok(args.includes("--unstable-no-legacy-abort"), tasks.api);
  assert.ok(tasks.serve.split(/\s+/).includes("--unstable-no-legacy-abort"), tasks.serve);
  // Without the flag, the embedded store's node:http server (s3rver) reads request.signal and
  // Deno prints its legacy-behaviour warning on the API's first lines.
  const dataDir = await Deno.makeTempDir({ prefix: "seed-data-" });
  const child = new Deno.Command(Deno.execPath(), {
    args: args.slice(1),
    cwd: repoRoot,
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "",
      HOME: Deno.env.get("HOME") ?? "",
      SEED_DATA_DIR: dataDir,
      PORT: "0",
    },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  try {
    const stderr = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "";
    while (!lines.some((l) => l.includes("api listening"))) {
      const { value, done } = await stderr.read();
      if (done) break;
      buffered += value;
      const parts = buffered.split("\n");
      buffered = parts.pop()!;
      lines.push(...parts);
    }
    stderr.releaseLock();
    assert.ok(lines.some((l) => l.includes("api listening")), lines.join("\n"));
    assert.deepEqual(lines.filter((l) => /legacy behavior|legacy-abort/.test(l)), []);
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await child.stderr.cancel().catch(() => {});
    await Deno.remove(dataDir, { recursive: true });
  }
});

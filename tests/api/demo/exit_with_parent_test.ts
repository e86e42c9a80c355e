/**
 * The demo's children end with the demo, however it ends: `kill -9` of the demo (which no handler
 * of its own sees) stops its API and worker through the pipe on their stdin
 * (`SEED_EXIT_WITH_PARENT`, jobs/exit_with_parent.ts); an API started without the opt-in keeps
 * running with stdin `/dev/null`, as under systemd or in a container.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { openDatabase } from "../../../jobs/mod.ts";
import { childrenOf, isAlive } from "../../_harness/proc.ts";

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const DEMO = `${REPO_ROOT}api/demo/main.ts`;
const API = `${REPO_ROOT}api/main.ts`;

/** Resolves once none of `pids` is alive; rejects naming those alive after `limitMs`. */
async function allExit(pids: number[], limitMs: number): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (pids.some(isAlive)) {
    if (Date.now() > deadline) {
      throw new Error(`still running ${limitMs} ms after the parent: ${pids.filter(isAlive)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Reads `stream` until a line matches `pattern`; returns all text read so far. */
async function readUntil(
  reader: ReadableStreamDefaultReader<string>,
  pattern: RegExp,
  text = "",
): Promise<string> {
  while (!pattern.test(text)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before ${pattern}:\n${text}`);
    text += value;
  }
  return text;
}

Deno.test("kill -9 of the demo stops its API, its worker and the worker's compute process soon after", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-test-" });
  // The worker runs a compute process whose steps spin 1 s (BLOCK_MS), so the demo is killed
  // while a job runs, as a user would kill a demo that takes too long.
  const demo = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      DEMO,
      ...["--worker", "tests/workers/worker/_compute_worker.ts", "--steps", "1000"],
      ...["--out", `${tmp}/out`, "--data-dir", `${tmp}/data`],
    ],
    env: { DATABASE_URL: "", S3_ENDPOINT: "", NO_COLOR: "1", BLOCK_MS: "1000" },
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = demo.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const pids: number[] = [];
  try {
    const stdout = await readUntil(reader, /\bjob [0-9a-f-]{36} queued/);
    const api = Number(stdout.match(/API listening on \S+ \(pid (\d+)\)/)?.[1]);
    const worker = Number(stdout.match(/worker started \(pid (\d+)/)?.[1]);
    assert.ok(api > 0 && worker > 0, stdout);
    pids.push(api, worker);
    const log = `${tmp}/data/worker.log`;
    for (let i = 0; i < 600 && childrenOf(worker).length === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(childrenOf(worker).length > 0, await Deno.readTextFile(log).catch(() => ""));
    pids.push(...childrenOf(worker));

    Deno.kill(demo.pid, "SIGKILL");
    assert.equal((await demo.status).signal, "SIGKILL");
    // Bound: the worker finishes its step (1 s) and the API its requests in flight; each closes
    // its connections within 10 s (SHUTDOWN_GRACE_MS, EXIT_DEADLINE_MS).
    await allExit(pids, 30_000);
    // Gracefully, as on SIGTERM (their logs went to the demo, which is gone): the database was
    // closed, which removes its lock file (a killed owner leaves it), and the worker drained,
    // releasing the job to the queue instead of leaving it running until its lease expires.
    await assert.rejects(Deno.stat(`${tmp}/data/pg.lock`), Deno.errors.NotFound);
    const db = await openDatabase({ url: "", dataDir: `${tmp}/data` });
    try {
      assert.deepEqual(await db.query("select status from jobs"), [{ status: "queued" }]);
    } finally {
      await db.close();
    }
  } finally {
    for (const pid of pids) {
      try {
        Deno.kill(pid, "SIGKILL");
      } catch { /* gone */ }
    }
    try {
      demo.kill("SIGKILL");
    } catch { /* gone */ }
    await demo.status;
    await reader.cancel().catch(() => {});
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});

/** Starts `api/main.ts` as `deno task api` does, on a free port over `dataDir`. */
function spawnApi(
  dataDir: string,
  options: { env?: Record<string, string>; stdin: "null" | "piped" },
): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-no-legacy-abort", API],
    cwd: REPO_ROOT,
    env: {
      SEED_DATA_DIR: dataDir,
      PORT: "0",
      DATABASE_URL: "",
      S3_ENDPOINT: "",
      NO_COLOR: "1",
      ...options.env,
    },
    stdin: options.stdin,
    stdout: "null",
    stderr: "piped",
  }).spawn();
}

Deno.test("an API started without SEED_EXIT_WITH_PARENT keeps serving with stdin /dev/null", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-data-" });
  const api = spawnApi(dataDir, { env: { SEED_EXIT_WITH_PARENT: "" }, stdin: "null" });
  const reader = api.stderr.pipeThrough(new TextDecoderStream()).getReader();
  try {
    const log = await readUntil(reader, /"msg":"api listening"/);
    const port = JSON.parse(log.split("\n").find((l) => l.includes("api listening"))!).port;
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.deepEqual(await health.json(), { status: "ok" });
    assert.ok(isAlive(api.pid));
    api.kill("SIGTERM");
    const rest = await readUntil(reader, /"msg":"stopping/, log);
    // It stops on our SIGTERM, once, and not before it (a /dev/null stdin is not a parent's exit).
    assert.equal(rest.match(/"msg":"stopping/g)?.length, 1, rest);
    assert.equal((await api.status).code, 0);
  } finally {
    try {
      api.kill("SIGKILL");
    } catch { /* gone */ }
    await api.status;
    await reader.cancel().catch(() => {});
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("an API opted in to SEED_EXIT_WITH_PARENT stops when its stdin pipe closes, and refuses a /dev/null stdin", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-data-" });
  const env = { SEED_EXIT_WITH_PARENT: "1" };
  const api = spawnApi(dataDir, { env, stdin: "piped" });
  const reader = api.stderr.pipeThrough(new TextDecoderStream()).getReader();
  try {
    await readUntil(reader, /"msg":"api listening"/);
    await api.stdin.close(); // what the kernel does when the parent exits
    assert.equal((await api.status).code, 0);

    const refused = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", API],
      cwd: REPO_ROOT,
      env: { SEED_DATA_DIR: dataDir, PORT: "0", ...env },
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(refused.stderr);
    assert.equal(refused.code, 1, stderr);
    assert.match(
      stderr,
      /Cannot exit with the parent as SEED_EXIT_WITH_PARENT=1 needs stdin to be a pipe the parent holds open: it is a terminal or a device such as \/dev\/null/,
    );
  } finally {
    try {
      api.kill("SIGKILL");
    } catch { /* gone */ }
    await api.status;
    await reader.cancel().catch(() => {});
    await Deno.remove(dataDir, { recursive: true });
  }
});

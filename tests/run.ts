/**
 * Test harness: `deno task test [deno test args…]`.
 *
 * Starts a throwaway Postgres cluster on a free loopback port (installing Debian's `postgresql`
 * first when no server binaries are found and we are root), makes sure Debian's `chromium` is
 * there for the browser tests (installed the same way), runs `deno test` with
 * `TEST_DATABASE_URL` pointing at it, stops the cluster by its pid, and ends with the line
 * `N passed, N failed` that CI reads. Exits non-zero when any test failed.
 *
 * `TEST_TIMEOUT_MIN` (default 30; a full run takes about 10 minutes) bounds the whole run: past it
 * the harness says which test was running, stops `deno test` by its pid (SIGTERM, SIGKILL 10 s
 * later) and fails, so a test that hangs ends CI with its name instead of running into CI's own
 * limit.
 */
import { ensureChromium } from "./_harness/chromium.ts";
import { startPostgres } from "../jobs/embedded/postgres_cluster.ts";

const pg = await startPostgres();
// Installed here, once and before any test's clock starts; a failure is left to the browser
// tests to report (they call it again).
await ensureChromium().catch((error) => console.error(`harness: ${error.message}`));
// A harness stopped by a signal (Ctrl-C, `timeout`) still stops its cluster.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  Deno.addSignalListener(signal, () => {
    pg.stop().finally(() => Deno.exit(130));
  });
}
let code = 1;
let passed = 0;
let failed = 0;
try {
  // The suite, and the tests of the benchmarks' own statistics (bench/tests/, beside the code
  // they test: the suite does not import bench/).
  const args = Deno.args.length > 0 ? Deno.args : ["tests/", "bench/tests/"];
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--no-check=remote", ...args],
    env: { TEST_DATABASE_URL: pg.url, PG_BIN_DIR: pg.binDir },
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const decoder = new TextDecoder();
  let tail = "";
  const limitMin = Number(Deno.env.get("TEST_TIMEOUT_MIN") ?? 30);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    // deno-lint-ignore no-control-regex
    const running = tail.replace(/\x1b\[[0-9;]*m/g, "").split("\n")
      .filter((l) => /^running \d+ tests? from |\.\.\.\s*$/.test(l)).slice(-3);
    console.error(
      `harness: the tests ran past TEST_TIMEOUT_MIN=${limitMin} min; stopping deno test ` +
        `(pid ${child.pid}). Still running:\n  ${running.join("\n  ")}`,
    );
    try {
      child.kill("SIGTERM");
    } catch { /* exited */ }
    setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch { /* exited */ }
    }, 10_000);
  }, limitMin * 60_000);
  for await (const chunk of child.stdout) {
    const text = decoder.decode(chunk, { stream: true });
    await Deno.stdout.write(chunk);
    tail = (tail + text).slice(-4000);
  }
  code = (await child.status).code;
  clearTimeout(timer);
  // Deno's summary line: "ok | 12 passed (3 steps) | 0 failed (1s)" or
  // "FAILED | 1 passed | 2 failed".
  // deno-lint-ignore no-control-regex
  const plain = tail.replace(/\x1b\[[0-9;]*m/g, "");
  const summary = plain.match(/(\d+) passed(?: \(\d+ steps?\))? \| (\d+) failed/g);
  if (summary) {
    const last = summary[summary.length - 1].match(/(\d+) passed.*\| (\d+) failed/)!;
    passed = Number(last[1]);
    failed = Number(last[2]);
  } else if (code !== 0) {
    failed = 1;
  }
  if (timedOut) failed = Math.max(failed, 1);
} finally {
  await pg.stop();
}
console.log(`${passed} passed, ${failed} failed`);
Deno.exit(code !== 0 || failed > 0 ? 1 : 0);

/**
 * Ctrl-C right at the start of `deno task demo`: a real demo process, signalled by its pid as
 * soon as it says where its data goes (its signal handlers are in place by then), while it takes
 * its output folder. It must start no child after the signal, give back the output folder it
 * took, say once that it was interrupted, and exit 130.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { isAlive } from "../../_harness/proc.ts";

const DEMO = fileURLToPath(new URL("../../../api/demo/main.ts", import.meta.url));

Deno.test("a demo interrupted while it takes its output folder starts nothing, leaves no folder and exits 130", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-interrupt-" });
  // An earlier run's output: the demo takes out-2, the folder it creates and must give back.
  await Deno.mkdir(`${tmp}/out`);
  await Deno.writeTextFile(`${tmp}/out/earlier.txt`, "kept");
  const demo = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", DEMO, "--out", `${tmp}/out`, "--data-dir", `${tmp}/data`],
    env: { DATABASE_URL: "", S3_ENDPOINT: "", NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(demo.stderr).text();
  const reader = demo.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let stdout = "";
  try {
    let signalled = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      stdout += value;
      if (!signalled && stdout.includes("data folder")) {
        Deno.kill(demo.pid, "SIGINT");
        signalled = true;
      }
    }
    const { code } = await demo.status;
    const said = `${stdout}\n${await stderr}`;
    assert.equal(code, 130, said);
    assert.equal(stdout.match(/^interrupted\b/gm)?.length, 1, said);
    const afterSignal = stdout.slice(stdout.indexOf("\ninterrupted"));
    assert.doesNotMatch(afterSignal, /starting the API|API key created|worker started/, said);
    // Every child it did start (before the line) is stopped and gone.
    for (const m of stdout.matchAll(/\(pid (\d+)\)/g)) {
      assert.equal(isAlive(Number(m[1])), false, `child ${m[1]} still runs:\n${said}`);
    }
    assert.deepEqual([...Deno.readDirSync(tmp)].map((e) => e.name).sort(), ["data", "out"]);
    assert.deepEqual([...Deno.readDirSync(`${tmp}/out`)].map((e) => e.name), ["earlier.txt"]);
  } finally {
    try {
      Deno.kill(demo.pid, "SIGKILL");
    } catch { /* gone */ }
    await demo.status;
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});

/**
 * The Python example of api/README.md ("From Python") runs as printed against the real server
 * (HTTP, Postgres, S3 server), with Python's `requests`: it submits, polls, lists by metadata,
 * reads the metrics and checkpoints and downloads the archive. The job is moved through its states
 * by this test standing in for a worker (claim, metrics, checkpoint, succeed).
 */
import assert from "node:assert/strict";
import {
  claimJob,
  fenceOf,
  type Job,
  recordMetrics,
  saveCheckpoint,
  succeedJob,
} from "../../jobs/mod.ts";
import { serveApi } from "../../api/main.ts";
import { startApiFixture } from "./_fixture.ts";

/** The README's Python block. */
async function readmePython(): Promise<string> {
  const readme = await Deno.readTextFile(new URL("../../api/README.md", import.meta.url));
  const block = /### From Python[\s\S]*?```python\n([\s\S]*?)```/.exec(readme);
  if (!block) throw new Error("Cannot find the Python example in api/README.md");
  return block[1];
}

const PYTHON = "/usr/bin/python3";
const hasRequests = await new Deno.Command(PYTHON, { args: ["-c", "import requests"] }).output()
  .then((o) => o.success).catch(() => false);

Deno.test({
  name: "the README's Python example runs against the real server",
  ignore: !hasRequests, // Debian's python3-requests; absent, there is nothing to run it with
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const fx = await startApiFixture();
    for (const [k, v] of Object.entries({ ...fx.s3Env, DATABASE_URL: fx.url })) Deno.env.set(k, v);
    const api = await serveApi({ port: 0 });
    const dir = await Deno.makeTempDir();
    try {
      await Deno.writeTextFile(`${dir}/example.py`, await readmePython());
      const child = new Deno.Command(PYTHON, {
        args: ["example.py"],
        cwd: dir,
        env: { SEED_API_URL: `http://127.0.0.1:${api.port}`, SEED_API_KEY: fx.keyA },
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      // Stand in for a worker: take the job the example queued and finish it.
      let job: Job | null = null;
      while (!job) {
        job = await claimJob(fx.db, { workerId: "w-readme", device: "cpu", leaseMs: 60_000 });
        if (!job) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(job.name, "sokoban-demo");
      assert.deepEqual(job.metadata, { sweep: "demo" });
      const fence = fenceOf(job);
      await recordMetrics(fx.db, fence, 10, { "eval/test_seen/success_rate": 0.5 });
      await saveCheckpoint(fx.db, fx.store, { fence, tenantId: fx.tenantA.id }, {
        step: 10,
        files: [{ name: "config.json", bytes: new TextEncoder().encode("{}") }],
      });
      await succeedJob(fx.db, fence);
      const out = await child.output();
      const stdout = new TextDecoder().decode(out.stdout);
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
      assert.match(
        stdout,
        new RegExp(
          `^${job.id} sokoban-demo builtin:tiny succeeded \\{'step': 10, 'success_rate': \\{'test_seen': 0\\.5\\}\\} None$`,
          "m",
        ),
      );
      const tar = await Deno.readFile(`${dir}/job-10.tar`);
      assert.equal(new TextDecoder().decode(tar.slice(0, 10)), "SHA256SUMS");
    } finally {
      await Deno.remove(dir, { recursive: true });
      await api.stop();
      await fx.close();
      for (const k of [...Object.keys(fx.s3Env), "DATABASE_URL"]) Deno.env.delete(k);
    }
  },
});

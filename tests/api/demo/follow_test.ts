import assert from "node:assert/strict";
import { SeedClient } from "../../../api/client/mod.ts";
import { followJob } from "../../../api/demo/progress.ts";

Deno.test("the demo's progress shows a warm-up's SFT steps that advance with no event between", async () => {
  const started = Date.now();
  // The job's warm-up advances one SFT step every 100 ms; its event stream sends one event, stays
  // silent for 900 ms, then ends (the job succeeded).
  const job = () => {
    const done = Math.min(8, Math.floor((Date.now() - started) / 100));
    const running = Date.now() - started < 900;
    return {
      id: "j1",
      status: running ? "running" : "succeeded",
      attempt: 1,
      max_attempts: 3,
      error: null,
      progress: { stage: "warmup_policy", step: 0, total_steps: 16, done, total: 8 },
      latest_metrics: null,
    };
  };
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/v1/jobs/j1") return Response.json(job());
    if (path === "/v1/jobs/j1/metrics") return Response.json({ names: [], points: [] });
    if (path === "/v1/jobs/j1/events") {
      const enc = new TextEncoder();
      const body = new ReadableStream<Uint8Array>({
        async start(c) {
          c.enqueue(
            enc.encode('id: 1\nevent: stage\ndata: {"data":{"stage":"warmup_policy"}}\n\n'),
          );
          await new Promise((r) => setTimeout(r, 1000));
          c.enqueue(enc.encode("event: end\ndata: {}\n\n"));
          c.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    }
    return new Response("not found", { status: 404 });
  });
  try {
    const client = new SeedClient({ baseUrl: `http://127.0.0.1:${server.addr.port}`, apiKey: "k" });
    let out = "";
    const final = await followJob(client, "j1", {
      io: { tty: false, write: (t) => void (out += t) },
      pollMs: 150,
    });
    assert.equal(final.status, "succeeded");
    // Several distinct SFT steps were printed although only one event arrived before the end.
    const seen = new Set(
      [...out.matchAll(/\] SFT step (\d)\/8 {2}warmup_policy/g)].map((m) => m[1]),
    );
    assert.ok(seen.size >= 3, `SFT steps printed: ${[...seen]}\n${out}`);
  } finally {
    await server.shutdown();
  }
});

Deno.test("the demo's last progress line counts the skills of the last step, whose metrics land after its progress", async () => {
  const started = Date.now();
  const ended = () => Date.now() - started >= 400;
  // The job is at step 10 from the start; step 10's metrics (7 skills) appear only when it ends.
  const job = () => ({
    id: "j1",
    status: ended() ? "succeeded" : "running",
    attempt: 1,
    max_attempts: 3,
    error: null,
    progress: { stage: "update", step: 10, total_steps: 10 },
    latest_metrics: null,
  });
  const metrics = () => ({
    names: ["skill_library_size"],
    points: [
      { step: 9, values: { skill_library_size: 6 } },
      ...(ended() ? [{ step: 10, values: { skill_library_size: 7 } }] : []),
    ],
  });
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, async (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/v1/jobs/j1") return Response.json(job());
    if (path === "/v1/jobs/j1/metrics") return Response.json(metrics());
    if (path === "/v1/jobs/j1/events") {
      await new Promise((r) => setTimeout(r, 600));
      return new Response("event: end\ndata: {}\n\n", {
        headers: { "content-type": "text/event-stream" },
      });
    }
    return new Response("not found", { status: 404 });
  });
  try {
    const client = new SeedClient({ baseUrl: `http://127.0.0.1:${server.addr.port}`, apiKey: "k" });
    let out = "";
    await followJob(client, "j1", {
      io: { tty: false, write: (t) => void (out += t) },
      pollMs: 100,
    });
    const lines = out.trim().split("\n");
    assert.match(lines[0], /skills 6/);
    assert.match(lines[lines.length - 1], /succeeded.*skills 7/, out);
  } finally {
    await server.shutdown();
  }
});

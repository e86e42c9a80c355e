import assert from "node:assert/strict";
import { SeedClient } from "../../../api/client/mod.ts";
import { followJob } from "../../../api/demo/progress.ts";

Deno.test("the demo's progress of a job queued again shows the run it waits for, not the lost run's bar, and none of it once a new run starts or it is cancelled there", async () => {
  const started = "2026-12-07T20:00:00.000Z";
  const run1 = { stage: "rollout", step: 3, total_steps: 8, eta_s: 100 };
  // What the API answers as the job goes on: its run 1 is lost at update 3 (the reaper requeues
  // it with the progress left as it was), run 2 is claimed (the claim clears the progress) and
  // lost before writing any, and the job is cancelled in the queue for run 3.
  const phases = [
    { status: "running", attempt: 0, progress: run1 },
    { status: "queued", attempt: 1, progress: run1 },
    { status: "running", attempt: 1, progress: null },
    { status: "queued", attempt: 2, progress: null },
    { status: "cancelled", attempt: 2, progress: { stage: "queued" } },
  ];
  let phase = 0;
  // Each event waits until the demo has read the job in the phase the event announces.
  let read: () => void = () => {};
  const job = () => ({
    id: "j1",
    max_attempts: 3,
    error: null,
    latest_metrics: null,
    started_at: started,
    ...phases[phase],
  });
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/v1/jobs/j1") {
      const body = job();
      read();
      return Response.json(body);
    }
    if (path === "/v1/jobs/j1/metrics") return Response.json({ names: [], points: [] });
    if (path === "/v1/jobs/j1/events") {
      const enc = new TextEncoder();
      const body = new ReadableStream<Uint8Array>({
        async start(c) {
          for (let k = 0; k < phases.length; k++) {
            phase = k;
            const seen = new Promise<void>((r) => read = r);
            const data = JSON.stringify({ data: { status: phases[k].status } });
            c.enqueue(enc.encode(`id: ${k + 1}\nevent: status\ndata: ${data}\n\n`));
            await seen;
          }
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
      pollMs: 60_000,
    });
    assert.equal(final.status, "cancelled");
    const lines = out.trim().split("\n");
    // Run 1 under way: its bar and ETA.
    assert.ok(lines.some((l) => /3\/8 {2}rollout {2}ETA/.test(l)), out);
    // Queued again: the run it waits for, not run 1's count and stage.
    assert.ok(lines.includes("queued again: run 2 of at most 3"), out);
    // From then on nothing of run 1 (its count, stage or ETA) is shown.
    const after = lines.slice(lines.indexOf("queued again: run 2 of at most 3"));
    assert.deepEqual(after.filter((l) => /3\/8|rollout|ETA/.test(l)), [], out);
    assert.equal(lines[lines.length - 1], "cancelled while queued again: run 3 of at most 3", out);
  } finally {
    await server.shutdown();
  }
});

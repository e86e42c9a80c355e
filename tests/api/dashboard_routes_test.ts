import assert from "node:assert/strict";
import { createApp } from "../../api/app.ts";
import { parseJobSpec } from "../../jobs/mod.ts";
import { fenceOf, saveSkillLibrary } from "../../jobs/mod.ts";
import { req, runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();

Deno.test("the dashboard page and its files carry a CSP without inline script", async () => {
  for (const path of ["/", "/dashboard/main.js", "/dashboard/vendor/uPlot.iife.min.js"]) {
    const res = await req(fx.app, "GET", path);
    assert.equal(res.status, 200, path);
    const csp = res.headers.get("content-security-policy")!;
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self';/);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    const body = await res.text();
    if (path === "/") assert.match(body, /<script type="module" src="\/dashboard\/main.js">/);
    if (path.endsWith("uPlot.iife.min.js")) assert.match(body, /uPlot/);
  }
  assert.match((await req(fx.app, "GET", "/")).headers.get("content-type")!, /^text\/html/);
});

Deno.test("the page names its icon, and the icon is served as SVG", async () => {
  const html = await (await req(fx.app, "GET", "/")).text();
  assert.match(html, /<link rel="icon" href="\/dashboard\/favicon.svg" type="image\/svg\+xml">/);
  const res = await req(fx.app, "GET", "/dashboard/favicon.svg");
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "image/svg+xml");
  assert.match(await res.text(), /^<svg /);
});

Deno.test("the dashboard serves only its own files", async () => {
  for (
    const path of [
      "/dashboard/routes.ts",
      "/dashboard/..%2Froutes.ts",
      "/dashboard/vendor/uPlot.cjs.js",
      "/dashboard/%2e%2e%2f%2e%2e%2fdeno.json",
    ]
  ) {
    const res = await req(fx.app, "GET", path);
    assert.equal(res.status, 404, path);
    await res.body?.cancel();
  }
});

Deno.test("every preset of the job editor is a valid JobSpec", async () => {
  const presets = await (await req(fx.app, "GET", "/dashboard/presets.json")).json();
  assert.deepEqual(Object.keys(presets).slice(0, 2), ["minimal", "sokoban"]);
  for (const [name, spec] of Object.entries(presets)) {
    assert.doesNotThrow(() => parseJobSpec(spec), name);
  }
});

/** Reads SSE messages of `res` until `until` returns true; returns them. */
async function readMessages(
  res: Response,
  until: (messages: { event: string; data: string }[]) => boolean | Promise<boolean>,
): Promise<{ event: string; data: string }[]> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const messages: { event: string; data: string }[] = [];
  let buffer = "";
  try {
    while (!(await until(messages))) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = block.match(/^event: (.*)$/m)?.[1];
        const data = block.match(/^data: (.*)$/m)?.[1];
        if (event && data !== undefined) messages.push({ event, data });
      }
    }
  } finally {
    await reader.cancel();
  }
  return messages;
}

Deno.test("the live job list sends the page at once and again when a job changes", async () => {
  // A 10-minute poll: only NOTIFY can deliver the changes below.
  const app = createApp({ db: fx.db, store: fx.store, sse: { pollMs: 600_000 }, authCacheMs: 0 });
  const running = await runningJob(fx, fx.keyB);
  const res = await req(app, "GET", "/v1/jobs?status=running,cancelling", {
    key: fx.keyB,
    headers: { accept: "text/event-stream" },
  });
  assert.match(res.headers.get("content-type")!, /^text\/event-stream/);
  const plain = await (await req(fx.app, "GET", "/v1/jobs?status=running,cancelling", {
    key: fx.keyB,
  })).json();
  const messages = await readMessages(res, async (ms) => {
    if (ms.length === 1) {
      // Another tenant's job and a queued one change nothing this list shows; the cancel does.
      await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: { env: { id: "sokoban" } } });
      await req(fx.app, "POST", "/v1/jobs", { key: fx.keyB, json: { env: { id: "sokoban" } } });
      await req(fx.app, "POST", `/v1/jobs/${running.id}/cancel`, { key: fx.keyB });
    }
    return ms.length === 2;
  });
  assert.deepEqual(messages.map((m) => m.event), ["jobs", "jobs"]);
  const [first, second] = messages.map((m) => JSON.parse(m.data));
  assert.deepEqual(first, plain);
  assert.deepEqual(first.jobs.map((j: { id: string }) => j.id), [running.id]);
  assert.deepEqual(second.jobs.map((j: { status: string }) => j.status), ["cancelling"]);
});

Deno.test("the skill library steps list each saved library with its skill count", async () => {
  const job = await runningJob(fx, fx.keyA);
  const writer = { fence: fenceOf(job), tenantId: fx.tenantA.id };
  for (const [step, count] of [[0, 0], [2, 3]]) {
    await saveSkillLibrary(fx.db, fx.store, writer, {
      step,
      json: { version: 1, job_id: job.id, step, skills: [] },
      skillCount: count,
    });
  }
  const res = await req(fx.app, "GET", `/v1/jobs/${job.id}/skills/steps`, { key: fx.keyA });
  assert.equal(res.status, 200);
  const { steps } = await res.json();
  assert.deepEqual(
    steps.map((s: { step: number; skill_count: number }) => [s.step, s.skill_count]),
    [
      [0, 0],
      [2, 3],
    ],
  );
  const other = await req(fx.app, "GET", `/v1/jobs/${job.id}/skills/steps`, { key: fx.keyB });
  assert.equal(other.status, 404);
  await other.body?.cancel();
});

Deno.test({
  name: "close the dashboard route fixture",
  fn: () => fx.close(),
  sanitizeOps: false,
  sanitizeResources: false,
});

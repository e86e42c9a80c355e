/**
 * Progress inside the warm-up stages, through the real parts: a real worker runs an `sft` job on
 * Postgres and the S3 protocol; while it runs, each progress write is read back through the API
 * (`GET /v1/jobs/{id}`) and rendered as `seed status` and the dashboard render it; afterwards
 * `seed follow` replays the job's events over HTTP (off a terminal). The policy stage reports
 * its SFT steps with their loss, the analyzer stage the turns of its trajectories, then its SFT
 * steps; a `warmup_progress` event marks each tenth of a phase.
 */
import assert from "node:assert/strict";
import { createKey, type JobEvent, listEvents } from "../../../../jobs/mod.ts";
import { createApp } from "../../../../api/app.ts";
import { cliMain } from "../../../../api/client/cli.ts";
import { describe } from "../../../../api/client/cli_format.ts";
import { progressText } from "../../../../api/dashboard/static/jobs.js";
import { stageReporter } from "../../../../workers/seed/run/warmup_stage.ts";
import { openJobHarness, runOne, tinySpec, trainerRegistry } from "../_jobs.ts";
import { Worker } from "../../../../workers/worker/mod.ts";

Deno.test("the warm-up reports SFT steps with their loss and the analyzer's trajectory turns to status, the dashboard and follow", async () => {
  await using h = await openJobHarness();
  const [{ name }] = await h.db.query<{ name: string }>(
    `select name from tenants where id = $1::uuid`,
    [h.tenantId],
  );
  const { key } = await createKey(h.db, name);
  const app = createApp({ db: h.db, store: h.store, authCacheMs: 0 });
  const auth = { authorization: `Bearer ${key}` };
  const job = await h.submit(tinySpec({
    method: "sft",
    env: { id: "sokoban", max_turns: 3, history: 0 },
    warmup: {
      policy: { episodes: 4, epochs: 2, batch_size: 2 },
      analyzer: { episodes: 3, epochs: 2, batch_size: 2 },
    },
  }));

  // Each progress write, read back through the API as soon as it is stored.
  // (the ETA, the step clock's (eta.ts), is left out: not this test's subject)
  const seen: { progress: Record<string, unknown>; status: string; dashboard: string }[] = [];
  const registry = trainerRegistry((handler) => (ctx) =>
    handler({
      ...ctx,
      get draining() {
        return ctx.draining;
      },
      setProgress: async (p) => {
        await ctx.setProgress(p);
        const res = await app.request(`/v1/jobs/${job.id}`, { headers: auth });
        const view = await res.json();
        const { eta_s: _eta, ...progress } = view.progress;
        seen.push({
          progress,
          status: describe(view),
          dashboard: progressText(view),
        });
      },
    })
  );
  const worker = new Worker({
    db: h.db,
    store: h.store,
    registry,
    pollMs: 50,
    reaperIntervalMs: 0,
  });
  assert.equal(await runOne(worker), "succeeded", await h.error(job.id));

  // the policy stage: its SFT steps, in order, each with a finite loss, up to the planned total
  const policy = seen.filter((s) => s.progress.stage === "warmup_policy" && s.progress.phase);
  assert.ok(policy.length >= 2, JSON.stringify(seen.map((s) => s.progress)));
  const total = policy[0].progress.total as number;
  assert.ok(total >= 4);
  assert.deepEqual(policy[0].progress, {
    stage: "warmup_policy",
    step: 0,
    total_steps: 0,
    phase: "sft",
    unit: "steps",
    done: 0,
    total,
  });
  const last = policy.at(-1)!.progress;
  assert.equal(last.done, total);
  assert.ok(Number.isFinite(last.loss) && (last.loss as number) > 0);
  assert.match(
    policy.at(-1)!.status,
    new RegExp(
      `progress  \\[#{24}\\] SFT step ${total}/${total}  running  warmup_policy  loss \\d+\\.\\d{3}( |\\n)`,
    ),
  );
  assert.match(policy.at(-1)!.dashboard, new RegExp(`SFT step ${total}/${total}, loss \\d`));

  // the analyzer stage: its trajectories turn by turn (3 episodes, 3 turns at most), then SFT
  const analyzer = seen.filter((s) => s.progress.stage === "warmup_analyzer");
  const turns = analyzer.filter((s) => s.progress.phase === "trajectories");
  assert.deepEqual(turns[0].progress, {
    stage: "warmup_analyzer",
    step: 0,
    total_steps: 0,
    phase: "trajectories",
    unit: "turns",
    done: 0,
    total: 3,
    episodes: 3,
  });
  assert.ok(turns.length >= 2);
  assert.ok(
    turns[0].status.includes("trajectories turn 0/3  running  warmup_analyzer  3 episodes playing"),
    turns[0].status,
  );
  assert.match(turns[0].dashboard, /^warmup_analyzer · trajectories: turn 0\/3/);
  const sft = analyzer.filter((s) => s.progress.phase === "sft");
  assert.ok(sft.length >= 2);
  assert.ok(analyzer.indexOf(turns.at(-1)!) < analyzer.indexOf(sft[0]));
  assert.equal(sft.at(-1)!.progress.done, sft[0].progress.total);

  // the events: one per tenth of each phase, the last at its end
  const events = (await listEvents(h.db, job.id, { limit: 1000 }))
    .filter((e: JobEvent) => e.type === "warmup_progress")
    .map((e) => e.data as Record<string, number | string>);
  const policyEvents = events.filter((e) => e.stage === "warmup_policy");
  assert.ok(policyEvents.length >= 2 && policyEvents.length <= 10);
  assert.deepEqual(
    policyEvents.map((e) => e.done),
    [...policyEvents.map((e) => e.done as number)].sort((a, b) => a - b),
  );
  assert.equal(policyEvents.at(-1)!.done, total);
  assert.ok(policyEvents.every((e) => typeof e.loss === "number"));
  assert.ok(
    events.some((e) =>
      e.stage === "warmup_analyzer" && e.phase === "trajectories" && Number(e.done) >= 1
    ),
  );

  // `seed follow` off a terminal, over HTTP: a line per such event
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, app.fetch);
  try {
    let out = "";
    const code = await cliMain(["follow", job.id], {
      out: (t) => out += t,
      err: () => {},
      tty: false,
      env: (n) => ({ SEED_API_URL: `http://127.0.0.1:${server.addr.port}`, SEED_API_KEY: key })[n],
    });
    assert.equal(code, 0);
    assert.match(
      out,
      new RegExp(`warmup_policy: SFT step ${total}/${total}, loss \\d+\\.\\d{3}\\n`),
    );
    assert.match(out, /warmup_analyzer: trajectories: turn \d\/3, \d episodes playing\n/);
    assert.match(out, /warmup_analyzer: SFT step \d+\/\d+, loss \d/);
  } finally {
    await server.shutdown();
  }
});

Deno.test("a stage reporter writes the first and last progress of a phase and an event per tenth", async () => {
  const writes: Record<string, unknown>[] = [];
  const events: Record<string, unknown>[] = [];
  const report = stageReporter(
    {
      setProgress: (p) => Promise.resolve(void writes.push(p)),
      emit: (_type, data) => Promise.resolve(void events.push(data!)),
    },
    "warmup_policy",
    10,
    Infinity,
  );
  for (let done = 0; done <= 20; done++) {
    await report({ phase: "sft", unit: "steps", done, total: 20, loss: 1 / (done + 1) });
  }
  // everyMs = ∞: only the phase's first write, one per event, and the last
  assert.deepEqual(writes.map((w) => w.done), [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20]);
  assert.deepEqual(events.map((e) => e.done), [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]);
  assert.deepEqual(events[0], {
    stage: "warmup_policy",
    phase: "sft",
    unit: "steps",
    done: 2,
    total: 20,
    loss: 1 / 3,
  });
  assert.equal(writes[0].totalSteps, 10);
  await report({ phase: "trajectories", unit: "turns", done: 0, total: 3, episodes: 4 });
  assert.equal(writes.at(-1)!.phase, "trajectories");
});

/**
 * The dashboard's pure helpers (the page's own modules, imported as they are served): number and
 * tick formatting, the sign-in return location, and the alignment of several jobs' curves.
 */
import assert from "node:assert/strict";
import { num, percent, percentPoints, tickLabels } from "../../api/dashboard/static/format.js";
import { safeNext } from "../../api/dashboard/static/api.js";
import { alignRuns, defaultMetric } from "../../api/dashboard/static/compare.js";
import { metricAxisLabel } from "../../api/dashboard/static/charts.js";
import { etaClock } from "../../api/dashboard/static/eta.js";
import {
  etaLeft,
  queuedAgain,
  stageCount,
  stageDetail,
  warmupStep,
} from "../../api/dashboard/static/stage_progress.js";
import {
  copyBody,
  labelsOf,
  metadataFilter,
  progressShare,
  progressText,
  resultText,
  runText,
} from "../../api/dashboard/static/jobs.js";

Deno.test("numbers keep their significant digits below 1 and never print -0", () => {
  assert.equal(num(-0.00035), "-0.00035");
  assert.equal(num(0.12345), "0.123");
  assert.equal(num(123.45678), "123.457");
  assert.equal(num(-1e-12), "-1e-12");
  assert.equal(num(-0), "0");
  assert.equal(num(0), "0");
  assert.equal(num(null), "—");
  assert.equal(num(Number.NaN), "—");
});

Deno.test("rates read as percentages and their differences as percentage points, one decimal", () => {
  assert.equal(percent(0.8125), "81.3%");
  assert.equal(percent(0), "0.0%");
  assert.equal(percent(undefined), "—");
  assert.equal(percentPoints(0.40625 - 0.5), "-9.4");
  assert.equal(percentPoints(0.173), "17.3");
  // A difference that rounds to zero is not "-0.0".
  assert.equal(percentPoints(-0.0004), "0.0");
  assert.equal(percentPoints(Number.NaN), "—");
});

Deno.test("tick labels carry the decimals their spacing needs, with a minus and no -0", () => {
  assert.deepEqual(tickLabels([-0.005, -0.0025, 0, 0.0025, 0.005]), [
    "-0.0050",
    "-0.0025",
    "0",
    "0.0025",
    "0.0050",
  ]);
  // A zero computed as a tiny float prints as 0.
  assert.deepEqual(tickLabels([-0.004, -0.002, 2e-18, 0.002]), ["-0.004", "-0.002", "0", "0.002"]);
  assert.deepEqual(tickLabels([-1e-19, 1, 2]), ["0", "1", "2"]);
  assert.deepEqual(tickLabels([0, 20, 40]), ["0", "20", "40"]);
  assert.deepEqual(tickLabels([0.1, 0.2, 0.30000000000000004]), ["0.1", "0.2", "0.3"]);
});

Deno.test("sign-in returns only to a location of the page itself", () => {
  assert.equal(
    safeNext("#/jobs/0b0e4e8e-8a3a-4f59-9a49-0d6f3c1f2a11"),
    "#/jobs/0b0e4e8e-8a3a-4f59-9a49-0d6f3c1f2a11",
  );
  assert.equal(safeNext("#/jobs?status=failed&page=abc_-"), "#/jobs?status=failed&page=abc_-");
  for (
    const bad of [
      null,
      "",
      "https://evil.example/",
      "//evil.example",
      "/#/jobs",
      "javascript:alert(1)",
      "#/signin?next=https://evil.example/",
      "#/jobs/\n",
      '#/jobs/"><img>',
      `#/${"a".repeat(3000)}`,
    ]
  ) assert.equal(safeNext(bad), "#/jobs", String(bad));
});

Deno.test("several jobs' curves align on the union of their steps", () => {
  const runs: { label: string; points: { step: number; values: Record<string, number> }[] }[] = [
    { label: "a", points: [{ step: 0, values: { m: 1 } }, { step: 2, values: { m: 3 } }] },
    {
      label: "b",
      points: [{ step: 1, values: { m: 5 } }, { step: 2, values: { x: 9 } }, {
        step: 2,
        values: { m: 7 },
      }],
    },
  ];
  assert.deepEqual(alignRuns(runs, "m"), {
    steps: [0, 1, 2],
    series: [{ label: "a", values: [1, null, 3] }, { label: "b", values: [null, 5, 7] }],
  });
  assert.equal(defaultMetric(["mean_reward", "success_rate"]), "success_rate");
  assert.equal(
    defaultMetric(["eval/test_seen/success_rate", "success_rate"]),
    "eval/test_seen/success_rate",
  );
  assert.equal(metricAxisLabel("eval/test_seen/success_rate"), "fraction (0–1)");
  assert.equal(metricAxisLabel("seconds_rollout"), "seconds");
  assert.equal(metricAxisLabel("teacher_gap_mean"), "nats/token");
  assert.equal(metricAxisLabel("pg_loss"), "loss (token mean)");
});

Deno.test("a job's name, metadata and result read from its JSON, absent fields as none", () => {
  assert.deepEqual(labelsOf({ id: "x" }), { name: null, metadata: {} });
  assert.deepEqual(labelsOf({ name: null, metadata: null }), { name: null, metadata: {} });
  assert.deepEqual(labelsOf({ name: "<b>run 1</b>", metadata: { team: "rl" } }), {
    name: "<b>run 1</b>",
    metadata: { team: "rl" },
  });
  const latest = {
    "eval/test_seen/success_rate": 0.8125,
    "eval/test_unseen/success_rate": 0.75,
    success_rate: 0.5,
    step: 8,
  };
  assert.equal(
    resultText({ status: "succeeded", latest_metrics: latest }),
    "test_seen 81.3% · test_unseen 75.0%",
  );
  assert.equal(
    resultText({ status: "succeeded", latest_metrics: { success_rate: 0.5 } }),
    "train 50.0%",
  );
  assert.equal(resultText({ status: "failed", latest_metrics: latest }), "");
  assert.equal(resultText({ status: "succeeded", latest_metrics: null }), "");
});

Deno.test("an edited copy carries the name with (copy) and the metadata above the spec", () => {
  const spec = { env: { id: "sokoban" }, steps: 2 };
  const copy = copyBody({ name: "run 1", metadata: { team: "rl" }, spec });
  assert.deepEqual(copy, { name: "run 1 (copy)", metadata: { team: "rl" }, ...spec });
  assert.deepEqual(Object.keys(copy).slice(0, 2), ["name", "metadata"]);
  // Within the API's 128 characters, cut from the name (by code point), not the suffix.
  const long = copyBody({ name: "é".repeat(128), metadata: {}, spec });
  assert.equal([...long.name as string].length, 128);
  assert.match(long.name as string, /^é{121} \(copy\)$/);
  // An unlabelled job's copy is its spec alone.
  assert.deepEqual(copyBody({ name: null, metadata: {}, spec }), spec);
});

Deno.test("the metadata filter reads key=value, splitting at the first =", () => {
  assert.equal(metadataFilter("  "), null);
  assert.deepEqual(metadataFilter("team=rl"), { key: "team", value: "rl" });
  assert.deepEqual(metadataFilter(" run = a=b "), { key: "run", value: "a=b" });
  assert.deepEqual(metadataFilter("note="), { key: "note", value: "" });
  for (const bad of ["team", "=rl"]) {
    const e = metadataFilter(bad);
    assert.ok(e instanceof Error, bad);
    assert.match(e.message, new RegExp(`must read key=value: current value is ${bad}$`));
  }
});

Deno.test("a job's run counts from 1, where the API's attempt counts from 0", () => {
  const started = "2026-12-07T12:00:00Z";
  assert.equal(runText({ attempt: 0, max_attempts: 3, started_at: started }), "1 of at most 3");
  // Requeued twice by the reaper: the last run it may have.
  assert.equal(runText({ attempt: 2, max_attempts: 3, started_at: started }), "3 of at most 3");
  assert.equal(
    runText({ attempt: 0, max_attempts: 3, started_at: null }),
    "not started (at most 3 runs)",
  );
});

Deno.test("a job in its warm-up shows the stage's own count, not the updates' 0 of N", () => {
  const progress = { stage: "warmup_policy", step: 0, total_steps: 10, phase: "sft", done: 336 };
  const warm = { status: "running", progress: { ...progress, total: 1120, loss: 0.41234 } };
  assert.equal(progressText(warm), "warmup_policy · SFT step 336/1120, loss 0.412");
  assert.equal(progressShare(warm), 0.3);
  const turns = {
    status: "running",
    progress: { stage: "warmup_analyzer", step: 0, total_steps: 10, phase: "trajectories" },
  };
  const playing = { ...turns, progress: { ...turns.progress, done: 5, total: 20, episodes: 187 } };
  assert.equal(
    progressText(playing),
    "warmup_analyzer · trajectories: turn 5/20, 187 episodes playing",
  );
  assert.equal(progressShare(playing), 0.25);
  // Without a count, and after the warm-up, the updates.
  assert.equal(progressText(turns), "warmup_analyzer 0/10");
  assert.equal(progressShare(turns), 0);
  const rollout = { status: "running", progress: { stage: "rollout", step: 4, total_steps: 10 } };
  assert.equal(progressText(rollout), "rollout 4/10");
  assert.equal(progressShare(rollout), 0.4);
  // A job that failed or was cancelled in its warm-up shows where it stopped, as seed status and
  // seed list do (warm-up 336/1120), not the updates' 0/10.
  const failed = { ...warm, status: "failed" };
  assert.equal(progressText(failed), "warmup_policy · SFT step 336/1120, loss 0.412");
  assert.equal(progressShare(failed), 0.3);
  const cancelled = { ...playing, status: "cancelled" };
  assert.equal(
    progressText(cancelled),
    "warmup_analyzer · trajectories: turn 5/20, 187 episodes playing",
  );
  assert.equal(progressShare(cancelled), 0.25);
  // A succeeded job's bar is full, whatever its progress says.
  assert.equal(progressShare({ ...rollout, status: "succeeded" }), 1);
});

Deno.test("a warm-up phase with nothing planned says so, not 0/0, and its bar counts the updates", () => {
  const none = { stage: "warmup_analyzer", step: 0, total_steps: 10, done: 0, total: 0 };
  const sft = { status: "running", progress: { ...none, phase: "sft", loss: 1.5 } };
  assert.equal(stageDetail(sft.progress), "SFT: no steps");
  assert.equal(progressText(sft), "warmup_analyzer 0/10 · SFT: no steps");
  assert.equal(progressShare(sft), 0);
  const turns = { status: "running", progress: { ...none, phase: "trajectories", episodes: 0 } };
  assert.equal(progressText(turns), "warmup_analyzer 0/10 · trajectories: no turns");
  assert.equal(stageCount(turns.progress), null);
  assert.equal(warmupStep(turns.progress), "warm-up");
});

Deno.test("the dashboard and the CLI read a warm-up's progress and a job queued again with the same module", async () => {
  const cli = await import("../../api/client/progress.ts");
  const page = await import("../../api/dashboard/static/stage_progress.js");
  assert.equal(cli.stageCount, page.stageCount);
  assert.equal(cli.stageDetail, page.stageDetail);
  assert.equal(cli.warmupStep, page.warmupStep);
  assert.equal(cli.queuedAgain, page.queuedAgain);
  assert.equal(cli.queuedAgainText, page.queuedAgainText);
  assert.equal(cli.cancelledInQueueText, page.cancelledInQueueText);
});

Deno.test("a job queued again after a run says which run it waits for, not the last run's stage", () => {
  const last = { stage: "rollout", step: 3, total_steps: 8, eta_s: 120 };
  const started = "2026-12-07T12:00:00Z";
  // Requeued by the reaper (lease expired): attempt 1, its second run.
  const retry = {
    status: "queued",
    attempt: 1,
    max_attempts: 3,
    started_at: started,
    progress: last,
  };
  assert.ok(queuedAgain(retry));
  assert.equal(progressText(retry), "queued again: run 2 of at most 3");
  assert.equal(progressShare(retry), 0);
  // Given back by a stopping worker: the same run, not used up.
  const resumed = { ...retry, attempt: 0 };
  assert.equal(progressText(resumed), "queued to resume: run 1 of at most 3");
  // Run 2 given back by a stopping worker reads as a lost run 1 does: the job row is the same.
  const released = { ...retry, attempt: 1 };
  assert.equal(progressText(released), "queued again: run 2 of at most 3");
  // Never started, and running again: as before.
  const fresh = { status: "queued", attempt: 0, max_attempts: 3, started_at: null, progress: null };
  assert.ok(!queuedAgain(fresh));
  assert.equal(progressText(fresh), "");
  const running = { ...retry, status: "running" };
  assert.equal(progressText(running), "rollout 3/8");
  assert.equal(progressShare(running), 3 / 8);
});

Deno.test("a job cancelled while queued again says so, without the last run's stage or bar", () => {
  // The cancel in the queue sets its progress to `{stage: "queued"}` (jobs/queue.ts `cancel`).
  const cancelled = {
    status: "cancelled",
    attempt: 1,
    max_attempts: 3,
    started_at: "2026-12-07T12:00:00Z",
    progress: { stage: "queued" },
  };
  assert.equal(progressText(cancelled), "cancelled while queued again: run 2 of at most 3");
  assert.equal(progressShare(cancelled), 0);
  assert.equal(
    progressText({ ...cancelled, attempt: 0 }),
    "cancelled while queued to resume: run 1 of at most 3",
  );
  // Cancelled while running: where the run stopped, as before.
  const stopped = { ...cancelled, progress: { stage: "rollout", step: 3, total_steps: 8 } };
  assert.equal(progressText(stopped), "rollout 3/8");
});

Deno.test("a running job's ETA counts down from when its progress was first seen, never below 0", () => {
  // 58 s left when read at t = 100 s: 25 s later (the next progress not yet written) 33 s are left.
  assert.equal(etaLeft(58, 100_000, 100_000), 58);
  assert.equal(etaLeft(58, 100_000, 125_000), 33);
  assert.equal(etaLeft(58, 100_000, 170_000), 0);
  // A reading time after now (a clock stepped back) counts as no time passed.
  assert.equal(etaLeft(58, 100_000, 90_000), 58);

  const readAt = etaClock();
  const job = { id: "a", status: "running", progress: { stage: "rollout", step: 3, eta_s: 58 } };
  assert.equal(readAt(job, 1_000), 1_000);
  // The page re-reads the job (and the list is re-sent) with the same progress: the count goes on.
  assert.equal(readAt({ ...job, progress: { ...job.progress } }, 6_000), 1_000);
  assert.equal(readAt({ ...job, id: "b" }, 7_000), 7_000);
  // A new progress value starts the count again.
  const next = { ...job, progress: { stage: "analyze", step: 3, eta_s: 40 } };
  assert.equal(readAt(next, 9_000), 9_000);
  assert.equal(readAt(next, 12_000), 9_000);
  assert.equal(readAt(job, 13_000), 13_000);
});

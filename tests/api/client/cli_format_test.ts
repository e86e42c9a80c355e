/**
 * What `seed list` and `seed status` print (api/client/cli_format.ts), from jobs as the API
 * answers them.
 */
import assert from "node:assert/strict";
import { bar, describe, type Job, listTable } from "../../../api/client/cli_format.ts";
import { etaAnchor } from "../../../api/client/progress.ts";

/** A running job with `progress`, as `GET /v1/jobs` lists it. */
function job(id: string, progress: Job["progress"]): Job {
  return {
    id,
    name: null,
    status: "running",
    attempt: 0,
    max_attempts: 3,
    method: "seed",
    created_at: "2026-12-07T10:00:00.000Z",
    error: null,
    progress,
    latest_metrics: null,
  };
}

/** The STEP cell of each row, by job id. */
function stepColumn(jobs: Job[]): Record<string, string> {
  const [header, ...rows] = listTable(jobs).trimEnd().split("\n");
  const at = header.indexOf("STEP");
  const end = header.indexOf("CREATED");
  return Object.fromEntries(rows.map((r) => [r.split(" ")[0], r.slice(at, end).trim()]));
}

Deno.test("seed list's STEP says warm-up with the stage's own count while a job warms up, its updates after", () => {
  const steps = stepColumn([
    // The policy warm-up at SFT step 120 of 560: its updates are still 0 of 10.
    job("sft", {
      stage: "warmup_policy",
      step: 0,
      total_steps: 10,
      phase: "sft",
      done: 120,
      total: 560,
      loss: 0.412,
    }),
    // The analyzer warm-up playing its trajectories: turn 5 of 20.
    job("turns", {
      stage: "warmup_analyzer",
      step: 0,
      total_steps: 10,
      phase: "trajectories",
      done: 5,
      total: 20,
      episodes: 187,
    }),
    // The warm-up has begun but reported no count yet.
    job("begun", { stage: "warmup_policy", step: 0, total_steps: 10 }),
    job("rl", { stage: "rollout", step: 3, total_steps: 10 }),
    job("queued", null),
  ]);
  assert.deepEqual(steps, {
    sft: "warm-up 120/560",
    turns: "warm-up 5/20",
    begun: "warm-up",
    rl: "3/10",
    queued: "-",
  });
});

Deno.test("seed status and seed list show a job queued again by the run it waits for, not the last run's bar, stage or ETA", () => {
  // The first run got to update 3 of 8 with 2 minutes to go; then its worker was lost and the
  // reaper queued the job for its second run.
  const last = { stage: "rollout", step: 3, total_steps: 8, eta_s: 120 };
  const retry: Job = {
    ...job("retry", last),
    status: "queued",
    attempt: 1,
    started_at: "2026-12-07T10:01:00.000Z",
  };
  assert.equal(bar(retry), "queued again: run 2 of at most 3");
  assert.match(describe(retry), /^progress {2}queued again: run 2 of at most 3$/m);
  assert.doesNotMatch(describe(retry), /ETA|3\/8|rollout/);
  // Given back by a stopping worker: the same run, not used up.
  const resumed: Job = { ...retry, id: "resumed", attempt: 0 };
  assert.equal(bar(resumed), "queued to resume: run 1 of at most 3");
  assert.deepEqual(stepColumn([retry, resumed]), {
    retry: "queued again: run 2 of at most 3",
    resumed: "queued to resume: run 1 of at most 3",
  });
  // Running again, the bar is the new run's; a job that stopped keeps its count but no ETA.
  assert.equal(
    bar({ ...retry, status: "running" }),
    `[#########${"-".repeat(15)}] 3/8  running  rollout  ETA 2m00s`,
  );
  assert.equal(
    bar({ ...retry, status: "failed" }),
    `[#########${"-".repeat(15)}] 3/8  failed  rollout`,
  );
  // Cancelled while queued again: its progress is `{stage: "queued"}` (jobs/queue.ts `cancel`).
  const cancelled: Job = {
    ...retry,
    id: "cancelled",
    status: "cancelled",
    progress: { stage: "queued" },
  };
  assert.equal(bar(cancelled), "cancelled while queued again: run 2 of at most 3");
  assert.match(
    describe(cancelled),
    /^status {4}cancelled \(in the queue for run 2 of at most 3\)$/m,
  );
  assert.match(
    describe(cancelled),
    /^progress {2}cancelled while queued again: run 2 of at most 3$/m,
  );
  assert.deepEqual(stepColumn([cancelled]), {
    cancelled: "cancelled while queued again: run 2 of at most 3",
  });
  // Never started: nothing to show yet, as before.
  const fresh: Job = { ...job("fresh", null), status: "queued", started_at: null };
  assert.doesNotMatch(describe(fresh), /^progress/m);
  assert.deepEqual(stepColumn([fresh]), { fresh: "-" });
});

Deno.test("seed follow's bar counts the ETA down from when its progress was first read, again from each new write, never below 0, and only while the job runs", () => {
  // An evaluation's progress, written with 4m10s to go and first read at t = 1 s; the next write
  // (the checkpoint's) comes minutes later, after the evaluation.
  const evaluating = job("a", { stage: "eval", step: 3, total_steps: 8, eta_s: 250 });
  let eta = etaAnchor(undefined, evaluating.progress, 1_000);
  const at = (j: Job, nowMs: number) => bar(j, { readAtMs: eta.atMs, nowMs });
  const filled = `[#########${"-".repeat(15)}] 3/8  running`;
  assert.equal(at(evaluating, 1_000), `${filled}  eval  ETA 4m10s`);
  // Re-read a minute later, unchanged: the count goes on from the first read.
  const reread = { ...evaluating, progress: { ...evaluating.progress! } };
  eta = etaAnchor(eta, reread.progress, 61_000);
  assert.equal(at(reread, 61_000), `${filled}  eval  ETA 3m10s`);
  // The checkpoint's write happens to repeat eta_s: a new write, so the count starts again.
  const checkpoint = job("a", { stage: "checkpoint", step: 3, total_steps: 8, eta_s: 250 });
  eta = etaAnchor(eta, checkpoint.progress, 121_000);
  assert.equal(eta.atMs, 121_000);
  assert.equal(at(checkpoint, 121_000), `${filled}  checkpoint  ETA 4m10s`);
  // Past its ETA with no new write: 0s, not a negative time.
  assert.equal(at(checkpoint, 400_000), `${filled}  checkpoint  ETA 0s`);
  // Out of running (cancelling, failed) the bar shows no ETA at all.
  assert.equal(
    at({ ...checkpoint, status: "cancelling" }, 130_000),
    `[#########${"-".repeat(15)}] 3/8  cancelling  checkpoint`,
  );
  // Read once (seed status): eta_s as written.
  assert.match(bar(checkpoint), /ETA 4m10s$/);
});

/** What `seed list` prints (api/client/cli_format.ts `listTable`), from jobs as the API answers. */
import assert from "node:assert/strict";
import { type Job, listTable } from "../../../api/client/cli_format.ts";

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

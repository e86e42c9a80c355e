import assert from "node:assert/strict";
import { parseJobSpec } from "../../../jobs/mod.ts";
import { parseDemoArgs } from "../../../api/demo/main.ts";
import { stageCount } from "../../../api/client/mod.ts";
import {
  eventLine,
  type JobWire,
  type MetricsWire,
  progressLine,
  type ProgressState,
  readJob,
  skillsFound,
} from "../../../api/demo/progress.ts";
import {
  DEMO_ENVS,
  DEMO_METHODS,
  DEMO_SPECS,
  demoSpec,
  QUICK_EVAL_EPISODES,
} from "../../../api/demo/specs.ts";
import {
  curlCommands,
  dashboardUrl,
  evalPoints,
  provenanceLine,
  successInterval,
  topSkills,
} from "../../../api/demo/summary.ts";
import { PlainProgress } from "../../../api/client/progress.ts";

const metrics = (points: [number, Record<string, number>][]): MetricsWire => ({
  names: [],
  points: points.map(([step, values]) => ({ step, attempt: 0, values })),
});

Deno.test("every demo spec is a valid JobSpec of its environment and method", () => {
  for (const env of DEMO_ENVS) {
    for (const method of DEMO_METHODS) {
      const spec = parseJobSpec(DEMO_SPECS[env][method]);
      assert.equal(spec.env.id, env);
      assert.equal(spec.method, method);
      assert.equal(spec.model.base, "builtin:tiny");
    }
  }
});

Deno.test("demo overrides change a copy and keep checkpoints half-way and at the end", () => {
  const spec = parseJobSpec(
    demoSpec("sokoban", "seed", { steps: 4, evalEpisodes: 3, randomSeed: 9 }),
  );
  assert.equal(spec.steps, 4);
  assert.equal(spec.checkpoint_every, 2);
  assert.equal(spec.eval.episodes, 3);
  assert.equal(spec.random_seed, 9);
  assert.notEqual(DEMO_SPECS.sokoban.seed.steps, 4);
  const quick = parseJobSpec(demoSpec("sokoban", "seed", { warmupEpisodes: 8 }));
  assert.deepEqual(
    [quick.warmup.policy.episodes, quick.warmup.policy.epochs, quick.warmup.analyzer.episodes],
    [8, 1, 8],
  );
  // The preset's skill_epochs (4) would exceed the one epoch: the one epoch is the mixed one.
  assert.equal(quick.warmup.policy.skill_epochs, undefined);
  assert.equal(quick.warmup.policy.lr, parseJobSpec(DEMO_SPECS.sokoban.seed).warmup.policy.lr);
  assert.notEqual(parseJobSpec(DEMO_SPECS.sokoban.seed).warmup.policy.episodes, 8);
});

Deno.test("a quick demo run evaluates 32 episodes per split unless --eval-episodes says otherwise", () => {
  const full = parseJobSpec(DEMO_SPECS.sokoban.seed);
  assert.equal(full.eval.episodes, 200);
  assert.equal(full.warmup.policy.check_episodes, 64);
  // the README's quick run
  const quick = parseJobSpec(demoSpec("sokoban", "seed", { steps: 2, warmupEpisodes: 16 }));
  assert.equal(quick.eval.episodes, QUICK_EVAL_EPISODES);
  assert.equal(QUICK_EVAL_EPISODES, 32);
  assert.equal(quick.warmup.policy.check_episodes, 32);
  assert.equal(parseJobSpec(demoSpec("sokoban", "seed", { steps: 2 })).eval.episodes, 32);
  assert.equal(
    parseJobSpec(demoSpec("household", "grpo", { warmupEpisodes: 4 })).eval.episodes,
    Math.min(32, parseJobSpec(DEMO_SPECS.household.grpo).eval.episodes),
  );
  // given, it wins; not quick (as long as the spec's or longer), the spec's
  const given = demoSpec("sokoban", "seed", { steps: 2, warmupEpisodes: 16, evalEpisodes: 100 });
  assert.equal(parseJobSpec(given).eval.episodes, 100);
  assert.equal(parseJobSpec(demoSpec("sokoban", "seed", { steps: 10 })).eval.episodes, 200);
  assert.equal(parseJobSpec(demoSpec("sokoban", "seed", { steps: 40 })).eval.episodes, 200);
  assert.equal(parseJobSpec(demoSpec("sokoban", "seed", { randomSeed: 3 })).eval.episodes, 200);
});

Deno.test("demo arguments default to a seed job on sokoban in a fresh timestamped data folder", () => {
  const args = parseDemoArgs([], new Date("2026-11-30T12:34:56Z"));
  assert.notEqual(args, "help");
  if (args === "help") return;
  assert.equal(args.env, "sokoban");
  assert.equal(args.method, "seed");
  assert.equal(args.dataDir, ".seed/demo-20261130-123456");
  assert.equal(args.outDir, "demo-output");
  assert.equal(args.workerEntry, "workers/main.ts");
  assert.throws(() => parseDemoArgs(["--env", "chess"]), /--env must be one of/);
  assert.throws(() => parseDemoArgs(["--steps", "1.5"]), /--steps must be an integer ≥ 0/);
  assert.throws(
    () => parseDemoArgs(["--warmup-episodes", "2.5"]),
    /--warmup-episodes must be an integer ≥ 0/,
  );
  assert.equal(parseDemoArgs(["--help"]), "help");
});

Deno.test("demo counts must be decimal digits: an empty, hex or exponent value is refused", () => {
  for (const value of ["", " ", "0x10", "1e3", "+2", "3.0"]) {
    assert.throws(
      () => parseDemoArgs(["--warmup-episodes", value]),
      /--warmup-episodes must be an integer ≥ 0/,
      JSON.stringify(value),
    );
  }
  const args = parseDemoArgs(["--warmup-episodes", "8", "--steps", "0"]);
  assert.ok(args !== "help" && args.warmupEpisodes === 8 && args.steps === 0);
});

Deno.test("skills found is the latest skill_library_size, else the sum of skills_added", () => {
  assert.equal(skillsFound(metrics([[1, { skills_added: 3 }], [2, { skills_added: 2 }]])), 5);
  assert.equal(
    skillsFound(metrics([[1, { skill_library_size: 3 }], [2, { skill_library_size: 4 }]])),
    4,
  );
  assert.equal(skillsFound(metrics([[0, { "eval/test_seen/success_rate": 0 }]])), undefined);
});

Deno.test("the progress line shows stage, step of total, success, skills and a counting-down ETA", () => {
  const line = progressLine({
    status: "running",
    stage: "rollout",
    step: 3,
    totalSteps: 6,
    etaS: 100,
    etaReadAtMs: 0,
    successRate: 0.375,
    skills: 12,
  }, 40_000);
  assert.equal(line, "[############------------] 3/6  rollout  success 38%  skills 12  ETA 1m00s");
  assert.equal(progressLine({ status: "queued" }), "queued");
  // A warm-up stage fills the bar by its own count (its SFT steps, its trajectories' turns), not
  // by the updates, which stay at 0 for the whole warm-up.
  const warmup = { status: "running", stage: "warmup_policy", step: 0, totalSteps: 16 };
  assert.equal(
    progressLine({
      ...warmup,
      stageCount: stageCount({ phase: "sft", done: 392, total: 784, loss: 0.41234 })!,
    }),
    "[############------------] SFT step 392/784  warmup_policy  loss 0.412",
  );
  assert.equal(
    progressLine({
      ...warmup,
      stage: "warmup_analyzer",
      stageCount: stageCount({ phase: "trajectories", done: 5, total: 20, episodes: 187 })!,
    }),
    "[######------------------] trajectories turn 5/20  warmup_analyzer  187 episodes playing",
  );
  // Before the stage reports a count, the updates.
  assert.equal(progressLine(warmup), "[------------------------] 0/16  warmup_policy");
});

Deno.test("the demo's ETA counts down from each progress write, one that repeats the last eta_s included, and a re-read keeps the count", () => {
  const running = (progress: JobWire["progress"], status = "running"): JobWire => ({
    id: "j1",
    status,
    attempt: 0,
    max_attempts: 3,
    started_at: "2026-12-07T10:00:00.000Z",
    error: null,
    progress,
    latest_metrics: null,
  });
  const state: ProgressState = { status: "queued" };
  const filled = `[#########${"-".repeat(15)}] 3/8`;
  readJob(state, running({ stage: "eval", step: 3, total_steps: 8, eta_s: 250 }), 0);
  assert.equal(progressLine(state, 30_000), `${filled}  eval  ETA 3m40s`);
  // A re-read of the same progress a minute in: the count goes on.
  readJob(state, running({ stage: "eval", step: 3, total_steps: 8, eta_s: 250 }), 60_000);
  assert.equal(progressLine(state, 60_000), `${filled}  eval  ETA 3m10s`);
  // The next write repeats eta_s: the count starts again from it, not from the eval's write.
  readJob(state, running({ stage: "checkpoint", step: 3, total_steps: 8, eta_s: 250 }), 120_000);
  assert.equal(progressLine(state, 120_000), `${filled}  checkpoint  ETA 4m10s`);
  assert.equal(progressLine(state, 500_000), `${filled}  checkpoint  ETA 0s`);
  // Once the job stops running, no ETA.
  readJob(
    state,
    running({ stage: "checkpoint", step: 3, total_steps: 8, eta_s: 250 }, "cancelling"),
    130_000,
  );
  assert.equal(progressLine(state, 130_000), `${filled}  cancelling  checkpoint`);
});

Deno.test("events print once per stage, never for step summaries, and evals with their figures", () => {
  const seen = new Set<string>();
  const msg = (event: string, data: unknown) => ({ event, data: JSON.stringify({ data }) });
  assert.equal(eventLine(msg("stage", { stage: "rollout" }), seen), "stage: rollout");
  assert.equal(eventLine(msg("stage", { stage: "rollout" }), seen), null);
  assert.equal(eventLine(msg("step", { step: 1 }), seen), null);
  assert.equal(
    eventLine(msg("eval", { step: 0, split: "test_seen", success_rate: 0.25, episodes: 8 }), seen),
    "eval at step 0: test_seen success 25% (8 episodes)",
  );
  assert.equal(
    eventLine(msg("warmup", { samples: 104, stage: "policy", nested: { loss: 1.5 } }), seen),
    "warmup: samples=104  nested.loss=1.5",
  );
  assert.equal(
    eventLine(msg("status", { status: "failed", error: "boom" }), seen),
    "status: failed (boom)",
  );
  assert.equal(
    eventLine(msg("warmup_check", { done: 112, total: 1120, success: 0.328, target: 0.45 }), seen),
    "warm-up check at SFT step 112/1120: held-out success 33% (target 45%)",
  );
  assert.equal(
    eventLine(
      msg("warmup_skill_check", { success: 0.5, success_with_skill: 0.625, delta_lost: -0.4213 }),
      seen,
    ),
    "skill check: success 50% without a skill, 63% with the reference skill; Δ log-prob on lost turns -0.421 nats/token",
  );
});

Deno.test("evaluation points pair step 0 (before RL) with the last evaluated step", () => {
  const points = evalPoints(metrics([
    [2, { "eval/test_seen/success_rate": 0.5, "eval/test_seen/score": 5 }],
    [1, { success_rate: 0.2 }],
    [0, { "eval/test_seen/success_rate": 0.1, "eval/test_unseen/success_rate": 0 }],
  ]));
  assert.deepEqual(points.map((p) => p.step), [0, 2]);
  assert.deepEqual(points[1].splits.test_seen, { success_rate: 0.5, score: 5 });
});

Deno.test("top skills are the most seen, ties broken by the larger teacher gap", () => {
  const library = {
    version: 1,
    job_id: "j",
    step: 2,
    skills: [
      { text: "a", times_seen: 1, mean_teacher_gap: 0.5 },
      { text: "b", times_seen: 3, mean_teacher_gap: null },
      { text: "c", times_seen: 1, mean_teacher_gap: 0.9 },
      { skill: "d (alias field)", times_seen: 2 },
    ],
  };
  assert.deepEqual(topSkills(library, 3).map((s) => s.text ?? s.skill), [
    "b",
    "d (alias field)",
    "c",
  ]);
});

Deno.test("the curl commands and the CLI's two variables carry this run's URL, key, job id and checkpoint step", () => {
  const lines = curlCommands({
    url: "http://127.0.0.1:4321",
    key: "seed_k",
    jobId: "j-1",
    step: 6,
    specPath: "demo-output/spec.json",
  }).join("\n");
  assert.ok(
    lines.includes("curl -s http://127.0.0.1:4321/v1/jobs/j-1 -H 'authorization: Bearer seed_k'"),
  );
  assert.ok(lines.includes("/v1/jobs/j-1/checkpoints/6/archive"));
  assert.ok(lines.includes("-d @demo-output/spec.json"));
  assert.ok(lines.includes("\nexport SEED_API_URL=http://127.0.0.1:4321 SEED_API_KEY=seed_k\n"));
  assert.ok(lines.includes("\nnpx -y deno@2.9.6 task seed -- status j-1 "));
});

Deno.test("the summary's ± is the 95% interval of a success rate over the evaluated episodes", () => {
  assert.equal(successInterval(0.85, 200).toFixed(2), "4.95");
  assert.equal(successInterval(0.5, 100).toFixed(1), "9.8");
  // 0% and 100% still show the uncertainty of 1 episode in n.
  assert.equal(successInterval(0, 200), successInterval(1 / 200, 200));
  assert.equal(successInterval(1, 200), successInterval(1 - 1 / 200, 200));
  assert.throws(() => successInterval(0.5, 0), /episodes must be a positive integer/);
  assert.throws(() => successInterval(1.5, 10), /rate must be in \[0, 1\]/);
});

Deno.test("off a terminal, a long stage still prints a progress line at least every 15 s", () => {
  const plain = new PlainProgress();
  const printed: number[] = [];
  const lines: string[] = [];
  // Three minutes of warm-up with nothing new, ticked every 2 s (the slowest caller,
  // `seed follow`).
  for (let t = 0; t <= 180_000; t += 2_000) {
    const out = plain.next({ line: "warmup_policy", key: "running 0", stage: "warmup_policy" }, t);
    if (out !== null) printed.push(t), lines.push(out);
  }
  const gaps = printed.slice(1).map((t, i) => t - printed[i]);
  assert.equal(printed[0], 0);
  assert.ok(gaps.every((g) => g === 14_000), `gaps ${gaps}`); // the first 2 s tick past 13 s
  assert.ok(printed.length >= 180_000 / 15_000);
  assert.equal(lines[0], "warmup_policy");
  assert.equal(lines.at(-1), "warmup_policy  (2m48s in warmup_policy)");
  // News prints at once.
  assert.notEqual(
    plain.next({ line: "rollout", key: "running 1", stage: "rollout" }, 180_500),
    null,
  );
});

Deno.test("the summary names the job's dashboard page", () => {
  assert.equal(
    dashboardUrl("http://127.0.0.1:4321/", "8c0a"),
    "http://127.0.0.1:4321/#/jobs/8c0a",
  );
});

Deno.test("a skill's provenance line gives the step it was first written, not its oldest kept record's", () => {
  const line = provenanceLine({
    text: "Walk behind the box, then push it up onto the target; …",
    times_seen: 306,
    success_count: 176,
    failure_count: 130,
    first_step: 1,
    mean_teacher_gap: -0.026,
    provenance: [{ step: 6, task_id: "sokoban/train/6x6-1/57", trajectory_id: "step-6/b5g3" }],
  });
  assert.equal(
    line,
    "seen 306×, 176 won / 130 lost, first at step 1, e.g. task sokoban/train/6x6-1/57, trajectory step-6/b5g3, mean teacher gap -0.026 nats",
  );
});

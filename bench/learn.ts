/**
 * `deno task bench:learn`: GRPO vs SEED learning curves (README.md, Benchmarks: "success rate on
 * test_seen/test_unseen of SEED vs GRPO at equal samples"; "SEED seconds per update ÷ GRPO").
 *
 * Per environment (sokoban and household by default; the vision tasks `sokoban-image` and
 * `ezpoints` run builtin:tiny-vl on image observations, `ezpoints-text` builtin:tiny on the
 * text render of the same game): one warm-up job (`sft`: policy SFT and
 * analyzer SFT) makes a checkpoint; a `grpo` and a `seed` job then both start from it
 * (`job:<warm-up>@0`, `warmup.skip`), with the same random seed, B, G and steps (so the same
 * sample budget), evaluating test_seen and test_unseen every `--eval-every` steps. The jobs run
 * in process on the real trainer handler (no database or store: see bench/_memory_context.ts).
 *
 * Writes `.bench-out/learn.csv` (env, method, step, split, success_rate, score) and
 * `.bench-out/learn.svg` (one panel per env), and prints a table with SEED s/step ÷ GRPO s/step.
 * Sized to ~30 min on 2 loaded cores with the defaults; run by hand.
 *
 *     deno task bench:learn [--envs sokoban,household] [--env sokoban-image] [--steps 12]
 *       [--eval-every 4] [--seed 0] [--warmup-episodes 64] [--eval-episodes 32]
 *
 * `search` (search-augmented QA) sets its own rollout and analyzer lengths: its actions run to 18
 * tokens and its reference analyses to ~130 (ENV_SETTINGS may override `rollout` and `seed`).
 *
 * `sokoban-demo` is the demo's preset (jobs/presets.ts: compact prompt with relative positions,
 * 784-step policy warm-up, GiGPO group 8), the one text setting where builtin:tiny learns.
 *
 * `--env` may be repeated and adds to `--envs` (its default is then dropped):
 * `deno task bench:learn --env ezpoints --steps 2 --warmup-episodes 8 --eval-episodes 8` is a
 * quick check that the pipeline runs (not a learning result).
 */
import { parseArgs } from "node:util";
import { DEMO_PRESETS } from "../jobs/presets.ts";
import type { JobSpecInput } from "../jobs/spec.ts";
import { createSeedHandler } from "../workers/seed/handler.ts";
import { type CheckpointShelf, memoryContext } from "./_memory_context.ts";

const { values: args } = parseArgs({
  options: {
    envs: { type: "string" },
    env: { type: "string", multiple: true },
    steps: { type: "string", default: "12" },
    "eval-every": { type: "string", default: "4" },
    seed: { type: "string", default: "0" },
    out: { type: "string", default: ".bench-out" },
    "warmup-episodes": { type: "string", default: "64" },
    "eval-episodes": { type: "string", default: "32" },
  },
});

/** Bench environment names in the order given (`--envs` list, then each `--env`). */
const envNames = [
  ...(args.envs ?? (args.env ? "" : "sokoban,household")).split(",").filter((e) => e !== ""),
  ...(args.env ?? []),
];

/**
 * Per bench env: the job's env (turn limits that fit the time budget) and model. The vision
 * tasks use builtin:tiny-vl (a text-only model is refused on image observations).
 */
const ENV_SETTINGS: Record<string, Partial<JobSpecInput>> = {
  sokoban: { env: { id: "sokoban", max_turns: 10, history: 0 } },
  household: { env: { id: "household", max_turns: 15, history: 1 } },
  webshop: { env: { id: "webshop", max_turns: 8, history: 1 } },
  search: {
    env: { id: "search", options: { prompt: "compact" }, max_turns: 4, history: 1 },
    rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 24 },
    seed: { analyzer_max_new_tokens: 160, analyzer_max_steps: 4 },
  },
  "sokoban-image": {
    env: { id: "sokoban", max_turns: 10, history: 0, options: { render: "image" } },
    model: { base: "builtin:tiny-vl" },
  },
  ezpoints: {
    env: { id: "ezpoints", max_turns: 6, history: 0, options: { render: "image" } },
    model: { base: "builtin:tiny-vl" },
  },
  "ezpoints-text": {
    env: { id: "ezpoints", max_turns: 6, history: 0, options: { render: "text" } },
  },
};

function specFor(name: string, extra: Record<string, unknown>): JobSpecInput {
  if (name === "sokoban-demo") {
    // The demo's tuned preset (small-model options, long warm-up, GiGPO); `--warmup-episodes`
    // does not apply to it.
    const { method: _method, steps: _steps, eval_every: _every, ...preset } = DEMO_PRESETS.sokoban;
    return {
      ...preset,
      eval: { episodes: Number(args["eval-episodes"]), temperature: 1 },
      random_seed: Number(args.seed),
      checkpoint_every: 1000,
      ...extra,
    } as JobSpecInput;
  }
  const policyEpisodes = Number(args["warmup-episodes"]);
  return {
    rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 12 },
    seed: { analyzer_max_new_tokens: 96, analyzer_max_steps: 4 },
    ...ENV_SETTINGS[name] ?? { env: { id: name } },
    optim: { lr: 1e-3, mini_batch_size: 64 },
    warmup: {
      policy: { episodes: policyEpisodes, epochs: 3, lr: 3e-3 },
      analyzer: { episodes: Math.ceil((policyEpisodes * 3) / 8), epochs: 2, lr: 2e-3 },
    },
    eval: { episodes: Number(args["eval-episodes"]), temperature: 1 },
    random_seed: Number(args.seed),
    checkpoint_every: 1000,
    ...extra,
  } as JobSpecInput;
}

interface Row {
  env: string;
  method: string;
  step: number;
  split: string;
  success_rate: number;
  score: number;
}

const rows: Row[] = [];
/** Per run: mean seconds per update, and (SEED) the mean analyzer parse rate over updates. */
const timing: { env: string; method: string; secondsPerStep: number; parseRate: number }[] = [];
const steps = Number(args.steps), evalEvery = Number(args["eval-every"]);
const shelf: CheckpointShelf = new Map();
const handler = createSeedHandler();
const t0 = performance.now();
const log = (msg: string) =>
  console.error(`[${((performance.now() - t0) / 1000).toFixed(0)}s] ${msg}`);

for (const envId of envNames) {
  const warm = memoryContext(specFor(envId, { method: "sft" }), { shelf });
  await handler(warm.ctx);
  log(`${envId}: warm-up done`);
  for (const method of ["grpo", "seed"]) {
    const run = memoryContext(
      specFor(envId, {
        method,
        model: { base: `job:${warm.ctx.jobId}@0` },
        warmup: { skip: true },
        steps,
        eval_every: evalEvery,
      }),
      { shelf },
    );
    await handler(run.ctx);
    const stepSeconds: number[] = [], parseRates: number[] = [];
    for (const [step, m] of [...run.metrics].sort((a, b) => a[0] - b[0])) {
      if (step > 0) stepSeconds.push(m.step_seconds);
      if (step > 0 && m.analyzer_parse_rate !== undefined) parseRates.push(m.analyzer_parse_rate);
      for (const split of ["test_seen", "test_unseen"]) {
        const sr = m[`eval/${split}/success_rate`];
        if (sr === undefined) continue;
        rows.push({
          env: envId,
          method,
          step,
          split,
          success_rate: sr,
          score: m[`eval/${split}/score`],
        });
      }
    }
    const secondsPerStep = stepSeconds.reduce((a, b) => a + b, 0) / Math.max(1, stepSeconds.length);
    const parseRate = parseRates.reduce((a, b) => a + b, 0) / Math.max(1, parseRates.length);
    timing.push({ env: envId, method, secondsPerStep, parseRate });
    log(`${envId}/${method}: ${secondsPerStep.toFixed(1)} s/step`);
  }
}

await Deno.mkdir(args.out, { recursive: true });
const csv = ["env,method,step,split,success_rate,score"]
  .concat(rows.map((r) => [r.env, r.method, r.step, r.split, r.success_rate, r.score].join(",")))
  .join("\n") + "\n";
await Deno.writeTextFile(`${args.out}/learn.csv`, csv);
await Deno.writeTextFile(`${args.out}/learn.svg`, plot(rows));

// A parse rate of 0 means no skill was distilled: SEED then updates exactly as GRPO.
console.log("| env | method | split | step 0 | last step | s/step | analyzer parse rate |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
for (const t of timing) {
  for (const split of ["test_seen", "test_unseen"]) {
    const series = rows.filter((r) =>
      r.env === t.env && r.method === t.method && r.split === split
    );
    const first = series[0]?.success_rate ?? NaN, last = series.at(-1)?.success_rate ?? NaN;
    console.log(
      `| ${t.env} | ${t.method} | ${split} | ${first.toFixed(3)} | ${last.toFixed(3)} (step ${
        series.at(-1)?.step
      }) | ${t.secondsPerStep.toFixed(1)} | ${
        t.method === "seed" ? t.parseRate.toFixed(2) : "—"
      } |`,
    );
  }
}
for (const env of new Set(timing.map((t) => t.env))) {
  const s = timing.find((t) => t.env === env && t.method === "seed")!;
  const g = timing.find((t) => t.env === env && t.method === "grpo")!;
  console.log(
    `${env}: SEED s/step ÷ GRPO s/step = ${(s.secondsPerStep / g.secondsPerStep).toFixed(2)}`,
  );
}
console.log(`wall ${((performance.now() - t0) / 1000).toFixed(0)} s, loadavg ${Deno.loadavg()}`);

/** One panel per env: success rate vs step, a line per (method, split). */
function plot(data: Row[]): string {
  const envs = [...new Set(data.map((r) => r.env))];
  const W = 420, H = 260, pad = 40;
  const colors: Record<string, string> = { grpo: "#d62728", seed: "#1f77b4" };
  const maxStep = Math.max(1, ...data.map((r) => r.step));
  const panels = envs.map((env, i) => {
    const x = (s: number) => pad + (s / maxStep) * (W - 2 * pad);
    const y = (v: number) => H - pad - v * (H - 2 * pad);
    const lines: string[] = [];
    for (const method of ["grpo", "seed"]) {
      for (const split of ["test_seen", "test_unseen"]) {
        const pts = data.filter((r) => r.env === env && r.method === method && r.split === split);
        if (!pts.length) continue;
        const dash = split === "test_unseen" ? ' stroke-dasharray="5,3"' : "";
        lines.push(
          `<polyline fill="none" stroke="${colors[method]}" stroke-width="2"${dash} points="${
            pts.map((p) => `${x(p.step).toFixed(1)},${y(p.success_rate).toFixed(1)}`).join(" ")
          }"/>`,
        );
      }
    }
    const axes =
      `<line x1="${pad}" y1="${H - pad}" x2="${W - pad}" y2="${H - pad}" stroke="#000"/>` +
      `<line x1="${pad}" y1="${pad}" x2="${pad}" y2="${H - pad}" stroke="#000"/>` +
      `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${env}</text>` +
      `<text x="${W / 2}" y="${
        H - 8
      }" text-anchor="middle" font-size="11">step (0 … ${maxStep})</text>` +
      `<text x="6" y="${pad}" font-size="11">1.0</text><text x="6" y="${
        H - pad
      }" font-size="11">0</text>`;
    return `<g transform="translate(${i * W},0)">${axes}${lines.join("")}</g>`;
  });
  const legend = `<text x="10" y="${H + 16}" font-size="12">` +
    `<tspan fill="${colors.grpo}">GRPO</tspan> · <tspan fill="${colors.seed}">SEED</tspan> · ` +
    `solid test_seen, dashed test_unseen (success rate)</text>`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W * envs.length}" height="${H + 24}">${
    panels.join("")
  }${legend}</svg>\n`;
}

/**
 * Where the analyzer warm-up's time goes on a model with a large vocabulary:
 * `deno task bench:analyzer-warmup` (flags: `USAGE` below, which `--help` prints).
 *
 * The model is `deno task tiny-model`'s (Qwen3, 2 layers of width 32, the real 151,936-token
 * tokenizer) with a rank-8 LoRA adapter on q_proj and v_proj, as the README's bring-your-own-model
 * walkthrough trains it. Each run does the stage's two phases as the trainer does them
 * (workers/seed/warmup.ts): the trajectories (`analyzerSamples`: `episodes` Sokoban episodes of
 * the policy at temperature 1, `turns` turns of at most 64 new tokens, as `rollout.max_new_tokens`'
 * default) and one epoch of analyzer SFT on their analyses (batch 32, lr 2e-3). It prints, as
 * medians over `runs`: the trajectories' seconds and milliseconds per drawn token (and
 * onnxruntime's share of them) with the draws on one thread and on `threads` (sampler_threads.ts;
 * the two arms alternate in one process, and their trajectories are checked equal), and the SFT's
 * seconds per optimizer step.
 * Not a test: times vary with machine load; compare numbers measured in one run.
 */
import * as ort from "onnxruntime-node";
import { tinyQwen3Files } from "../workers/model/tiny_qwen3.ts";
import {
  initLoraParameters,
  loadHfDirectory,
  type LoraConfig,
  Policy,
  Tokenizer,
} from "../workers/model/mod.ts";
import { TextPolicy } from "../workers/seed/text_policy.ts";
import { getEnvironment, toAsyncEnvironment } from "../workers/envs/mod.ts";
import { analyzerSamples, sftTrain } from "../workers/seed/warmup.ts";
import { analyzerPromptOptions } from "../workers/skills/mod.ts";
import { benchArgs } from "./_args.ts";

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `Where the analyzer warm-up's time goes on a model with a large vocabulary (the tiny
Qwen3 of deno task tiny-model with a rank-8 LoRA adapter): the trajectories with the
token draws on one thread and on --threads, then one epoch of analyzer SFT; medians
over --runs.

Usage:
  deno task bench:analyzer-warmup [--episodes 8] [--turns 4] [--runs 3] [--threads 2]

Flags:
  --episodes N  Sokoban episodes of the policy per run, sampled at temperature 1 (default 8)
  --turns N     turns per episode, each of at most 64 new tokens (default 4)
  --runs N      runs; the times printed are medians over them (default 3)
  --threads N   onnxruntime's threads, and the draws' threads of the second arm (default 2)`;

const args = benchArgs({
  name: "bench:analyzer-warmup",
  usage: USAGE,
  options: {
    episodes: { type: "string", default: "8" },
    turns: { type: "string", default: "4" },
    runs: { type: "string", default: "3" },
    threads: { type: "string", default: "2" },
  },
});
const episodes = Number(args.episodes), turns = Number(args.turns), runs = Number(args.runs);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// onnxruntime's own time inside the run, summed over every session.run of this process
let runMs = 0;
type Run = (...a: unknown[]) => Promise<unknown>;
const proto = (ort.InferenceSession as unknown as { prototype: { run: Run } }).prototype;
const run = proto.run;
proto.run = async function (this: unknown, ...a: unknown[]) {
  const started = performance.now();
  try {
    return await run.apply(this, a);
  } finally {
    runMs += performance.now() - started;
  }
};

const files = tinyQwen3Files();
const model = await loadHfDirectory((name) => Promise.resolve(files.get(name) ?? null));
const lora: LoraConfig = {
  rank: 8,
  alpha: 16,
  dropout: 0,
  target_modules: ["q_proj", "v_proj"],
};
for (const [name, t] of initLoraParameters(model.config, lora, 1)) model.parameters.set(name, t);
const threads = Number(args.threads);
const policy = new Policy(model.config, model.parameters, { threads, lora });
// the same model drawing on this thread only (as before sampler_threads.ts), sharing the sessions
const oneThread = new Policy(model.config, model.parameters, {
  threads,
  lora,
  samplerThreads: 1,
  sessions: policy.sessions,
});
const tokenizer = new Tokenizer(model.tokenizer);
const arms = {
  one: new TextPolicy(oneThread, tokenizer),
  threads: new TextPolicy(policy, tokenizer),
};
const env = toAsyncEnvironment(getEnvironment("sokoban"));

type Arm = keyof typeof arms;
const timing: Record<Arm, { seconds: number[]; msPerToken: number[]; onnxShare: number[] }> = {
  one: { seconds: [], msPerToken: [], onnxShare: [] },
  threads: { seconds: [], msPerToken: [], onnxShare: [] },
};
const sftStep: number[] = [];
let tokens = 0;
for (let r = 0; r < runs; r++) {
  const made: Partial<Record<Arm, Awaited<ReturnType<typeof analyzerSamples>>>> = {};
  // the two arms alternate (first one, then the other, swapped each run) so load hits both alike
  for (const arm of (r % 2 === 0 ? ["one", "threads"] : ["threads", "one"]) as Arm[]) {
    runMs = 0;
    const started = performance.now();
    made[arm] = await analyzerSamples(arms[arm], {
      env,
      envOptions: {},
      episodes,
      maxTurns: turns,
      historyLength: 0,
      seed: 100 + r,
      temperature: 1,
      maxNewTokens: 64,
      prompt: analyzerPromptOptions({ analyzer_max_steps: 8, analyzer_max_field_chars: 200 }),
    });
    const ms = performance.now() - started;
    tokens = made[arm]!.tokensGenerated;
    timing[arm].seconds.push(ms / 1000);
    timing[arm].msPerToken.push(ms / Math.max(1, tokens));
    timing[arm].onnxShare.push(runMs / ms);
  }
  if (JSON.stringify(made.one!.samples) !== JSON.stringify(made.threads!.samples)) {
    throw new Error("the two arms sampled other trajectories");
  }
  const sft = performance.now();
  const report = await sftTrain(arms.threads, [{ samples: made.threads!.samples, epochs: 1 }], {
    batchSize: 32,
    lr: 2e-3,
    maxGradNorm: 1,
    seed: r,
  });
  sftStep.push((performance.now() - sft) / 1000 / Math.max(1, report.optimizerSteps));
}

const cpu = new TextDecoder().decode(
  (await new Deno.Command("lscpu").output()).stdout,
).match(/Model name:\s*(.+)/)?.[1] ?? "?";
console.log(
  `analyzer warm-up on the tiny Qwen3 (151,936 tokens), ${episodes} episodes × ${turns} turns ` +
    `(${tokens} tokens drawn), medians of ${runs} runs, ${threads} onnxruntime threads, ${cpu}`,
);
for (
  const [arm, label] of [["one", "draws on 1 thread"], [
    "threads",
    `draws on ${threads} threads`,
  ]] as const
) {
  const t = timing[arm];
  console.log(
    `trajectories, ${label}: ${median(t.seconds).toFixed(1)} s, ` +
      `${median(t.msPerToken).toFixed(2)} ms per drawn token ` +
      `(onnxruntime ${(100 * median(t.onnxShare)).toFixed(0)}% of it)`,
  );
}
console.log("the same trajectories on both");
console.log(`analyzer SFT: ${median(sftStep).toFixed(2)} s per optimizer step (batch 32)`);

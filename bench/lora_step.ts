/**
 * One LoRA train step on Qwen2.5-0.5B's configuration beside PyTorch: `deno task bench:lora-step`
 * (flags: `USAGE` below, which `--help` prints).
 *
 * Both sides run the same step on the same shapes: `batch` rows of `prompt` tokens followed by
 * `response` tokens, the mean token NLL over the response tokens (forward, backward) and AdamW
 * (lr 1e-4, weight decay 0.01) on the adapter's tensors only; adapters of rank r and α = 2r on
 * q_proj and v_proj of every layer (the JobSpec's default targets), the base weights frozen
 * (fp32). Ours is `Policy.trainStep` with the worker's engine settings (onnxruntime, `threads`,
 * the default tokens per call unless `--tokens-per-call`) then `AdamW.step`; PyTorch's is
 * bench/engine_torch.py (torch on OpenBLAS, `torch.set_num_threads(threads)`, frozen
 * `nn.Linear` + A/B as PEFT's LoRA layer, logits at the response positions only as HF's
 * `logits_to_keep`). One warm-up step each, then `repeats` steps alternating ours and PyTorch's
 * so load changes hit both alike; prints the medians, their ratio and this process's peak RSS.
 * Not a test: times vary with machine load; compare the ratio within one run.
 */
import { parameterCount } from "../workers/model/config.ts";
import { Policy } from "../workers/model/policy.ts";
import { TOKEN_NLL } from "../workers/model/objective.ts";
import { AdamW } from "../workers/model/optim.ts";
import { Rng } from "../workers/model/sampling.ts";
import { initParameters } from "../workers/model/init.ts";
import { initLoraParameters, type LoraConfig } from "../workers/model/lora.ts";
import type { Sample } from "../workers/model/batch.ts";
import { peakRssMb, qwen25Config } from "./_qwen_scale.ts";
import { splitLines } from "./_lines.ts";
import { benchArgs } from "./_args.ts";

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `One LoRA train step on Qwen2.5-0.5B's configuration, ours beside PyTorch's on the
same shapes (forward, backward and AdamW on the adapter only); medians, their ratio
and peak RSS.

Usage:
  deno task bench:lora-step [--layers 24] [--rank 16] [--batch 4] [--prompt 128] [--response 16]
    [--repeats 3] [--threads 2] [--tokens-per-call N]

Flags:
  --layers N           decoder layers (default 24)
  --rank N             the adapter's rank r; alpha is 2r, on q_proj and v_proj (default 16)
  --batch N            rows per step (default 4)
  --prompt N           prompt tokens per row (default 128)
  --response N         response tokens per row, the ones the loss is over (default 16)
  --repeats N          measured steps of each side, alternating, after one warm-up step each
                       (default 3)
  --threads N          threads of both sides (default 2)
  --tokens-per-call N  our engine's tokens per call (default: the worker's)`;

const args = benchArgs({
  name: "bench:lora-step",
  usage: USAGE,
  options: {
    layers: { type: "string", default: "24" },
    rank: { type: "string", default: "16" },
    batch: { type: "string", default: "4" },
    prompt: { type: "string", default: "128" },
    response: { type: "string", default: "16" },
    repeats: { type: "string", default: "3" },
    threads: { type: "string", default: "2" },
    "tokens-per-call": { type: "string" },
  },
});
const config = qwen25Config(Number(args.layers));
const rank = Number(args.rank), threads = Number(args.threads), repeats = Number(args.repeats);
const shape = {
  batch: Number(args.batch),
  prompt: Number(args.prompt),
  length: Number(args.response),
};
const lora: LoraConfig = {
  rank,
  alpha: 2 * rank,
  dropout: 0,
  target_modules: ["q_proj", "v_proj"],
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Our step: Policy.trainStep + AdamW over the adapter; returns a function timing one step, s. */
function ours() {
  const params = initParameters(config, 1);
  for (const [name, t] of initLoraParameters(config, lora, 2)) params.set(name, t);
  const policy = new Policy(config, params, {
    threads,
    ep: "cpu",
    lora,
    ...(args["tokens-per-call"] ? { maxTokensPerCall: Number(args["tokens-per-call"]) } : {}),
  });
  const opt = new AdamW(policy.trainableSpecs(), { lr: 1e-4, weightDecay: 0.01 });
  const rng = new Rng(2);
  const tok = () => 3 + Math.floor(rng.next() * (config.vocab_size - 3));
  const samples: Sample[] = Array.from({ length: shape.batch }, () => ({
    prompt: Array.from({ length: shape.prompt }, tok),
    response: Array.from({ length: shape.length }, tok),
  }));
  return async () => {
    const t0 = performance.now();
    opt.step(params, (await policy.trainStep(TOKEN_NLL, samples)).grads);
    return (performance.now() - t0) / 1000;
  };
}

/** PyTorch's step: bench/engine_torch.py answering one timed step per request line. */
function theirs() {
  const child = new Deno.Command("/usr/bin/python3", {
    args: [
      new URL("./engine_torch.py", import.meta.url).pathname,
      JSON.stringify({ config, threads, train: shape, lora }),
    ],
    stdin: "piped",
    stdout: "piped",
    // as bench/engine.ts: passive OpenMP waiting was PyTorch's faster setting here
    env: { OMP_WAIT_POLICY: "PASSIVE" },
  }).spawn();
  const writer = child.stdin.getWriter();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).pipeThrough(splitLines())
    .getReader();
  const read = async () => {
    const { value } = await lines.read();
    if (value === undefined) throw new Error("Cannot read PyTorch's answer as the process exited");
    return JSON.parse(value);
  };
  return {
    ready: read,
    step: async () => {
      await writer.write(
        new TextEncoder().encode(JSON.stringify({ op: "train", steps: 1 }) + "\n"),
      );
      return (await read()).seconds as number;
    },
    close: async () => {
      await writer.close();
      await child.status;
    },
  };
}

const torch = theirs();
const info = await torch.ready();
const a = ours();
const warm = { ours: await a(), torch: await torch.step() }; // builds and loads our sessions
const times: { ours: number[]; torch: number[] } = { ours: [], torch: [] };
for (let r = 0; r < repeats; r++) {
  times.ours.push(await a());
  times.torch.push(await torch.step());
}
await torch.close();
const o = median(times.ours), t = median(times.torch);
console.log(JSON.stringify({
  config: `Qwen2.5-0.5B config, ${config.num_hidden_layers} layers, ${
    (parameterCount(config) / 1e6).toFixed(0)
  }M params`,
  lora: `rank ${rank}, alpha ${2 * rank}, q_proj+v_proj`,
  shape: `${shape.batch} rows × (${shape.prompt} prompt + ${shape.length} response tokens)`,
  threads,
  torch: `${info.torch}, ${info.threads} threads`,
  warmup_s: { ours: round(warm.ours), torch: round(warm.torch) },
  step_s: { ours: times.ours.map(round), torch: times.torch.map(round) },
  median_step_s: { ours: round(o), torch: round(t) },
  ours_over_torch: round(o / t),
  peak_rss_mb_ours: Math.round(peakRssMb()),
  loadavg: Deno.loadavg()[0],
}));

function round(x: number): number {
  return Number(x.toFixed(2));
}

/**
 * A/B of the train step between two checkouts, in one process:
 * `deno run -A bench/tools/engine_ab.ts --base DIR [--only medium|small] [--repeats 9]
 * [--no-torch]`.
 *
 * DIR holds another version's `workers/` (e.g. `git archive main workers jobs | tar -x -C DIR`);
 * its Policy and AdamW are imported beside this checkout's. The same SFT step as bench/engine.ts
 * (forward + backward + AdamW on the same samples and initial weights) runs on both, alternating
 * base/new (order swapped every repeat) with PyTorch's step (bench/engine_torch.py) in between,
 * so load changes on a shared machine hit all three alike. Prints the first step's gradients'
 * largest difference, then medians of wall time and of this process's CPU time (user + system
 * from /proc/self/stat, 10 ms ticks; less sensitive to load than wall time, though contention
 * for caches and memory still moves it) and their ratios. Not a test: numbers vary with load.
 */
import { benchArgs } from "../_args.ts";
import { type DecoderConfig, type Parameters, parameterSpecs } from "../../workers/model/config.ts";
import { Policy } from "../../workers/model/policy.ts";
import { AdamW } from "../../workers/model/optim.ts";
import { TOKEN_NLL } from "../../workers/model/objective.ts";
import { Rng } from "../../workers/model/sampling.ts";
import { initParameters } from "../../workers/model/init.ts";
import { CONFIGS } from "../_engine_configs.ts";

/** What `--help` prints. */
const USAGE = `The train step of two checkouts alternating in one process.

Usage: deno run -A bench/tools/engine_ab.ts --base DIR [--only medium|small] [--repeats 9]
  [--threads 2] [--no-torch]

Flags:
  --base DIR     a folder holding another version's workers/ (required)
  --only NAME    the bench config: medium or small (default medium)
  --repeats N    alternations of base and new (default 9)
  --threads N    onnxruntime's intra-op threads (default 2)
  --no-torch     leave out PyTorch's step (bench/engine_torch.py)`;

const args = benchArgs({
  name: "bench/tools/engine_ab.ts",
  usage: USAGE,
  options: {
    base: { type: "string" },
    only: { type: "string", default: "medium" },
    repeats: { type: "string", default: "9" },
    threads: { type: "string", default: "2" },
    "no-torch": { type: "boolean", default: false },
  },
});
const entry = CONFIGS.find((c) => c.name === args.only);
if (!args.base || !entry) {
  throw new RangeError(
    `Cannot run the A/B as --base must name a folder with workers/ and --only one of ${
      CONFIGS.map((c) => c.name).join(", ")
    }: current values are ${args.base} and ${args.only}`,
  );
}
const base = new URL(`file://${Deno.realPathSync(args.base)}/workers/model/`);
const baseModules = {
  Policy: (await import(new URL("policy.ts", base).href)).Policy as typeof Policy,
  AdamW: (await import(new URL("optim.ts", base).href)).AdamW as typeof AdamW,
};
const c: DecoderConfig = entry.config, threads = Number(args.threads);
const tokens = entry.train.batch * entry.train.length;
const rng = new Rng(2);
const tok = () => 3 + Math.floor(rng.next() * (c.vocab_size - 3));
const samples = Array.from(
  { length: entry.train.batch },
  () => ({ prompt: [tok()], response: Array.from({ length: entry.train.length }, tok) }),
);

/** One side: its own weights (same initial values), policy and optimizer. */
function side(mods: { Policy: typeof Policy; AdamW: typeof AdamW }) {
  const params = initParameters(c, 1);
  const policy = new mods.Policy(c, params, { threads, maxTokensPerCall: 1 << 16 });
  const opt = new mods.AdamW(parameterSpecs(c), { lr: 1e-4, weightDecay: 0.01 });
  return {
    grads: async () => (await policy.trainStep(TOKEN_NLL, samples)).grads,
    step: async () => opt.step(params, (await policy.trainStep(TOKEN_NLL, samples)).grads),
  };
}
const sides = { base: side(baseModules), new: side({ Policy, AdamW }) };

// The first step's gradients (same weights on both sides): how far the versions' rounding is.
const [ga, gb]: Parameters[] = [await sides.base.grads(), await sides.new.grads()];
let worst = { rel: 0, name: "" }, same = 0, total = 0;
for (const [name, a] of ga) {
  const b = gb.get(name)!;
  let diff = 0, scale = 0;
  for (let i = 0; i < a.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(a[i]));
    if (a[i] === b[i]) same++;
  }
  total += a.length;
  if (diff / scale > worst.rel) worst = { rel: diff / scale, name };
}
console.log(
  `${entry.name}: first-step gradients base vs new: largest |Δ| / max |g| ${
    worst.rel.toExponential(2)
  } (${worst.name}), ${(100 * same / total).toFixed(1)}% of values bit-identical`,
);

const torch = args["no-torch"] ? null : await startTorch();
/** This process's user + system CPU time in ms. */
const cpuMs = () => {
  const f = Deno.readTextFileSync("/proc/self/stat").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
};
const list = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(",");
const wall: Record<string, number[]> = { base: [], new: [], torch: [] };
const cpu: Record<string, number[]> = { base: [], new: [] };
for (let r = 0; r < Number(args.repeats); r++) {
  for (const k of r % 2 ? ["new", "base"] as const : ["base", "new"] as const) {
    const t0 = performance.now(), c0 = cpuMs();
    await sides[k].step();
    wall[k].push(performance.now() - t0);
    cpu[k].push(cpuMs() - c0);
    if (torch && k === "base") wall.torch.push(await torch.step());
  }
  console.error(
    `repeat ${r + 1}: base ${list(wall.base.slice(-1))} ms, new ${list(wall.new.slice(-1))} ms${
      torch ? `, torch ${list(wall.torch.slice(-1))} ms` : ""
    }`,
  );
}
await torch?.close();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rate = (ms: number) => (tokens / (ms / 1000)).toFixed(0);
console.log(
  `train step ${entry.train.batch}×${entry.train.length} tokens, ${args.repeats} repeats, threads ${threads}:`,
);
for (const k of ["base", "new", "torch"]) {
  if (!wall[k].length) continue;
  const cpuPart = cpu[k] ? `, CPU ${median(cpu[k])} ms [${list(cpu[k])}]` : "";
  console.log(
    `  ${k.padEnd(5)} wall ${median(wall[k]).toFixed(0)} ms (${rate(median(wall[k]))} tok/s) [${
      list(wall[k])
    }]${cpuPart}`,
  );
}
console.log(
  `  new vs base: wall ${(median(wall.base) / median(wall.new)).toFixed(3)}×, CPU ${
    (median(cpu.base) / median(cpu.new)).toFixed(3)
  }×` + (wall.torch.length
    ? `; vs PyTorch (wall): base ${(median(wall.torch) / median(wall.base)).toFixed(2)}×, new ${
      (median(wall.torch) / median(wall.new)).toFixed(2)
    }×`
    : ""),
);

/** PyTorch's same step in bench/engine_torch.py; `step()` returns its wall ms. */
async function startTorch() {
  const child = new Deno.Command("/usr/bin/python3", {
    args: [
      new URL("../engine_torch.py", import.meta.url).pathname,
      JSON.stringify({ config: c, threads, train: { ...entry!.train, steps: 1 } }),
    ],
    stdin: "piped",
    stdout: "piped",
    env: { OMP_WAIT_POLICY: "PASSIVE" }, // as bench/engine.ts: PyTorch at its best setting
  }).spawn();
  const writer = child.stdin.getWriter();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  const line = async () => {
    while (!buf.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error("Cannot read PyTorch's answer as the process exited");
      buf += value;
    }
    const i = buf.indexOf("\n");
    const l = buf.slice(0, i);
    buf = buf.slice(i + 1);
    return JSON.parse(l);
  };
  await line(); // ready
  const ask = async () => {
    await writer.write(new TextEncoder().encode(JSON.stringify({ op: "train", steps: 1 }) + "\n"));
    return tokens / (await line()).rate * 1000;
  };
  await ask(); // warm-up
  return {
    step: ask,
    close: async () => {
      await writer.close();
      await child.status;
    },
  };
}

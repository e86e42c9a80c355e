/**
 * Where a train step's time goes: `deno run -A bench/tools/engine_profile.ts [--only small|medium]
 * [--steps 3] [--threads 2] [--top 25]`.
 *
 * Runs the bench/engine.ts train step of a config with onnxruntime's profiler on
 * (`enableProfiling`), then sums the per-node kernel times of the profiled runs (the first,
 * warm-up run is dropped) by op type and by node, and prints each one's share. Shares stay
 * meaningful on a loaded machine, where absolute times do not. The profile's JSON (Chrome trace
 * format) is left in the temp folder printed at the end.
 */
import { benchArgs } from "../_args.ts";
import * as ort from "onnxruntime-node";
import { SessionCache, sessionOptions } from "../../workers/engine/mod.ts";
import { type DecoderConfig, parameterSpecs } from "../../workers/model/config.ts";
import { Policy } from "../../workers/model/policy.ts";
import { TOKEN_NLL } from "../../workers/model/objective.ts";
import { AdamW } from "../../workers/model/optim.ts";
import { Rng } from "../../workers/model/sampling.ts";
import { initParameters } from "../../workers/model/init.ts";
import type { Sample } from "../../workers/model/batch.ts";
import { CONFIGS } from "../_engine_configs.ts";

/** What `--help` prints. */
const USAGE = `Where a train step's time goes, by onnxruntime's profiler.

Usage: deno run -A bench/tools/engine_profile.ts [--only small|medium] [--steps 3] [--threads 2]
  [--top 25]

Flags:
  --only NAME    the bench config: small or medium (default medium)
  --steps N      profiled train steps after the warm-up one (default 3)
  --threads N    onnxruntime's intra-op threads (default 2)
  --top N        rows of each table (default 25)`;

const args = benchArgs({
  name: "bench/tools/engine_profile.ts",
  usage: USAGE,
  options: {
    only: { type: "string", default: "medium" },
    steps: { type: "string", default: "3" },
    threads: { type: "string", default: "2" },
    top: { type: "string", default: "25" },
  },
});
const entry = CONFIGS.find((c) => c.name === args.only);
if (!entry) {
  throw new RangeError(
    `Cannot profile as --only must be one of ${
      CONFIGS.map((c) => c.name).join(", ")
    }: current value is ${args.only}`,
  );
}
const dir = await Deno.makeTempDir({ prefix: "engine_profile_" });
const threads = Number(args.threads);

/** A session cache whose sessions record onnxruntime profiles under `dir` (never evicted). */
class ProfilingCache extends SessionCache {
  readonly made = new Map<string, Promise<ort.InferenceSession>>();
  override get(key: string, build: () => Uint8Array): Promise<ort.InferenceSession> {
    let s = this.made.get(key);
    if (!s) {
      s = ort.InferenceSession.create(build(), {
        ...sessionOptions({ threads }),
        enableProfiling: true,
        profileFilePrefix: `${dir}/${key.split(":")[0]}`,
      });
      this.made.set(key, s);
    }
    return s;
  }
}
const cache = new ProfilingCache({ threads });

const c: DecoderConfig = entry.config;
const params = initParameters(c, 1);
const policy = new Policy(c, params, { threads, maxTokensPerCall: 1 << 16, sessions: cache });
const opt = new AdamW(parameterSpecs(c), { lr: 1e-4, weightDecay: 0.01 });
const rng = new Rng(2);
const tok = () => 3 + Math.floor(rng.next() * (c.vocab_size - 3));
const samples: Sample[] = Array.from(
  { length: entry.train.batch },
  () => ({ prompt: [tok()], response: Array.from({ length: entry.train.length }, tok) }),
);
const steps = Number(args.steps);
for (let s = 0; s <= steps; s++) {
  opt.step(params, (await policy.trainStep(TOKEN_NLL, samples)).grads);
}
for (const s of cache.made.values()) (await s).endProfiling(); // writes <prefix>_<time>.json
const files: string[] = [];
for await (const f of Deno.readDir(dir)) {
  if (f.name.startsWith("train")) files.push(`${dir}/${f.name}`);
}

type Event = { cat: string; name: string; dur: number; args?: { op_name?: string } };
const byOp = new Map<string, number>(), byNode = new Map<string, number>();
let total = 0, runs = 0;
for (const f of files) {
  const events = JSON.parse(await Deno.readTextFile(f)) as Event[];
  const runEvents = events.filter((e) => e.cat === "Session" && e.name === "model_run");
  const skipUntil = runEvents.length > 1 ? (events.indexOf(runEvents[0]) as number) : -1;
  runs += Math.max(0, runEvents.length - 1);
  events.forEach((e, i) => {
    if (i <= skipUntil || e.cat !== "Node" || !e.name.endsWith("_kernel_time")) return;
    const op = e.args?.op_name ?? "?";
    byOp.set(op, (byOp.get(op) ?? 0) + e.dur);
    const node = `${op} ${e.name.replace(/_kernel_time$/, "")}`;
    byNode.set(node, (byNode.get(node) ?? 0) + e.dur);
    total += e.dur;
  });
}
const top = Number(args.top);
const table = (m: Map<string, number>) =>
  [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, us]) =>
    `  ${(100 * us / total).toFixed(1).padStart(5)}%  ${
      (us / 1000 / runs).toFixed(1).padStart(8)
    } ms/run  ${k}`
  ).join("\n");
console.log(
  `${entry.name}: ${runs} profiled train runs, kernel time ${
    (total / 1000 / runs).toFixed(0)
  } ms/run`,
);
console.log(`by op type:\n${table(byOp)}`);
console.log(`by node:\n${table(byNode)}`);
console.log(`profiles: ${dir}`);

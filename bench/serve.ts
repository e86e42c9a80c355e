/**
 * `deno task bench:serve` (flags: `USAGE` below, which `--help` prints; `--rollout`: a
 * rollout-shaped load on the local decode and on two servers as rollout endpoints,
 * bench/_serve_rollout.ts) —
 * the inference server's continuous batching: aggregate generated tokens/s and p50/p99
 * time-to-first-token (TTFT) with 1, 8 and 32 concurrent streams, beside the same requests sent
 * one after another (sequential), on builtin:tiny (~1M parameters, the sokoban vocabulary) and a
 * ~24M-parameter config (hidden 512, 6 layers, an 8k-token byte-level vocabulary).
 *
 * Starts a throwaway Postgres (jobs/embedded/postgres_cluster.ts) and an S3 server, saves one
 * random-weight checkpoint per model through the trainer's checkpoint writer, runs
 * `deno task serve` in a child process (so the load generator does not share its event loop) and
 * drives it with the `openai` npm client: streaming chat requests with the sokoban turn prompt,
 * `max_tokens` = `--tokens`, temperature 1, one seed per request (with `--distinct`, each request's
 * prompt starts with a line of its own, `#<n>` for the n-th request sent, so no two prompts are
 * identical and none shares a prefill or a prefix, within a burst or with an earlier one; with
 * `--boards`, the n-th request sends the first turn of sokoban train task n mod 512, as an agent's
 * first requests do: distinct boards under the environment's common rules). Tokens/s counts the
 * completion tokens the server reports (`stream_options.include_usage`) over the wall time of the
 * batch of requests; TTFT runs from sending a request to its first content chunk; CPU ms/token is
 * the server process's CPU time (user + system, all its threads, from /proc) per completion token,
 * which a loaded machine inflates much less than wall time. With `--compare DIR` (another checkout
 * of this repository, e.g. `git clone --branch main . /tmp/base`) a second server runs from DIR and
 * every row is measured on both in the order this, compare, compare, this (ABBA, bench/_abba.ts),
 * each side's two passes pooled: load that drifts during a row weighs on both sides alike, where a
 * fixed A-then-B order gave the drift to B (the row's `requests` counts both passes). Each server
 * first answers one request and one burst at the most streams, unmeasured. Goal (issue "Serve
 * trained checkpoints"): ≥ 5× the aggregate tokens/s at 32 streams over 1. Not a test: numbers
 * depend on the machine.
 */
import OpenAI from "openai";
import { createKey, ensureTenant } from "../jobs/mod.ts";
import { resolveEnvironment } from "../workers/envs/mod.ts";
import { createBuiltinTiny, type HfModel, Tokenizer } from "../workers/model/mod.ts";
import { boardPrompts, model24m } from "./_serve_model.ts";
import { builtinVocabulary, probeFirstTurn } from "../workers/seed/run/model_source.ts";
import { startBenchStack } from "./_stack.ts";
import { saveJob } from "../workers/seed/run/saved_job.ts";
import { benchArgs } from "./_args.ts";
import { abbaOrder } from "./_abba.ts";

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `The inference server's continuous batching: aggregate generated tokens/s, p50/p99
time to first token and the server's CPU ms per token at each number of concurrent
streams, beside the same requests one after another. --rollout instead runs a
training step's rollouts on the local decode and on two servers as rollout endpoints
(bench/_serve_rollout.ts).

Usage:
  deno task bench:serve [--streams 1,8,32] [--tokens 64] [--models tiny,24m] [--threads 2]
    [--compare DIR] [--distinct | --boards]
  deno task bench:serve --rollout [--models 24m] [--threads 2] [--runs 3] [--tasks 8] [--group 4]
    [--turns 4] [--tokens 32]

Flags:
  --streams A,B   concurrent streams to measure (default 1,8,32)
  --tokens N      max_tokens of every request; new tokens per turn with --rollout
                  (default 64; 32 with --rollout)
  --models A,B    tiny (builtin:tiny, ~1M parameters) and/or 24m (~24M parameters)
                  (default tiny,24m; 24m with --rollout)
  --threads N     onnxruntime threads of each server (and of the local decode with --rollout)
                  (default 2)
  --compare DIR   another checkout of this repository: a second server runs from DIR and every row
                  is measured on both in the order this, compare, compare, this (ABBA), each
                  side's two passes pooled (its requests column counts both), so load that
                  drifts during a row weighs on both sides alike
  --distinct      every request's prompt starts with a line of its own (#<n>): no shared prefix
  --boards        the n-th request sends the first turn of sokoban train task n mod 512
  --rollout       the rollout-shaped load (the flags below apply to it only)
  --runs N        measured runs of each side, alternating, after one unmeasured run (default 3)
  --tasks N       tasks per step, B (default 8)
  --group N       copies of each task, G (default 4)
  --turns N       turns per episode at most (default 4)`;

const args = benchArgs({
  name: "bench:serve",
  usage: USAGE,
  options: {
    streams: { type: "string", default: "1,8,32" },
    tokens: { type: "string", default: "64" },
    models: { type: "string", default: "tiny,24m" },
    threads: { type: "string", default: "2" },
    compare: { type: "string" },
    distinct: { type: "boolean", default: false },
    boards: { type: "boolean", default: false },
    rollout: { type: "boolean", default: false },
    runs: { type: "string", default: "3" },
    tasks: { type: "string", default: "8" },
    group: { type: "string", default: "4" },
    turns: { type: "string", default: "4" },
  },
});
if (args.rollout) {
  // the rollout-shaped load, local decode vs two endpoints (bench/_serve_rollout.ts)
  const { rolloutBench } = await import("./_serve_rollout.ts");
  await rolloutBench({
    models: args.models === "tiny,24m" ? ["24m"] : args.models!.split(","),
    threads: Number(args.threads),
    runs: Number(args.runs),
    tasks: Number(args.tasks),
    group: Number(args.group),
    turns: Number(args.turns),
    tokens: args.tokens === "64" ? 32 : Number(args.tokens),
  });
  Deno.exit(0);
}
const STREAMS = args.streams!.split(",").map(Number);
const TOKENS = Number(args.tokens);

/** p-th percentile (nearest rank) of `xs`. */
function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** Requests sent so far: `--distinct` and `--boards` never send one prompt twice. */
let sent = 0;

/** One streamed request: TTFT and completion tokens. */
async function streamOne(client: OpenAI, model: string, prompt: string, seed: number) {
  const t0 = performance.now();
  let ttft = NaN, tokens = 0;
  const n = sent++;
  const content = args.boards
    ? boards[n % boards.length]
    : args.distinct
    ? `#${n}\n${prompt}`
    : prompt;
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content }],
    max_tokens: TOKENS,
    temperature: 1,
    seed,
    stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of stream) {
    if (Number.isNaN(ttft) && chunk.choices[0]?.delta.content) ttft = performance.now() - t0;
    if (chunk.usage) tokens = chunk.usage.completion_tokens;
  }
  if (Number.isNaN(ttft)) ttft = performance.now() - t0; // no visible text (e.g. EOS at once)
  return { ttft, tokens };
}

/** One pass of a row on one server: its requests' results, wall seconds and server CPU seconds. */
interface Measured {
  results: { ttft: number; tokens: number }[];
  seconds: number;
  cpu: number;
}

/**
 * Sends one row's requests to `server`: `streams` one after another (sequential), or
 * max(streams, 8) in bursts of `streams` (concurrent).
 */
async function measure(
  server: { child: Deno.ChildProcess; client: OpenAI },
  row: { model: string; prompt: string; streams: number; mode: string },
): Promise<Measured> {
  const { child, client } = server;
  const { model, prompt, streams, mode } = row;
  const requests = Math.max(streams, 8);
  const results: Measured["results"] = [];
  const t0 = performance.now(), cpu0 = await cpuSeconds(child.pid);
  if (mode === "sequential") {
    for (let i = 0; i < streams; i++) results.push(await streamOne(client, model, prompt, i));
  } else {
    for (let done = 0; done < requests; done += streams) {
      const n = Math.min(streams, requests - done);
      results.push(
        ...await Promise.all(
          Array.from({ length: n }, (_, i) => streamOne(client, model, prompt, done + i)),
        ),
      );
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  return { results, seconds, cpu: await cpuSeconds(child.pid) - cpu0 };
}

const { env, db, store, stop: stopStack } = await startBenchStack("bench-serve");
/** Seconds of CPU (user + system, all threads) process `pid` has used (Linux /proc). */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // from field 3 (state)
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ)
}

const children: Deno.ChildProcess[] = [];
let boards: string[] = [];
try {
  const tenant = await ensureTenant(db, "bench");
  const { key } = await createKey(db, "bench");
  const sokoban = await resolveEnvironment("sokoban");
  const prompt = (await probeFirstTurn(sokoban, {})).prompt;
  boards = await boardPrompts(sokoban, 512);
  const makers: Record<string, () => Promise<HfModel>> = {
    tiny: async () => createBuiltinTiny({ vocabulary: await builtinVocabulary(sokoban), seed: 1 }),
    "24m": async () => model24m(await builtinVocabulary(sokoban)),
  };
  const jobs: { name: string; id: string; params: number }[] = [];
  for (const name of args.models!.split(",")) {
    const model = await makers[name]();
    const params = [...model.parameters.values()].reduce((n, p) => n + p.length, 0);
    const promptTokens = new Tokenizer(model.tokenizer).encode(prompt + "\n").length;
    console.log(`${name}: ${(params / 1e6).toFixed(1)}M parameters, prompt ${promptTokens} tokens`);
    jobs.push({ name, params, id: await saveJob(db, store, tenant.id, [{ step: 0, model }]) });
  }
  const servers: { label: string; child: Deno.ChildProcess; client: OpenAI }[] = [];
  for (
    const [label, dir] of [["this", "."], ...(args.compare ? [["compare", args.compare]] : [])]
  ) {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--unstable-no-legacy-abort", "workers/serve/main.ts"],
      cwd: dir,
      env: {
        ...env,
        SERVE_PORT: String(port),
        SERVE_THREADS: args.threads!,
        SERVE_MAX_BATCH: String(Math.max(...STREAMS)),
        LOG_LEVEL: "warn",
      },
      stdout: "null",
      stderr: "inherit",
    }).spawn();
    children.push(child);
    for (let i = 0; i < 300; i++) {
      if (await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const baseURL = `http://127.0.0.1:${port}/v1`;
    servers.push({ label, child, client: new OpenAI({ apiKey: key, baseURL, maxRetries: 0 }) });
  }
  console.log(`max_tokens ${TOKENS}, temperature 1, ${args.threads} onnxruntime threads`);
  console.log(
    "| model | params | server | mode | streams | requests | tokens/s | × 1 stream | TTFT p50 ms | TTFT p99 ms | CPU ms/token |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|---|");
  for (const job of jobs) {
    const model = `job:${job.id}`;
    // load the checkpoint, build the sessions, then one burst at the most streams (the first
    // burst on a fresh server pays one-time costs: connections, first runs at new shapes)
    for (const { client } of servers) {
      await streamOne(client, model, prompt, 0);
      const most = Math.max(...STREAMS);
      await Promise.all(
        Array.from({ length: most }, (_, i) => streamOne(client, model, prompt, i)),
      );
    }
    const single = new Map<string, number>();
    for (const streams of STREAMS) {
      for (const mode of streams === 1 ? ["concurrent"] : ["sequential", "concurrent"]) {
        // A B B A (bench/_abba.ts): each side's two passes pooled, so load that drifts during
        // the row weighs on both sides alike
        const pooled = new Map<string, Measured>();
        for (const server of abbaOrder(servers)) {
          const m = await measure(server, { model, prompt, streams, mode });
          const sum = pooled.get(server.label);
          pooled.set(
            server.label,
            sum
              ? {
                results: [...sum.results, ...m.results],
                seconds: sum.seconds + m.seconds,
                cpu: sum.cpu + m.cpu,
              }
              : m,
          );
        }
        for (const { label } of servers) {
          const { results, seconds, cpu } = pooled.get(label)!;
          const tokens = results.reduce((n, r) => n + r.tokens, 0), rate = tokens / seconds;
          if (streams === 1) single.set(label, rate);
          const ttfts = results.map((r) => r.ttft);
          console.log(
            `| ${job.name} | ${
              (job.params / 1e6).toFixed(1)
            }M | ${label} | ${mode} | ${streams} | ${results.length} | ${rate.toFixed(0)} | ${
              (rate / single.get(label)!).toFixed(1)
            } | ${percentile(ttfts, 50).toFixed(0)} | ${percentile(ttfts, 99).toFixed(0)} | ${
              (1000 * cpu / tokens).toFixed(2)
            } |`,
          );
        }
      }
    }
  }
} finally {
  for (const child of children) {
    child.kill("SIGTERM");
    await child.status;
  }
  await stopStack();
}

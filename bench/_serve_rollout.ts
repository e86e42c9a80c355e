/**
 * `deno task bench:serve --rollout [--models 24m] [--threads 2] [--runs 3] [--tasks 8]
 * [--group 4] [--turns 4] [--tokens 32]` — a rollout-shaped load: a training step's B×G sokoban
 * episodes (B tasks, G copies of each: the copies of a task share their whole prompt, every
 * prompt shares the environment's rules) for up to `--turns` turns, each turn one short request
 * per live episode with the last two turns in its history, through the trainer's own rollout loop
 * (workers/seed/rollout.ts `runRollouts`). The same rollouts run on the local decode (the
 * trainer's `actionPolicy`) and on two `deno task serve` child processes as `rollout.engine`
 * endpoints (workers/seed/remote_rollout.ts, token-id prompts, the local decode's draws), `--runs`
 * times each, alternating; prints each run and the medians of generated tokens/s and episodes/s,
 * and their ratio (endpoints over local), and the two servers' CPU time (user + system, /proc) per
 * generated token, which a loaded machine inflates much less than wall time. On one machine the
 * two servers share its cores with the trainer: the ratio measures the protocol's and the
 * servers' overheads against the local decode's batching, not the gain of more machines. Not a
 * test: numbers depend on the machine.
 */
import { createKey, ensureTenant } from "../jobs/mod.ts";
import { resolveEnvironment } from "../workers/envs/mod.ts";
import { createBuiltinTiny, type HfModel, Policy, Tokenizer } from "../workers/model/mod.ts";
import {
  ACTION_STOP,
  actionPolicy,
  type BatchPolicy,
  runRollouts,
  TextPolicy,
  turnSeed,
} from "../workers/seed/mod.ts";
import { RemoteRolloutEngine } from "../workers/seed/remote_rollout.ts";
import { policyPublisher, storeUpload } from "../workers/seed/run/publish_policy.ts";
import { builtinVocabulary } from "../workers/seed/run/model_source.ts";
import { startBenchStack } from "./_stack.ts";
import { model24m } from "./_serve_model.ts";

/** Options of {@link rolloutBench} (the flags of the module doc). */
export interface RolloutBenchOptions {
  models: string[];
  threads: number;
  runs: number;
  tasks: number;
  group: number;
  turns: number;
  tokens: number;
}

/** Seconds of CPU (user + system, all threads) the `children` have used (Linux /proc). */
async function serversCpuSeconds(children: Deno.ChildProcess[]): Promise<number> {
  let sum = 0;
  for (const child of children) {
    const stat = await Deno.readTextFile(`/proc/${child.pid}/stat`);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // from field 3 (state)
    sum += (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime (USER_HZ ticks)
  }
  return sum;
}

/** Median of `xs`. */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Runs the benchmark of the module doc and prints its tables. */
export async function rolloutBench(o: RolloutBenchOptions): Promise<void> {
  const { env, db, store, stop: stopStack } = await startBenchStack("bench-rollout");
  const children: Deno.ChildProcess[] = [];
  try {
    const tenant = await ensureTenant(db, "bench");
    const { key } = await createKey(db, "bench");
    const sokoban = await resolveEnvironment("sokoban");
    const urls: string[] = [];
    for (let i = 0; i < 2; i++) {
      const port = 20000 + Math.floor(Math.random() * 20000);
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "--unstable-no-legacy-abort", "workers/serve/main.ts"],
        env: {
          ...env,
          SERVE_PORT: String(port),
          SERVE_THREADS: String(o.threads),
          SERVE_MAX_BATCH: String(o.tasks * o.group),
          SERVE_MAX_QUEUE: String(4 * o.tasks * o.group),
          LOG_LEVEL: "warn",
        },
        stdout: "null",
        stderr: "inherit",
      }).spawn();
      children.push(child);
      for (let k = 0; k < 300; k++) {
        if (await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      urls.push(`http://127.0.0.1:${port}`);
    }
    const makers: Record<string, () => Promise<HfModel>> = {
      tiny: async () =>
        createBuiltinTiny({ vocabulary: await builtinVocabulary(sokoban), seed: 1 }),
      "24m": async () => model24m(await builtinVocabulary(sokoban)),
    };
    console.log(
      `rollout: ${o.tasks} tasks × ${o.group} copies, ≤ ${o.turns} turns, ≤ ${o.tokens} new tokens per turn, history 2, temperature 1, ${o.threads} onnxruntime threads (trainer and each server)`,
    );
    console.log(
      "| model | engine | run | episodes | turns | tokens | seconds | tokens/s | episodes/s | servers' CPU ms/token |",
    );
    console.log("|---|---|---|---|---|---|---|---|---|---|");
    const summary: string[] = [];
    for (const name of o.models) {
      const model = await makers[name]();
      const policy = new Policy(model.config, model.parameters, { threads: o.threads });
      const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
      const engine = new RemoteRolloutEngine({
        endpoints: urls.map((baseUrl) => ({ baseUrl, model: `bench-${name}`, apiKey: key })),
        maxInFlight: o.tasks * o.group,
        timeoutMs: 600_000,
        allowedHosts: ["127.0.0.1"],
      });
      const publish = policyPublisher({
        upload: storeUpload(store, { tenantId: tenant.id, jobId: crypto.randomUUID(), attempt: 1 }),
        model,
      });
      await engine.sync(0, await publish(0));
      const rates: Record<string, { tokens: number[]; episodes: number[] }> = {
        local: { tokens: [], episodes: [] },
        endpoints: { tokens: [], episodes: [] },
      };
      const serverCpu: number[] = [];
      // run 0 warms both up (sessions, shapes, connections) and is not counted
      for (let run = 0; run <= o.runs; run++) {
        const seed = 1000 + run;
        const tasks = await sokoban.sampleTasks("train", o.tasks, seed, {});
        for (const kind of ["local", "endpoints"] as const) {
          let tokens = 0, turn = 0;
          const batch: BatchPolicy = kind === "local"
            ? actionPolicy(theta, {
              maxNewTokens: o.tokens,
              temperature: 1,
              seed,
              onTokens: (n) => tokens += n,
            })
            : ((): BatchPolicy => {
              const inner = engine.policy(
                theta,
                { maxNewTokens: o.tokens, temperature: 1, stop: [ACTION_STOP] },
                () => turnSeed(seed, ++turn),
              );
              return async (prompts, images) => {
                const r = await inner(prompts, images);
                if (!Array.isArray(r)) tokens += r.tokens ?? 0;
                return r;
              };
            })();
          const t0 = performance.now(), cpu0 = await serversCpuSeconds(children);
          const list = await runRollouts({
            env: sokoban,
            tasks,
            groupSize: o.group,
            maxTurns: o.turns,
            historyLength: 2,
            policy: batch,
          });
          const seconds = (performance.now() - t0) / 1000;
          const cpuMs = 1000 * (await serversCpuSeconds(children) - cpu0) / tokens;
          const turns = list.reduce((n, t) => n + t.steps.length, 0);
          console.log(
            `| ${name} | ${kind} | ${
              run === 0 ? "warm-up" : run
            } | ${list.length} | ${turns} | ${tokens} | ${seconds.toFixed(2)} | ${
              (tokens / seconds).toFixed(0)
            } | ${(list.length / seconds).toFixed(2)} | ${
              kind === "endpoints" ? cpuMs.toFixed(2) : "–"
            } |`,
          );
          if (run > 0 && kind === "endpoints") serverCpu.push(cpuMs);
          if (run > 0) {
            rates[kind].tokens.push(tokens / seconds);
            rates[kind].episodes.push(list.length / seconds);
          }
        }
      }
      await policy.release();
      const [l, e] = [rates.local, rates.endpoints];
      summary.push(
        `| ${name} | ${median(l.tokens).toFixed(0)} | ${median(e.tokens).toFixed(0)} | ${
          (median(e.tokens) / median(l.tokens)).toFixed(2)
        } | ${median(l.episodes).toFixed(2)} | ${median(e.episodes).toFixed(2)} | ${
          median(serverCpu).toFixed(2)
        } |`,
      );
    }
    console.log(`\nmedians over ${o.runs} runs`);
    console.log(
      "| model | local tokens/s | 2 endpoints tokens/s | endpoints / local | local episodes/s | 2 endpoints episodes/s | servers' CPU ms/token |",
    );
    console.log("|---|---|---|---|---|---|---|");
    for (const line of summary) console.log(line);
  } finally {
    for (const child of children) {
      child.kill("SIGTERM");
      await child.status;
    }
    await stopStack();
  }
}

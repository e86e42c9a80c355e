/**
 * `deno task demo`: the whole product on one command, as a client would use it. It starts the
 * API (`api/main.ts`) and one worker (`workers/main.ts`) as child processes over a fresh data
 * folder (embedded PGlite + S3 server, unless `DATABASE_URL` / `S3_ENDPOINT` are set), creates an
 * API key, submits a SEED job over REST, follows its event stream with a progress bar, downloads
 * the final checkpoint (SHA-256 checked) and the skill library through the API, prints a summary
 * with the curl commands that do the same by hand, and stops both children (SIGTERM, then
 * SIGKILL) — also on Ctrl-C and on failure. Exit code: 0 when the job succeeded, 1 when it or
 * the demo failed, 2 on bad arguments, 130 when interrupted.
 *
 *   deno task demo [--env sokoban|household|webshop|search] [--method seed|grpo] [--steps N]
 *                  [--eval-episodes N] [--seed N] [--out DIR] [--data-dir DIR] [--keep]
 *                  [--timeout-min M] [--worker ENTRY.ts]
 *
 * The specs it submits are in api/demo/specs.ts (one constant per environment and method).
 */
import { parseArgs } from "node:util";
import { onStopSignals } from "../../jobs/stop_signals.ts";
import { resolve } from "node:path";
import { SeedClient } from "../client/mod.ts";
import {
  type Child,
  ChildProcessError,
  createApiKey,
  spawnDeno,
  startApi,
  tailLines,
} from "./processes.ts";
import { followJob, type JobWire } from "./progress.ts";
import {
  DEMO_ENVS,
  DEMO_METHODS,
  type DemoEnv,
  type DemoMethod,
  demoSpec,
  QUICK_EVAL_EPISODES,
} from "./specs.ts";
import { type DemoArtifacts, downloadArtifacts, renderSummary } from "./summary.ts";
import { claimOutputFolder, type OutputFolder, releaseOutputFolder } from "./output_folder.ts";

const USAGE = `Usage: deno task demo [options]
  --env ID             sokoban (default) | household | webshop | search
  --method M           seed (default) | grpo
  --steps N            RL updates (default: the spec's); eval + checkpoint at the middle and end
  --eval-episodes N    episodes per evaluation split (default: the spec's, 200; a quick run's
                       — --steps or --warmup-episodes below the spec's — ${QUICK_EVAL_EPISODES})
  --warmup-episodes N  expert episodes of the policy warm-up and trajectories of the analyzer
                       warm-up, each trained for one epoch (a quick run; default: the spec's)
  --seed N             random_seed of the job
  --out DIR            where the checkpoint and skills go (default demo-output); a folder
                       that is not empty is kept and this run writes DIR-2 (DIR-3, …)
  --data-dir DIR       database + object store folder (default .seed/demo-<time>, fresh per run)
  --keep               keep the API and worker running after the summary (Ctrl-C stops them)
  --timeout-min M      give up on the job after M minutes (default 30)
  --worker FILE        worker entry file (default workers/main.ts; tests pass a fixture)`;

/** Thrown when the job ends in any state but `succeeded`. */
export class DemoJobFailedError extends Error {
  constructor(job: JobWire) {
    super(
      `Cannot finish the demo as job ${job.id} must succeed: it is ${job.status}${
        job.error ? ` (${job.error})` : ""
      }`,
    );
    this.name = "DemoJobFailedError";
  }
}

/** Parsed command line of the demo. */
export interface DemoArgs {
  env: DemoEnv;
  method: DemoMethod;
  steps?: number;
  evalEpisodes?: number;
  warmupEpisodes?: number;
  randomSeed?: number;
  outDir: string;
  dataDir: string;
  keep: boolean;
  timeoutMs: number;
  workerEntry: string;
}

function intArg(name: string, raw: string | undefined, min: number): number | undefined {
  if (raw === undefined) return undefined;
  // Digits only: Number() reads "" as 0 and takes "0x10" and "1e3".
  const n = /^[0-9]{1,9}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < min) {
    throw new RangeError(
      `Cannot run the demo as --${name} must be an integer ≥ ${min}: current value is ${raw}`,
    );
  }
  return n;
}

function stamp(d: Date): string {
  return d.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
}

/** Parses the command line (see {@link USAGE}); throws RangeError on a bad value. */
export function parseDemoArgs(args: string[], now: Date = new Date()): DemoArgs | "help" {
  const { values } = parseArgs({
    args: args[0] === "--" ? args.slice(1) : args,
    options: {
      env: { type: "string", default: "sokoban" },
      method: { type: "string", default: "seed" },
      steps: { type: "string" },
      "eval-episodes": { type: "string" },
      "warmup-episodes": { type: "string" },
      seed: { type: "string" },
      out: { type: "string", default: "demo-output" },
      "data-dir": { type: "string" },
      keep: { type: "boolean", default: false },
      "timeout-min": { type: "string", default: "30" },
      worker: { type: "string", default: "workers/main.ts" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return "help";
  if (!(DEMO_ENVS as readonly string[]).includes(values.env)) {
    throw new RangeError(
      `Cannot run the demo as --env must be one of ${
        DEMO_ENVS.join(", ")
      }: current value is ${values.env}`,
    );
  }
  if (!(DEMO_METHODS as readonly string[]).includes(values.method)) {
    throw new RangeError(
      `Cannot run the demo as --method must be one of ${
        DEMO_METHODS.join(", ")
      }: current value is ${values.method}`,
    );
  }
  return {
    env: values.env as DemoEnv,
    method: values.method as DemoMethod,
    steps: intArg("steps", values.steps, 0),
    evalEpisodes: intArg("eval-episodes", values["eval-episodes"], 1),
    warmupEpisodes: intArg("warmup-episodes", values["warmup-episodes"], 0),
    randomSeed: intArg("seed", values.seed, 0),
    outDir: values.out,
    dataDir: values["data-dir"] ?? `.seed/demo-${stamp(now)}`,
    keep: values.keep,
    timeoutMs: intArg("timeout-min", values["timeout-min"], 1)! * 60_000,
    workerEntry: values.worker,
  };
}

/** Columns of the terminal on stdout, or undefined when it is not one. */
function terminalColumns(): number | undefined {
  try {
    return Deno.stdout.isTerminal() ? Deno.consoleSize().columns : undefined;
  } catch {
    return undefined;
  }
}

const encoder = new TextEncoder();
const say = (text: string) => Deno.stdout.writeSync(encoder.encode(text + "\n"));

/** Runs the demo; resolves with the process exit code. Children are always stopped. */
export async function runDemo(args: DemoArgs): Promise<number> {
  const spec = demoSpec(args.env, args.method, {
    steps: args.steps,
    evalEpisodes: args.evalEpisodes,
    warmupEpisodes: args.warmupEpisodes,
    randomSeed: args.randomSeed,
  });
  const dataDir = resolve(args.dataDir);
  const outDir = resolve(args.outDir);
  await Deno.mkdir(dataDir, { recursive: true });
  const env = { SEED_DATA_DIR: dataDir };
  const children: Child[] = [];
  const abort = new AbortController();
  let interrupted = false;
  // The children have process groups of their own (processes.ts): only these listeners see a
  // Ctrl-C, and they stay until the children are stopped; a second press kills them at once.
  // SIGHUP too: the children no longer get the terminal's hangup themselves.
  const removeSignals = onStopSignals({
    first: () => {
      interrupted = true;
      say("\ninterrupted: stopping the worker and the API…");
      abort.abort(new Error("interrupted"));
    },
    again: () => {
      say("second signal: killing the worker and the API now");
      for (const child of children) child.kill();
    },
  }, ["SIGINT", "SIGTERM", "SIGHUP"]);
  const aborted = new Promise<never>((_, reject) => {
    abort.signal.addEventListener("abort", () => reject(abort.signal.reason), { once: true });
  });
  aborted.catch(() => {});
  const step = <T>(p: Promise<T>) => Promise.race([p, aborted]);
  const started = Date.now();
  // Taken at the start and given back unless the download fills it.
  let folder: OutputFolder | undefined;
  let download: Promise<DemoArtifacts> | undefined;
  let downloaded = false;
  try {
    say(`SEED demo: ${args.method} on ${args.env} with builtin:tiny`);
    say(`data folder (database, object store, logs): ${dataDir}`);
    // Taken now, so a demo started beside this one writes elsewhere, and said before the run,
    // so a user who wanted the earlier output replaced can stop now.
    folder = await claimOutputFolder(outDir);
    if (folder.removedStale.length > 0) {
      say(
        `removed ${
          folder.removedStale.join(", ")
        }: the unfinished download of a demo run that was killed (no process holds its lock)`,
      );
    }
    say(
      folder.reason === null
        ? `output folder: ${folder.path}`
        : `output folder: ${folder.path} (${outDir} ${folder.reason} and is kept)`,
    );
    if (Deno.env.get("DATABASE_URL")) say("database: DATABASE_URL (from the environment)");
    if (Deno.env.get("S3_ENDPOINT")) say(`object store: ${Deno.env.get("S3_ENDPOINT")}`);
    // A signal during the claim: start nothing (the folder is given back in `finally`).
    abort.signal.throwIfAborted();
    say("starting the API…");
    const api = await step(startApi({
      env,
      logPath: `${dataDir}/api.log`,
      onSpawn: (child) => children.push(child),
      signal: abort.signal,
    }));
    say(`API listening on ${api.url} (pid ${api.child.pid})`);
    const key = await step(createApiKey({
      env,
      tenant: "demo",
      name: `demo-${stamp(new Date())}`,
      logPath: `${dataDir}/keys.log`,
      signal: abort.signal,
    }));
    say(`API key created for tenant "demo": ${key}`);
    abort.signal.throwIfAborted();
    const worker = await spawnDeno({
      name: "worker",
      entry: args.workerEntry,
      env,
      logPath: `${dataDir}/worker.log`,
      signal: abort.signal,
    });
    children.push(worker);
    say(`worker started (pid ${worker.pid}, ${args.workerEntry})`);
    const workerDied = worker.exited.then((code) => {
      throw new ChildProcessError(
        `Cannot finish the demo as the worker must keep running: it exited with code ${code}`,
        worker.logPath,
      );
    });
    workerDied.catch(() => {});

    const client = new SeedClient({ baseUrl: api.url, apiKey: key });
    say(`\nPOST ${api.url}/v1/jobs\n${JSON.stringify(spec, null, 2)}`);
    const submitted = await step(client.submit(spec, `demo-${stamp(new Date())}-${args.env}`));
    const jobId = String(submitted.id);
    say(`job ${jobId} ${submitted.status}\n`);
    const submittedAt = Date.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `Cannot finish the demo as the job must end within ${
                args.timeoutMs / 60_000
              } min: it did not (see ${worker.logPath})`,
            ),
          ),
        args.timeoutMs,
      );
    });
    const follow = new AbortController();
    let job: JobWire;
    try {
      job = await Promise.race([
        followJob(client, jobId, {
          io: {
            tty: Deno.stdout.isTerminal(),
            columns: terminalColumns(),
            write: (t) => Deno.stdout.writeSync(encoder.encode(t)),
          },
          signal: follow.signal,
        }),
        workerDied,
        timedOut,
        aborted,
      ]);
    } finally {
      clearTimeout(timer);
      follow.abort();
    }
    if (job.status !== "succeeded") throw new DemoJobFailedError(job);
    const seconds = (Date.now() - submittedAt) / 1000;

    say(`\ndownloading the checkpoint and the skill library into ${folder.path}…`);
    download = downloadArtifacts(client, job, { outDir: folder, spec });
    const artifacts = await step(download);
    downloaded = true;
    say(renderSummary({ job, artifacts, url: api.url, key, dataDir, seconds, keep: args.keep }));
    if (args.keep) {
      say(`The API (${api.url}) and the worker keep running. Press Ctrl-C to stop them.`);
      await aborted.catch(() => {});
      return 0;
    }
    say(`done in ${Math.round((Date.now() - started) / 1000)} s; stopping the worker and the API.`);
    return 0;
  } catch (error) {
    if (interrupted) return 130;
    const message = error instanceof Error ? error.message : String(error);
    Deno.stderr.writeSync(encoder.encode(`\ndemo failed: ${message}\n`));
    for (const child of children) {
      const tail = await tailLines(child.logPath, 15);
      if (tail) {
        Deno.stderr.writeSync(
          encoder.encode(`--- last lines of ${child.logPath} ---\n${tail}\n`),
        );
      }
    }
    if (error instanceof ChildProcessError && !children.some((c) => c.logPath === error.logPath)) {
      const tail = await tailLines(error.logPath, 15);
      if (tail) Deno.stderr.writeSync(encoder.encode(`--- ${error.logPath} ---\n${tail}\n`));
    }
    return interrupted ? 130 : 1;
  } finally {
    // The worker first: it is a client of the embedded database the API process serves.
    for (const child of [...children].reverse()) {
      const code = await child.stop();
      say(`${child.name} (pid ${child.pid}) stopped (exit code ${code})`);
    }
    if (folder && !downloaded) {
      // An interrupted download fails once the API has stopped, and gives the folder back itself.
      await download?.catch(() => {});
      await releaseOutputFolder(folder).catch(() => {});
    }
    removeSignals();
  }
}

if (import.meta.main) {
  let args: DemoArgs | "help";
  try {
    args = parseDemoArgs(Deno.args);
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : error}\n${USAGE}`);
    Deno.exit(2);
  }
  if (args === "help") {
    console.log(USAGE);
    Deno.exit(0);
  }
  Deno.exit(await runDemo(args));
}

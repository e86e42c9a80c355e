/**
 * The command-line client: `deno task seed -- <command>`. Talks to the API at `SEED_API_URL`
 * (default http://127.0.0.1:8787) with the key in `SEED_API_KEY`.
 *
 *   submit SPEC.json [--name N] [--metadata K=V]… [--idempotency-key K] [--json]
 *                                                     prints the new job id
 *   list [--status S[,S]] [--name N | --name-prefix P] [--metadata K=V]… [--limit N] [--cursor C]
 *                                                     newest first, a header row, one job a line;
 *                                                     names match case-sensitively, `%` and `_`
 *                                                     as plain characters
 *   status ID [--json]                                status, progress, key metrics one a line
 *   follow ID [--json]                                event lines + progress bar; exit 0 iff
 *                                                     succeeded
 *   cancel ID
 *   delete ID                                         a final job with its checkpoints and logs
 *   download ID [--step N] [--out DIR] [--overwrite]  checkpoint archive → DIR/step-N/, sha256
 *                                                     checked; refuses to write over a file there
 *                                                     unless --overwrite (which replaces a link,
 *                                                     not the file it points at)
 *   skills ID [--step N] [--out FILE] [--overwrite]   skill library JSON → FILE or stdout;
 *                                                     refuses to write over FILE unless
 *                                                     --overwrite (as for download)
 *   metrics ID [--json | --csv]                       each metric's latest value, a table with
 *                                                     a header row; --json/--csv every step
 *   models upload DIR | list | get ID | delete ID   uploaded Hugging Face models (cli_models.ts)
 *   secrets put NAME | list | delete NAME             tenant secrets (cli_secrets.ts)
 *
 * Which command takes which flag, and the usage text, come from one table (cli_commands.ts). A job
 * ID is the whole id or its unique start, at least 8 hex digits (cli_args.ts). A usage error (an
 * unknown option, an option without its value, a flag the command does not take, two flags that
 * exclude each other, an argument more than the command takes (`cancel A B`), a flag value that
 * breaks its rule such as `--limit 0` or `--metadata K`, a malformed ID) prints one message naming
 * what was typed and exits 2, before any request; a failure after that exits 1.
 */
import { lstat, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { ApiError, SeedClient } from "./client.ts";
import { cancelledInQueue, etaAnchor, PlainProgress, queuedAgain } from "./progress.ts";
import {
  bar,
  describe,
  isFinal,
  type Job,
  listTable,
  type MetricsPage,
  metricsTable,
} from "./cli_format.ts";
import { eventLine } from "./events.ts";
import {
  DestinationExistsError,
  DestinationKindError,
  extractVerified,
  kindOf,
} from "./extract.ts";
import { modelsCommand } from "./cli_models.ts";
import { secretsCommand } from "./cli_secrets.ts";
import type { CliIo } from "./cli_io.ts";
import { intOption, resolveJobId, UsageError } from "./cli_args.ts";
import {
  checkArguments,
  checkFlags,
  COMMANDS,
  commandSpec,
  OPTIONS,
  type TypedFlag,
  usageLine,
  usageLines,
} from "./cli_commands.ts";

/** The lines below the commands in every usage text. */
const FOOTER =
  `A job ID is the whole id or its start (at least 8 hex digits, as the dashboard shows) when no
other job's id starts the same.
Environment: SEED_API_URL (default http://127.0.0.1:8787), SEED_API_KEY (deno task demo prints both)
Install once: deno install -g -A -n seed --config deno.json api/client/cli.ts (repository root)`;

/** `seed --help`: every command of {@link COMMANDS}, one a line, then {@link FOOTER}. */
const USAGE = `Usage: seed <command> [options]   (or: deno task seed -- <command> [options])
${COMMANDS.map(usageLine).join("\n")}
${FOOTER}`;

/**
 * The usage of `seed COMMAND --help`: the lines of {@link COMMANDS} for `command` (`models`: every
 * `models` command; `models get`: that one), or the whole usage for a command it does not know.
 */
export function commandUsage(command: string | undefined): string {
  const lines = command === undefined ? "" : usageLines(command);
  if (lines === "") return USAGE;
  return `Usage: seed <command> [options]   (or: deno task seed -- <command> [options])
${lines}
${FOOTER}`;
}

const encoder = new TextEncoder();
const denoIo: CliIo = {
  out: (t) => Deno.stdout.writeSync(encoder.encode(t)),
  err: (t) => Deno.stderr.writeSync(encoder.encode(t)),
  tty: Deno.stderr.isTerminal(),
  env: (n) => Deno.env.get(n),
  stdin: () => new Response(Deno.stdin.readable).text(),
};

/**
 * `follow ID [--json]`: a readable line per notable event on stdout (`status: running`, `stage:
 * rollout`, evaluations; see events.ts), or with `json` each event as it came, one JSON object a
 * line (`{"id", "type", "attempt", "data", "created_at"}`); the progress bar on stderr. Exit 0 iff
 * the job succeeded.
 */
async function follow(
  client: SeedClient,
  id: string,
  opts: { json?: boolean },
  io: CliIo,
): Promise<number> {
  let job = await client.json<Job>(`/v1/jobs/${id}`);
  // The bar's ETA counts down from when this client first read the job's current progress (the
  // job's JSON carries no time of its progress write); a new write starts the count again.
  let eta = etaAnchor(undefined, job.progress, Date.now());
  let shown = "";
  // Off a terminal: a line on change and at least every 15 s (refresh ticks every 2 s), with the
  // time in the stage counted from its `stage` event (the stream replays it when follow attaches
  // mid-stage).
  const plain = new PlainProgress();
  const stageStarts = new Map<string, number>();
  const draw = () => {
    const nowMs = Date.now();
    const line = bar(job, { readAtMs: eta.atMs, nowMs });
    if (!io.tty) {
      const p = job.progress;
      // A job queued again is in no stage: the one in its progress is the last run's (or, once
      // cancelled there, `queued`).
      const stage = queuedAgain(job) || cancelledInQueue(job) ? undefined : p?.stage;
      const key = `${job.status} ${p?.step} ${stage}`;
      const stageSinceMs = stage ? stageStarts.get(stage) : undefined;
      const out = plain.next({ line, key, stage, stageSinceMs }, nowMs);
      if (out !== null) io.err(`${out}\n`);
      return;
    }
    if (line === shown) return;
    shown = line;
    io.err(`\r\x1b[2K${line}`);
  };
  const refresh = async () => {
    job = await client.json<Job>(`/v1/jobs/${id}`).catch(() => job);
    eta = etaAnchor(eta, job.progress, Date.now());
    draw();
  };
  draw();
  const timer = setInterval(refresh, 2000);
  // On a terminal the counted-down ETA is redrawn each second, between the re-reads.
  const tick = io.tty ? setInterval(draw, 1000) : undefined;
  const seenStages = new Set<string>();
  try {
    for await (const msg of client.follow(id)) {
      const started = stageStart(msg.data);
      if (started) stageStarts.set(started.stage, started.ms);
      const line = opts.json ? msg.data : eventLine(msg, seenStages);
      if (line !== null) {
        if (io.tty) io.err("\r\x1b[2K");
        io.out(`${line}\n`);
        shown = "";
      }
      await refresh();
    }
  } finally {
    clearInterval(timer);
    clearInterval(tick);
  }
  await refresh();
  if (io.tty) io.err("\n");
  io.err(`job ${id} ${job.status}${job.error ? `: ${job.error}` : ""}\n`);
  return job.status === "succeeded" ? 0 : 1;
}

/** A `stage` event's stage and when it started (ms since the epoch); null for other events. */
function stageStart(data: string): { stage: string; ms: number } | null {
  try {
    const event = JSON.parse(data);
    const ms = Date.parse(event.created_at);
    const stage = event.data?.stage;
    return event.type === "stage" && typeof stage === "string" && Number.isFinite(ms)
      ? { stage, ms }
      : null;
  } catch {
    return null;
  }
}

/** The `--step` option (a step number, as the API's `{step}` takes it), undefined when absent. */
function stepOption(raw: string | undefined, what: string): number | undefined {
  return intOption("step", raw, { what, min: 0, max: 1_000_000_000 });
}

/**
 * `download ID [--step N] [--out DIR] [--overwrite]`: the checkpoint archive of step N (the latest
 * without `--step`) extracted into `DIR/step-N/` (DIR `job-ID` by default), each file checked
 * against its `SHA256SUMS`; prints one `sha256  bytes\tpath` line a file. With `overwrite`, a file
 * or link at a file's path is replaced by a new file (a link is not followed: the file it points at
 * is left as it was).
 * @throws Error "Cannot download job ID as it has no checkpoints yet" (without "yet" for a job
 *   that has ended, as the API's checkpoint 404 says it); "Cannot download step N of job ID into
 *   DIR as PATH already exists: give --overwrite to replace it" (nothing written) when files of the
 *   archive are there (links too, even broken ones) and `overwrite` is not set; "… into DIR as
 *   PATH must be a folder: it is a file" when DIR, DIR/step-N or a folder of the archive is a file
 *   (or "must be a file: it is a folder" for a folder where a file goes, "… a FIFO", "… a socket",
 *   "… a device" for those, which `overwrite` does not remove); the client's ApiError (a
 *   404 for a step without a checkpoint names the steps that have one); ArchiveError for a bad
 *   archive.
 */
async function download(
  client: SeedClient,
  id: string,
  given: number | undefined,
  opts: { out?: string; overwrite?: boolean },
  io: CliIo,
): Promise<number> {
  let step = given;
  if (step === undefined) {
    const { checkpoints } = await client.json<{ checkpoints: { step: number }[] }>(
      `/v1/jobs/${id}/checkpoints`,
    );
    if (checkpoints.length === 0) {
      // "yet" only while the job may still save one.
      const job = await client.json<Job>(`/v1/jobs/${id}`);
      const yet = isFinal(job.status) ? "" : " yet";
      throw new Error(`Cannot download job ${id} as it has no checkpoints${yet}`);
    }
    step = checkpoints[checkpoints.length - 1].step;
  }
  const out = opts.out ?? `job-${id}`;
  const res = await client.fetch(`/v1/jobs/${id}/checkpoints/${step}/archive`);
  let files;
  try {
    files = await extractVerified(res.body!, out, { overwrite: opts.overwrite });
  } catch (error) {
    if (error instanceof DestinationKindError) {
      throw new Error(`Cannot download step ${step} of job ${id} into ${out} as ${error.reason}`, {
        cause: error,
      });
    }
    if (!(error instanceof DestinationExistsError)) throw error;
    const [first, ...others] = error.paths;
    const what = others.length === 0
      ? `${first} already exists: give --overwrite to replace it`
      : `${first} and ${others.length} more of its files already exist: give --overwrite to ` +
        `replace them`;
    throw new Error(`Cannot download step ${step} of job ${id} into ${out} as ${what}`, {
      cause: error,
    });
  }
  for (const f of files) io.out(`${f.sha256}  ${f.bytes}\t${f.path}\n`);
  io.err(`downloaded step ${step}: ${files.length} files, sha256 verified, into ${out}\n`);
  return 0;
}

/**
 * `skills ID [--step N] [--out FILE] [--overwrite]`: the job's skill library (`GET
 * /v1/jobs/{id}/skills`; the latest without `--step`) as stored (`{version, job_id, step,
 * skills}`), pretty-printed JSON, to FILE or stdout (`step` checked by the caller). With
 * `overwrite`, a file or link at FILE is replaced by a new file (a link is not followed: the file
 * it points at is left as it was).
 * @throws Error "Cannot download the skill library of step N of job ID as FILE already exists:
 *   give --overwrite to replace it" (FILE left as it was) when FILE is there (a link too, even a
 *   broken one) and `overwrite` is not set; "… as FILE must be a file: it is a folder" for a folder
 *   there (or "… a FIFO", "… a socket", "… a device"); "… as FILE must be in a folder that exists: DIR is not one" when FILE's folder is
 *   missing (or is a file); the client's ApiError when there is no library (its 404 names the
 *   steps that have one).
 */
async function skills(
  client: SeedClient,
  id: string,
  step: number | undefined,
  opts: { out?: string; overwrite?: boolean },
  io: CliIo,
): Promise<number> {
  const res = await client.json<{ step: number; skill_count: number; library: unknown }>(
    `/v1/jobs/${id}/skills${step === undefined ? "" : `?step=${step}`}`,
  );
  const text = JSON.stringify(res.library, null, 2) + "\n";
  if (opts.out === undefined) io.out(text);
  else {
    try {
      await writeNewFile(opts.out, text, opts.overwrite === true);
    } catch (error) {
      const cannot = `Cannot download the skill library of step ${res.step} of job ${id} as`;
      // A folder, FIFO, socket or device at FILE answers AlreadyExists, with --overwrite too:
      // --overwrite would not help. lstat: a link to one is replaced with --overwrite, so it
      // counts as a file here.
      const kind = (error instanceof Deno.errors.AlreadyExists ||
          error instanceof Deno.errors.IsADirectory)
        ? await lstat(opts.out).then(kindOf, () => null)
        : null;
      if (kind !== null) {
        throw new Error(`${cannot} ${opts.out} must be a file: it is ${kind}`, { cause: error });
      }
      if (error instanceof Deno.errors.AlreadyExists) {
        // With --overwrite, something was made at FILE again between its removal and the write.
        const hint = opts.overwrite ? "" : ": give --overwrite to replace it";
        throw new Error(`${cannot} ${opts.out} already exists${hint}`, { cause: error });
      }
      if (error instanceof Deno.errors.NotFound || error instanceof Deno.errors.NotADirectory) {
        throw new Error(
          `${cannot} ${opts.out} must be in a folder that exists: ${dirname(opts.out)} is not one`,
          { cause: error },
        );
      }
      throw error;
    }
  }
  io.err(
    `skill library of step ${res.step}: ${res.skill_count} skill${
      res.skill_count === 1 ? "" : "s"
    }${opts.out === undefined ? "" : `, written to ${opts.out}`}\n`,
  );
  return 0;
}

/**
 * Writes `text` to a new file at `path`, never through a link there: the write's open is exclusive
 * (O_EXCL), which refuses anything at `path`, a link included (even a broken one), so a file made
 * between a check and the write is not lost either. With `overwrite`, the file or link there is
 * removed first and the write tried once more: a link is replaced by a file and what it points at
 * is left as it was (as `cp --remove-destination`); a folder, FIFO, socket or device (such as
 * `/dev/null`) is not removed (extract.ts `kindOf`).
 * @throws Deno.errors.AlreadyExists for something at `path` without `overwrite`, for a folder,
 *   FIFO, socket or device there, or for something made there again after the removal; the file
 *   system's error.
 */
async function writeNewFile(path: string, text: string, overwrite: boolean): Promise<void> {
  try {
    return await Deno.writeTextFile(path, text, { createNew: true });
  } catch (error) {
    if (!overwrite || !(error instanceof Deno.errors.AlreadyExists)) throw error;
    if (await lstat(path).then(kindOf, () => null) !== null) throw error;
  }
  // unlink, not Deno.remove: a folder made at `path` since the check stays (unlink refuses one).
  await unlink(path).catch((error) => {
    if ((error as { code?: string }).code !== "ENOENT") throw error;
  });
  await Deno.writeTextFile(path, text, { createNew: true });
}

/**
 * The JSON object in the JobSpec file at `path` (the `submit` command's SPEC.json).
 * @throws Error "Cannot read the JobSpec file PATH …" naming the file when it cannot be read, is
 *   not JSON (with the parser's position), or holds something other than a JSON object.
 */
export async function readSpecFile(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    throw new Error(`Cannot read the JobSpec file ${path}: ${(e as Error).message}`);
  }
  let spec: unknown;
  try {
    spec = JSON.parse(text);
  } catch (e) {
    throw new Error(
      `Cannot read the JobSpec file ${path} as it must be JSON: ${(e as Error).message}`,
    );
  }
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) {
    const kind = spec === null ? "null" : Array.isArray(spec) ? "an array" : typeof spec;
    throw new Error(
      `Cannot read the JobSpec file ${path} as it must hold a JSON object such as ` +
        `{"env": {"id": "sokoban"}}: it holds ${kind}`,
    );
  }
  return spec as Record<string, unknown>;
}

/**
 * `--metadata K=V` options as an object (the first `=` splits; a later one belongs to the value).
 * @throws UsageError "Cannot use --metadata "K" as it must be KEY=VALUE with a non-empty key" for
 *   an option without `=` or with an empty key.
 */
export function metadataOption(options: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const o of options) {
    const at = o.indexOf("=");
    if (at <= 0) {
      throw new UsageError(
        `Cannot use --metadata ${JSON.stringify(o)} as it must be KEY=VALUE with a non-empty key`,
      );
    }
    out[o.slice(0, at)] = o.slice(at + 1);
  }
  return out;
}

/**
 * Runs one CLI command; returns the exit code (0 ok, 1 failure, 2 usage: a {@link UsageError}'s
 * message is printed on stderr).
 * @throws Error, ApiError for a failure after the command was read (the caller prints it, exit 1).
 */
export async function cliMain(args: string[], io: CliIo = denoIo): Promise<number> {
  try {
    return await runCommand(args, io);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.err(`${e.message}\n`);
    return 2;
  }
}

/**
 * The command line read by `parseArgs`.
 * @throws UsageError for an option it does not know or one without its value (`--limit` last),
 *   with the usage text.
 */
function readArgs(args: string[]) {
  try {
    return parseArgs({
      args: args[0] === "--" ? args.slice(1) : args,
      allowPositionals: true,
      options: OPTIONS,
      tokens: true,
    });
  } catch (e) {
    // node:util's errors (ERR_PARSE_ARGS_UNKNOWN_OPTION, …_INVALID_OPTION_VALUE) say which option.
    if (!String((e as { code?: unknown }).code).startsWith("ERR_PARSE_ARGS_")) throw e;
    throw new UsageError(`${parseArgsMessage((e as Error).message)}\n${USAGE}`);
  }
}

/**
 * A usage error's first line for one of `parseArgs`' messages: an unknown option, one without its
 * value, a flag given a value or a value starting with a dash after a space, named as typed;
 * anything else quoted whole.
 */
export function parseArgsMessage(message: string): string {
  const unknown = /^Unknown option '([^']+)'/.exec(message)?.[1];
  if (unknown !== undefined) {
    return `Cannot use ${unknown} as it is not an option of seed (seed --help lists them)`;
  }
  const missing = /^Option '(-[^' ]+)[^']*' argument missing/.exec(message)?.[1];
  if (missing !== undefined) return `Cannot use ${missing} as it needs a value after it`;
  const valued = /^Option '(-[^' ]+)' does not take an argument/.exec(message)?.[1];
  if (valued !== undefined) return `Cannot use ${valued} with a value as it takes none`;
  const dashed = /^Option '(-[^' ]+)' argument is ambiguous/.exec(message)?.[1];
  if (dashed !== undefined) {
    return `Cannot use ${dashed} with a value that starts with a dash unless it is written ` +
      `${dashed}=VALUE`;
  }
  return `Cannot read the command line: ${message}`;
}

/**
 * The flags as typed, in order (`--limit`, `-h`), from `parseArgs`' tokens.
 */
function typedFlags(tokens: { kind: string; name?: string; rawName?: string }[]): TypedFlag[] {
  return tokens.filter((t) => t.kind === "option").map((t) => ({
    name: t.name!,
    raw: t.rawName!,
  }));
}

/** {@link cliMain} without the usage errors' exit status. */
async function runCommand(args: string[], io: CliIo): Promise<number> {
  const { positionals, values, tokens } = readArgs(args);
  const [command, arg] = positionals;
  // `models` and `secrets` have commands of their own: `models get` is one of COMMANDS.
  const family = COMMANDS.filter((c) => c.name.split(" ")[0] === command);
  const spec = commandSpec(command) ?? commandSpec(`${command} ${arg}`);
  if (values.help) {
    io.out(commandUsage(spec?.name ?? command) + "\n");
    return 0;
  }
  const needsArg = family.some((c) => c.args !== "" || c.name.includes(" "));
  if (!command || (needsArg && !arg)) {
    io.err(USAGE + "\n");
    return 2;
  }
  if (spec) {
    try {
      checkFlags(spec, typedFlags(tokens));
      checkArguments(spec, positionals);
    } catch (e) {
      if (!(e instanceof UsageError)) throw e;
      throw new UsageError(`${e.message}\nUsage: seed ${usageLine(spec).trimStart()}`);
    }
  }
  const client = new SeedClient({
    baseUrl: io.env("SEED_API_URL") || "http://127.0.0.1:8787",
    apiKey: io.env("SEED_API_KEY"),
  });
  // Commands that name a job take its whole id or a unique start of it (checked before use).
  const jobCommands = COMMANDS.filter((c) => c.args === "ID" && !c.name.includes(" "))
    .map((c) => c.name);
  const limit = command === "list"
    ? intOption("limit", values.limit, { what: "list jobs", min: 1, max: 100 })
    : undefined;
  const step = command === "download" || command === "skills"
    ? stepOption(values.step, command === "skills" ? "download skills" : "download")
    : undefined;
  // An id that names no job as typed is a UsageError, before any request.
  const jobId = jobCommands.includes(command) ? await resolveJobId(client, arg) : arg;
  const jobPath = `/v1/jobs/${encodeURIComponent(jobId ?? "")}`;
  switch (command) {
    case "submit": {
      const spec = await readSpecFile(arg);
      if (values.name !== undefined) spec.name = values.name;
      if (values.metadata) {
        spec.metadata = {
          ...spec.metadata as Record<string, string> | undefined,
          ...metadataOption(values.metadata),
        };
      }
      const job = await client.submit(spec, values["idempotency-key"]) as unknown as Job;
      if (values.json) io.out(JSON.stringify(job, null, 2) + "\n");
      else io.out(`${job.id}\n`);
      io.err(`submitted job ${job.id} (${job.status})\n`);
      return 0;
    }
    case "list": {
      const q = new URLSearchParams();
      // An empty value is sent too: the API refuses it (400 naming the parameter) rather than the
      // list quietly showing every job, as `--status "$UNSET"` would.
      if (values.status !== undefined) q.set("status", values.status);
      if (limit !== undefined) q.set("limit", String(limit));
      if (values.name !== undefined) q.set("name", values.name);
      if (values["name-prefix"] !== undefined) q.set("name_prefix", values["name-prefix"]);
      for (const [k, v] of Object.entries(metadataOption(values.metadata ?? []))) {
        q.set(`metadata[${k}]`, v);
      }
      const cursor = values.cursor ?? values.after;
      if (cursor !== undefined) q.set("cursor", cursor);
      const query = q.size > 0 ? `?${q}` : "";
      const page = await client.json<{ jobs: Job[]; next_cursor: string | null }>(
        `/v1/jobs${query}`,
      );
      if (values.json) io.out(JSON.stringify(page, null, 2) + "\n");
      else if (page.jobs.length > 0) io.out(listTable(page.jobs));
      else io.err("no jobs\n");
      if (page.next_cursor) io.err(`(more: seed list --cursor ${page.next_cursor})\n`);
      return 0;
    }
    case "status": {
      const job = await client.json<Job>(jobPath);
      io.out(values.json ? JSON.stringify(job, null, 2) + "\n" : describe(job));
      return 0;
    }
    case "follow":
      return await follow(client, encodeURIComponent(jobId), values, io);
    case "cancel": {
      const job = await client.json<Job>(`${jobPath}/cancel`, { method: "POST" });
      io.out(`${job.id}\t${job.status}\n`);
      return 0;
    }
    case "delete": {
      await client.fetch(jobPath, { method: "DELETE" });
      io.out(`${jobId}\tdeleted\n`);
      return 0;
    }
    case "download":
      return await download(client, encodeURIComponent(jobId), step, values, io);
    case "skills":
      return await skills(client, encodeURIComponent(jobId), step, values, io);
    case "models":
      return await modelsCommand(client, { sub: arg, arg: positionals[2], options: values }, io);
    case "metrics": {
      const res = await client.fetch(`${jobPath}/metrics${values.csv ? "?format=csv" : ""}`);
      if (values.csv || values.json) {
        io.out(await res.text() + (values.csv ? "" : "\n"));
        return 0;
      }
      const page = await res.json() as MetricsPage;
      const text = metricsTable(page);
      if (text === "") io.err("no metrics yet\n");
      else {
        io.out(text);
        io.err(`(latest value of each; every step: --json or --csv)\n`);
      }
      return 0;
    }
    case "secrets":
      return await secretsCommand(client, { sub: arg, name: positionals[2] }, io);
    default:
      io.err(`Cannot run "${command}" as it is not a command\n${USAGE}\n`);
      return 2;
  }
}

/**
 * The message `seed` prints for an error: its own, for an HTTP 401 where the key comes from
 * (`SEED_API_KEY`, created with `deno task keys create --tenant NAME` or printed by the demo), and
 * for an API it cannot reach, which `SEED_API_URL` it tried.
 */
export function errorMessage(error: unknown, env: (name: string) => string | undefined): string {
  const message = error instanceof Error ? error.message : String(error);
  const url = env("SEED_API_URL") || "http://127.0.0.1:8787";
  if (error instanceof TypeError && /fetch|connect|request/i.test(message)) {
    return `${message}: cannot reach the API at ${url} (set SEED_API_URL to where it listens; ` +
      `\`deno task demo --keep\` prints it)`;
  }
  if (!(error instanceof ApiError && error.status === 401)) return message;
  const why = env("SEED_API_KEY")
    ? "the key in SEED_API_KEY is not one this API knows (or it was revoked)"
    : "SEED_API_KEY is not set";
  return `${message}\n${why}: export SEED_API_KEY=seed_… with a key of the API at ${url} (\`deno task keys create --tenant NAME\` where it runs; \`deno task demo\` prints one)`;
}

if (import.meta.main) {
  // `deno task seed` runs in the repository root and names the caller's folder INIT_CWD: paths
  // given on the command line (SPEC.json, --out, a model folder) are the caller's.
  const callerCwd = Deno.env.get("INIT_CWD");
  if (callerCwd) Deno.chdir(callerCwd);
  try {
    Deno.exit(await cliMain(Deno.args));
  } catch (error) {
    console.error(`seed: ${errorMessage(error, (n) => Deno.env.get(n))}`);
    Deno.exit(1);
  }
}

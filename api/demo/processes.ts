/**
 * Child processes of `deno task demo`: the API and a worker, each a `deno run -A` of an entry
 * file with its stdout/stderr appended to a log file; stopped by pid with SIGTERM, then SIGKILL
 * after a grace period. Each runs in a process group (and session) of its own, so a Ctrl-C in
 * the demo's terminal reaches the demo alone, which then stops them in order (the worker first:
 * it is a client of the embedded database the API process serves).
 *
 * Each also ends when the demo ends by any means, SIGKILL included, which no handler of the demo
 * sees: its stdin is a pipe whose write end only the demo holds (and never writes to), and
 * `SEED_EXIT_WITH_PARENT=1` makes it stop gracefully, as on SIGTERM, when that pipe reaches end
 * of file, which the kernel causes when the demo exits (jobs/exit_with_parent.ts).
 */
import { fileURLToPath } from "node:url";
import { EXIT_WITH_PARENT_VAR } from "../../jobs/exit_with_parent.ts";

/** The repository root (the folder holding deno.json), as a path. */
export const REPO_ROOT: string = fileURLToPath(new URL("../..", import.meta.url)).replace(
  /\/$/,
  "",
);

/** Thrown when a child exits early or does not become ready in time. */
export class ChildProcessError extends Error {
  /** The child's log file, to point people at. */
  readonly logPath: string;
  constructor(message: string, logPath: string) {
    super(message);
    this.name = "ChildProcessError";
    this.logPath = logPath;
  }
}

/** A running child and how to stop it. */
export interface Child {
  /** Short name (`api`, `worker`). */
  readonly name: string;
  readonly pid: number;
  /** The log file its stdout and stderr go to. */
  readonly logPath: string;
  /** Resolves with the exit code when it exits. */
  readonly exited: Promise<number>;
  /**
   * SIGTERM, then SIGKILL after `graceMs` (default 15 000) if it is still running. Idempotent;
   * resolves with the exit code (or the signal's 128 + n).
   */
  stop(graceMs?: number): Promise<number>;
  /** SIGKILL now (a second Ctrl-C); `exited` then resolves. */
  kill(): void;
}

/** What {@link spawnDeno} starts. */
export interface SpawnOptions {
  /** Short name for messages. */
  name: string;
  /** Entry file, relative to the repository root or absolute. */
  entry: string;
  /** Arguments after the entry file. */
  args?: string[];
  /** Deno flags before the entry file (after `run -A --config deno.json`). */
  denoFlags?: string[];
  /** Extra environment (added to this process's). */
  env?: Record<string, string>;
  /** Log file (created or appended). */
  logPath: string;
  /**
   * Called with each complete line the child writes (stdout or stderr) before it goes to the
   * log; used to learn the API's port from its "api listening" line.
   */
  onLine?: (line: string) => void;
  /**
   * The caller's stop (the demo's Ctrl-C): aborted before the child exists, nothing is started
   * and its reason is thrown.
   */
  signal?: AbortSignal;
}

/**
 * Starts `deno run -A --config <repo>/deno.json ENTRY ARGS…` in the repository root, with
 * `SEED_EXIT_WITH_PARENT=1` and stdin a pipe held open by this process, so the child stops when
 * this process exits (the entry must honour the variable, as api/main.ts and workers/main.ts do).
 */
export async function spawnDeno(options: SpawnOptions): Promise<Child> {
  options.signal?.throwIfAborted();
  const log = await Deno.open(options.logPath, { create: true, append: true });
  if (options.signal?.aborted) {
    // Stopped while the log opened: the caller has already stopped what it started.
    log.close();
    throw options.signal.reason;
  }
  const entry = options.entry.startsWith("/") ? options.entry : `${REPO_ROOT}/${options.entry}`;
  const process = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--config",
      `${REPO_ROOT}/deno.json`,
      ...(options.denoFlags ?? []),
      entry,
      ...(options.args ?? []),
    ],
    cwd: REPO_ROOT,
    env: { ...options.env, NO_COLOR: "1", [EXIT_WITH_PARENT_VAR]: "1" },
    // Never written to: its end of file, when this process exits, tells the child to stop.
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    // setsid: the terminal's Ctrl-C (sent to its foreground process group) does not reach it.
    detached: true,
  }).spawn();
  const encoder = new TextEncoder();
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    let buffered = "";
    const decoder = new TextDecoder();
    for await (const bytes of stream) {
      buffered += decoder.decode(bytes, { stream: true });
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        options.onLine?.(line);
        await log.write(encoder.encode(line + "\n"));
      }
    }
    if (buffered) await log.write(encoder.encode(buffered + "\n"));
  };
  const pumps = Promise.all([pump(process.stdout), pump(process.stderr)]);
  const exited = process.status.then(async (s) => {
    await process.stdin.close().catch(() => {});
    await pumps.catch(() => {});
    log.close();
    return s.code;
  });
  let stopping: Promise<number> | undefined;
  return {
    name: options.name,
    pid: process.pid,
    logPath: options.logPath,
    exited,
    stop(graceMs = 15_000) {
      stopping ??= (async () => {
        try {
          process.kill("SIGTERM");
        } catch { /* already gone */ }
        let timer: ReturnType<typeof setTimeout> | undefined;
        const killed = new Promise<void>((resolve) => {
          timer = setTimeout(() => {
            try {
              process.kill("SIGKILL");
            } catch { /* already gone */ }
            resolve();
          }, graceMs);
        });
        await Promise.race([exited, killed]);
        clearTimeout(timer);
        return await exited;
      })();
      return stopping;
    },
    kill() {
      try {
        process.kill("SIGKILL");
      } catch { /* already gone */ }
    },
  };
}

/**
 * Starts the API (`api/main.ts`) on a free loopback port and resolves with its base URL once it
 * logged "api listening". Throws {@link ChildProcessError} when it exits first or takes longer
 * than `timeoutMs` (default 180 000: a first run may still be loading npm packages), and
 * `options.signal`'s reason when it is aborted before the child exists (nothing is started).
 */
export async function startApi(
  options: {
    env: Record<string, string>;
    logPath: string;
    timeoutMs?: number;
    /** Called as soon as the child exists, so a caller interrupted meanwhile can stop it. */
    onSpawn?: (child: Child) => void;
    /** The caller's stop: aborted before the child exists, nothing is started. */
    signal?: AbortSignal;
  },
): Promise<{ child: Child; url: string }> {
  let resolvePort!: (port: number) => void;
  const port = new Promise<number>((resolve) => (resolvePort = resolve));
  const child = await spawnDeno({
    name: "api",
    entry: "api/main.ts",
    // As `deno task api` runs it: request.signal aborts only when a client goes away.
    denoFlags: ["--unstable-no-legacy-abort"],
    env: { ...options.env, PORT: "0", HOST: "127.0.0.1" },
    logPath: options.logPath,
    signal: options.signal,
    onLine: (line) => {
      if (!line.includes("api listening")) return;
      try {
        resolvePort(JSON.parse(line).port);
      } catch { /* not the JSON line */ }
    },
  });
  options.onSpawn?.(child);
  const timeoutMs = options.timeoutMs ?? 180_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const failed = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new ChildProcessError(
            `Cannot start the API as it must listen within ${
              timeoutMs / 1000
            } s: it did not (log: ${options.logPath})`,
            options.logPath,
          ),
        ),
      timeoutMs,
    );
    child.exited.then((code) =>
      reject(
        new ChildProcessError(
          `Cannot start the API as it must keep running: it exited with code ${code} (log: ${options.logPath})`,
          options.logPath,
        ),
      )
    );
  });
  try {
    return { child, url: `http://127.0.0.1:${await Promise.race([port, failed])}` };
  } catch (error) {
    await child.stop(2000);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `deno run -A api/tools/keys.ts create --tenant TENANT --name NAME` against the same data and
 * returns the printed key. Throws {@link ChildProcessError} with the child's stderr on failure, and
 * `options.signal`'s reason when it is aborted: before the start nothing runs, later the child is
 * killed.
 */
export async function createApiKey(
  options: {
    env: Record<string, string>;
    tenant: string;
    name: string;
    logPath: string;
    signal?: AbortSignal;
  },
): Promise<string> {
  options.signal?.throwIfAborted();
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--config",
      `${REPO_ROOT}/deno.json`,
      `${REPO_ROOT}/api/tools/keys.ts`,
      "create",
      "--tenant",
      options.tenant,
      "--name",
      options.name,
    ],
    cwd: REPO_ROOT,
    env: { ...options.env, NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: options.signal,
  }).output();
  options.signal?.throwIfAborted();
  const stderr = new TextDecoder().decode(out.stderr);
  await Deno.writeTextFile(options.logPath, stderr, { append: true });
  const key = new TextDecoder().decode(out.stdout).trim();
  if (!out.success || !/^seed_[A-Za-z0-9_-]{43}$/.test(key)) {
    throw new ChildProcessError(
      `Cannot create an API key as \`deno task keys create\` must print one: exit code ${out.code}, ${
        stderr.trim().split("\n").slice(-3).join(" | ")
      }`,
      options.logPath,
    );
  }
  return key;
}

/** The last `n` lines of a text file ("" when it cannot be read). */
export async function tailLines(path: string, n: number): Promise<string> {
  try {
    const lines = (await Deno.readTextFile(path)).trimEnd().split("\n");
    return lines.slice(-n).join("\n");
  } catch {
    return "";
  }
}

/**
 * The one structured logger of the service (library code never prints), shared by the API, the
 * worker and the inference server: JSON lines on stderr, each
 * `{"time":"<ISO 8601>","level":"info","msg":"…","service":"api",…}`: the time, level and message
 * first, then the bound fields (`service`: `api`, `worker` or `serve`, bound by each process
 * entry; `jobId`, `attempt`, `workerId`, …), then the line's own. An operator who collects the
 * processes' streams together orders them by `time` and tells them apart by `service`.
 * `LOG_LEVEL` (debug | info | warn | error in any case, default info) sets the threshold; any other
 * value is refused, never read as some level: the processes that log (`deno task api`,
 * `deno task worker`, `deno task serve`) validate it with their other variables and stop at start
 * naming it.
 */
import { z } from "zod";

/** Log levels, least to most severe: the values `LOG_LEVEL` takes. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;

/** Log levels, least to most severe. */
export type LogLevel = typeof LOG_LEVELS[number];

/**
 * The schema of `LOG_LEVEL`'s value: a level in any case (`DEBUG` reads as debug). Anything else
 * raises the issue "one of debug, info, warn, error", the rule jobs/settings.ts puts after "must
 * be". Chain `.default("info")` for an unset variable.
 */
export const LogLevelSetting = z.string().transform((s) => s.toLowerCase())
  .pipe(z.enum(LOG_LEVELS, { error: `one of ${LOG_LEVELS.join(", ")}` }));

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** A structured logger; `child` binds more fields. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** A logger whose lines also carry `fields`. */
  child(fields: Record<string, unknown>): Logger;
}

/** Where log lines go (default: stderr). */
export type LogSink = (line: string) => void;

const encoder = new TextEncoder();
/**
 * A line that cannot be written because the reader of stderr is gone (the parent that read a
 * child's log was killed) is dropped: logging must not stop the process from stopping cleanly.
 */
const stderrSink: LogSink = (line) => {
  try {
    Deno.stderr.writeSync(encoder.encode(line + "\n"));
  } catch (e) {
    if (!(e instanceof Deno.errors.BrokenPipe)) throw e;
  }
};

/**
 * The level `LOG_LEVEL` names in `env`: info when it is unset or empty.
 * @throws RangeError "Cannot use LOG_LEVEL as it must be one of debug, info, warn, error: current
 *   value is "debg"" for any other value.
 */
export function logLevelFromEnv(
  env: Record<string, string | undefined> = Deno.env.toObject(),
): LogLevel {
  const raw = env.LOG_LEVEL;
  if (raw === undefined || raw === "") return "info";
  const parsed = LogLevelSetting.safeParse(raw);
  if (parsed.success) return parsed.data;
  throw new RangeError(
    `Cannot use LOG_LEVEL as it must be ${parsed.error.issues[0].message}: current value is ${
      JSON.stringify(raw)
    }`,
  );
}

/** Turns an error into loggable fields (name, message, and the stack for operators). */
export function errorFields(e: unknown): Record<string, unknown> {
  if (e instanceof Error) return { error: e.name, message: e.message, stack: e.stack };
  return { error: String(e) };
}

/**
 * Creates a logger with `fields` bound.
 * @param options.level threshold (default: {@link logLevelFromEnv}); `options.sink` receives lines.
 * @throws RangeError naming LOG_LEVEL when no level is given and its value is not a level.
 */
export function createLogger(
  fields: Record<string, unknown> = {},
  options: { level?: LogLevel; sink?: LogSink } = {},
): Logger {
  const level = options.level ?? logLevelFromEnv();
  const threshold = RANK[level];
  const sink = options.sink ?? stderrSink;
  const write = (level: LogLevel, msg: string, extra?: Record<string, unknown>) => {
    if (RANK[level] < threshold) return;
    sink(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields, ...extra }));
  };
  return {
    debug: (m, f) => write("debug", m, f),
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
    child: (more) => createLogger({ ...fields, ...more }, { level, sink }),
  };
}

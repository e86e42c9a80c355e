/**
 * The one structured logger of library code (library code never prints): JSON lines on stderr, each
 * with a time, level, message and the bound fields (`jobId`, `attempt`, `workerId`, …). `LOG_LEVEL`
 * (debug | info | warn | error, default info) sets the threshold.
 */

/** Log levels, least to most severe. */
export type LogLevel = "debug" | "info" | "warn" | "error";

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

function levelFromEnv(): LogLevel {
  const v = (Deno.env.get("LOG_LEVEL") ?? "info").toLowerCase();
  return v in RANK ? v as LogLevel : "info";
}

/** Turns an error into loggable fields (name, message, and the stack for operators). */
export function errorFields(e: unknown): Record<string, unknown> {
  if (e instanceof Error) return { error: e.name, message: e.message, stack: e.stack };
  return { error: String(e) };
}

/**
 * Creates a logger with `fields` bound.
 * @param options.level threshold (default `LOG_LEVEL` or info); `options.sink` receives lines.
 */
export function createLogger(
  fields: Record<string, unknown> = {},
  options: { level?: LogLevel; sink?: LogSink } = {},
): Logger {
  const threshold = RANK[options.level ?? levelFromEnv()];
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
    child: (more) => createLogger({ ...fields, ...more }, { level: options.level, sink }),
  };
}

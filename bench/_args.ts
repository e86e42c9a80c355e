/**
 * The benchmarks' command-line flags: node:util's `parseArgs` with `--help` and one-line errors.
 *
 * Each bench declares its flags once (the `parseArgs` options table) beside a `USAGE` text and
 * calls `benchArgs` at the top. `--help` or `-h` prints the usage to stdout and exits 0; an
 * unknown option, an option missing its value, a value given to a boolean option or a positional
 * argument (unless the bench takes them, `positionals`) prints
 * `bench:<name>: <what is wrong> (see --help)` to stderr and exits 2, with no stack trace.
 * `parseBenchArgs` is the same without printing or exiting; `benchCommandLine` also gives the
 * positional arguments of a tool that takes them. The shell scripts (bench/gpu_rollout.sh,
 * bench/tools/*.sh) answer the same way through bench/tools/_no_args.sh.
 */
import { parseArgs, type ParseArgsOptionsConfig } from "node:util";

/** What a bench's command line is parsed with. */
export interface BenchArgsConfig<O extends ParseArgsOptionsConfig> {
  /** The bench's task name (`bench:learn`): the prefix of every error line. */
  name: string;
  /** The text `--help` prints: how to run the bench and what each flag does. */
  usage: string;
  /** The flags, as `parseArgs` takes them. */
  options: O;
  /**
   * The most positional arguments the tool takes (`bench/tools/preset.ts NAME`); default 0. More
   * than that is a bad command line.
   */
  positionals?: number;
}

/**
 * The flag values `parseArgs` gives for `options` (a default makes a flag's value non-optional).
 */
export type BenchArgValues<O extends ParseArgsOptionsConfig> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O }>
>["values"];

/** A parsed command line: the values, a request for the usage, or a one-line error. */
export type BenchArgsOutcome<O extends ParseArgsOptionsConfig> =
  | { kind: "values"; values: BenchArgValues<O>; positionals: string[] }
  | { kind: "help"; text: string }
  | { kind: "error"; line: string };

/**
 * Parses `argv` against `config.options` without printing or exiting. `--help` or `-h` anywhere
 * before a `--` asks for the usage, whatever else is on the line. A command line `parseArgs`
 * refuses gives `<name>: <its message on one line> (see --help)`.
 * Throws what `parseArgs` throws for anything other than a bad command line (a bad options table).
 */
export function parseBenchArgs<const O extends ParseArgsOptionsConfig>(
  argv: readonly string[],
  config: BenchArgsConfig<O>,
): BenchArgsOutcome<O> {
  const end = argv.indexOf("--");
  if ((end < 0 ? argv : argv.slice(0, end)).some((a) => a === "--help" || a === "-h")) {
    return { kind: "help", text: config.usage };
  }
  const most = config.positionals ?? 0;
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      options: config.options,
      allowPositionals: most > 0,
    });
    if (positionals.length > most) {
      return {
        kind: "error",
        line: `${config.name}: Unexpected argument '${
          positionals[most]
        }'. This command takes at most ${most} positional argument${
          most === 1 ? "" : "s"
        } (see --help)`,
      };
    }
    return { kind: "values", values, positionals };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== "string" || !code.startsWith("ERR_PARSE_ARGS_")) throw error;
    // parseArgs' messages may span lines ("argument is ambiguous. Did you forget …"): join them.
    let message = (error as Error).message.split("\n").map((l) => l.trim()).join(" ");
    // Where positional arguments are allowed it adds how to pass one that starts with "-": a
    // tool's users mistype flags far more often than they name such a file.
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") message = message.split(". To specify")[0];
    return { kind: "error", line: `${config.name}: ${message} (see --help)` };
  }
}

/**
 * The bench's flag values from `argv` (default `Deno.args`). Prints the usage and exits 0 on
 * `--help`/`-h`; prints the one error line to stderr and exits 2 on a bad command line.
 */
export function benchArgs<const O extends ParseArgsOptionsConfig>(
  config: BenchArgsConfig<O>,
  argv: readonly string[] = Deno.args,
): BenchArgValues<O> {
  return benchCommandLine(config, argv).values;
}

/**
 * {@link benchArgs} for a tool that also takes positional arguments (`config.positionals`): the
 * flag values and the positional arguments. Exits as {@link benchArgs} does.
 */
export function benchCommandLine<const O extends ParseArgsOptionsConfig>(
  config: BenchArgsConfig<O>,
  argv: readonly string[] = Deno.args,
): { values: BenchArgValues<O>; positionals: string[] } {
  const outcome = parseBenchArgs(argv, config);
  if (outcome.kind === "help") {
    console.log(outcome.text);
    Deno.exit(0);
  }
  if (outcome.kind === "error") {
    console.error(outcome.line);
    Deno.exit(2);
  }
  return { values: outcome.values, positionals: outcome.positionals };
}

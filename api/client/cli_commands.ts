/**
 * The CLI's one table of commands and the flags each takes (api/client/cli.ts). The usage text of
 * `seed --help` and of `seed COMMAND --help`, the options `parseArgs` reads, and the check that a
 * flag belongs to the command it was given with ({@link checkFlags}) all come from it, so they
 * cannot disagree; {@link checkArguments} holds a command to the arguments its usage shows.
 */
import { UsageError } from "./cli_args.ts";

/**
 * Every flag of the command line, as `parseArgs` takes it (a string or a switch, repeatable or
 * not); which command takes which is {@link COMMANDS}'s business. `--help` (`-h`) goes with any
 * command.
 */
export const OPTIONS = {
  "idempotency-key": { type: "string" },
  json: { type: "boolean" },
  status: { type: "string" },
  cursor: { type: "string" },
  after: { type: "string" },
  limit: { type: "string" },
  step: { type: "string" },
  out: { type: "string" },
  csv: { type: "boolean" },
  overwrite: { type: "boolean" },
  name: { type: "string" },
  "name-prefix": { type: "string" },
  metadata: { type: "string", multiple: true },
  help: { type: "boolean", short: "h" },
} as const;

/** A flag's name without its dashes. */
export type FlagName = Exclude<keyof typeof OPTIONS, "help">;

/** One command of the CLI (a `models` or `secrets` subcommand is a command of its own). */
export interface CommandSpec {
  /** As typed: `list`, `models upload`. */
  name: string;
  /** Its positional arguments as the usage shows them (`ID`, `SPEC.json`), "" for none. */
  args: string;
  /**
   * The flags it takes, in usage order, each with the placeholder of its value ("" for a
   * switch). A repeatable flag (OPTIONS' `multiple`) shows as `[--metadata K=V]...`.
   */
  flags: Partial<Record<FlagName, string>>;
  /** Pairs of its flags that exclude each other; the usage shows a pair as `[--a A | --b B]`. */
  exclusive?: [FlagName, FlagName][];
  /**
   * Flags that mean something only with another (`skills`: `overwrite` needs `out`, as without it
   * the library goes to stdout); one given without the other is a usage error.
   */
  needs?: Partial<Record<FlagName, FlagName>>;
  /** Another name of one of its flags (`after` for `cursor`): excludes it, not in the usage. */
  aliases?: Partial<Record<FlagName, FlagName>>;
  /** What it does, for the usage line (after the flags, or on lines of their own). */
  notes?: string[];
}

/** The commands, in the order `seed --help` lists them. */
export const COMMANDS: readonly CommandSpec[] = [
  {
    name: "submit",
    args: "SPEC.json",
    flags: { name: "N", metadata: "K=V", "idempotency-key": "K", json: "" },
    notes: ["prints the new job id"],
  },
  {
    name: "list",
    args: "",
    flags: {
      status: "S[,S]",
      name: "N",
      "name-prefix": "P",
      metadata: "K=V",
      limit: "N",
      cursor: "C",
      json: "",
    },
    exclusive: [["name", "name-prefix"], ["cursor", "after"]],
    aliases: { after: "cursor" },
    notes: [
      "--name: the whole name; --name-prefix: its beginning. Both are case-sensitive, and",
      "% and _ are plain characters (no wildcards). --after C is --cursor C.",
    ],
  },
  { name: "status", args: "ID", flags: { json: "" } },
  {
    name: "follow",
    args: "ID",
    flags: { json: "" },
    notes: ["event lines + progress bar; exit 0 iff the job succeeded"],
  },
  { name: "cancel", args: "ID", flags: {} },
  { name: "delete", args: "ID", flags: {} },
  {
    name: "download",
    args: "ID",
    flags: { step: "N", out: "DIR", overwrite: "" },
    notes: [
      "the latest checkpoint by default, into DIR/step-N/; sha256 checked; files already",
      "there are an error unless --overwrite (a link there is replaced, not followed)",
    ],
  },
  {
    name: "skills",
    args: "ID",
    flags: { step: "N", out: "FILE", overwrite: "" },
    needs: { overwrite: "out" },
    notes: [
      "the skill library JSON, the latest by default, → FILE or stdout; a FILE already there",
      "is an error unless --overwrite (a link there is replaced, not followed)",
    ],
  },
  {
    name: "metrics",
    args: "ID",
    flags: { json: "", csv: "" },
    exclusive: [["json", "csv"]],
    notes: ["each metric's latest value; every step: --json or --csv"],
  },
  {
    name: "models upload",
    args: "DIR",
    flags: { name: "N", "idempotency-key": "K", json: "" },
    notes: ["prints the model id"],
  },
  { name: "models list", args: "", flags: { json: "" } },
  { name: "models get", args: "ID", flags: { json: "" } },
  { name: "models delete", args: "ID", flags: {} },
  {
    name: "secrets put",
    args: "NAME",
    flags: {},
    notes: ["the value is read from stdin, never argv"],
  },
  { name: "secrets list", args: "", flags: {} },
  { name: "secrets delete", args: "NAME", flags: {} },
];

/** The entry of {@link COMMANDS} named `name` (`list`, `models get`), undefined for none. */
export function commandSpec(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name);
}

/** The flag a flag stands for in `spec` (an alias's target; the flag itself otherwise). */
function canonical(spec: CommandSpec, flag: FlagName): FlagName {
  return spec.aliases?.[flag] ?? flag;
}

/** Whether `spec` takes `flag` (itself or as an alias). */
function takes(spec: CommandSpec, flag: FlagName): boolean {
  return canonical(spec, flag) in spec.flags;
}

/**
 * One command's usage line: `list [--status S[,S]] [--name N | --name-prefix P] …`, then its
 * notes (after the flags when they fit one line of 100 characters, else indented below).
 */
export function usageLine(spec: CommandSpec): string {
  const shown = new Set<FlagName>();
  const parts = [spec.name, spec.args].filter((p) => p !== "");
  const one = (flag: FlagName) => {
    const value = spec.flags[flag];
    return `--${flag}${value ? ` ${value}` : ""}`;
  };
  for (const flag of Object.keys(spec.flags) as FlagName[]) {
    if (shown.has(flag)) continue;
    const pair = spec.exclusive?.find(([a, b]) => a === flag && b in spec.flags);
    const group = pair ? [flag, pair[1]] : [flag];
    group.forEach((f) => shown.add(f));
    const repeat = (OPTIONS[flag] as { multiple?: boolean }).multiple ? "..." : "";
    parts.push(`[${group.map(one).join(" | ")}]${repeat}`);
  }
  const line = `  ${parts.join(" ")}`;
  const notes = spec.notes ?? [];
  if (notes.length === 1 && line.length + 3 + notes[0].length <= 100) {
    return `${line}   (${notes[0]})`;
  }
  return [line, ...notes.map((n) => `      ${n}`)].join("\n");
}

/** The usage lines of every command whose name is `prefix` or starts with `prefix `. */
export function usageLines(prefix: string): string {
  return COMMANDS.filter((c) => c.name === prefix || c.name.startsWith(`${prefix} `))
    .map(usageLine).join("\n");
}

/** The commands that take `flag` (itself or as an alias), as `list, status`. */
function commandsTaking(flag: FlagName): string {
  return COMMANDS.filter((c) => takes(c, flag)).map((c) => c.name).join(", ");
}

/** A flag as the command line typed it (the parser's token), and its name. */
export interface TypedFlag {
  /** Without dashes, as OPTIONS names it. */
  name: string;
  /** As typed: `--limit`, `-h`. */
  raw: string;
}

/**
 * Checks the flags typed with command `spec`: each must be one it takes (`--help` goes with any),
 * only a repeatable one (`--metadata`) may come twice, no two of a pair it names in `exclusive`
 * may come together, and none it `needs` another for may come without that one.
 * @throws UsageError "Cannot use --limit with status: it applies to list" for a flag the command
 *   does not take; "Cannot use --limit twice with list as it takes one value: give it once" for
 *   a flag given twice that is not repeatable; "Cannot use --json with --csv in metrics as they
 *   exclude each other: give one of them" for both of such a pair (each named as typed, in the
 *   order typed); "Cannot use --overwrite with skills as it needs --out FILE: give both, or
 *   neither" for a flag without the one it needs.
 */
export function checkFlags(spec: CommandSpec, typed: TypedFlag[]): void {
  const given = new Map<FlagName, string>();
  for (const { name, raw } of typed) {
    if (name === "help") continue;
    const flag = name as FlagName;
    if (!takes(spec, flag)) {
      const others = commandsTaking(flag);
      throw new UsageError(
        `Cannot use ${raw} with ${spec.name}: it applies to ${
          others === "" ? "no command" : others
        }`,
      );
    }
    const multiple = (OPTIONS[flag] as { multiple?: boolean }).multiple === true;
    if (given.has(flag) && !multiple) {
      throw new UsageError(
        `Cannot use ${raw} twice with ${spec.name} as it takes one value: give it once`,
      );
    }
    if (!given.has(flag)) given.set(flag, raw);
  }
  for (const [a, b] of spec.exclusive ?? []) {
    const rawA = given.get(a), rawB = given.get(b);
    if (rawA === undefined || rawB === undefined) continue;
    const [first, second] = typed.findIndex((t) => t.name === a) <
        typed.findIndex((t) => t.name === b)
      ? [rawA, rawB]
      : [rawB, rawA];
    throw new UsageError(
      `Cannot use ${first} with ${second} in ${spec.name} as they exclude each other: give one of them`,
    );
  }
  for (const [flag, needed] of Object.entries(spec.needs ?? {}) as [FlagName, FlagName][]) {
    const raw = given.get(flag);
    if (raw === undefined || given.has(needed)) continue;
    const value = spec.flags[needed];
    throw new UsageError(
      `Cannot use ${raw} with ${spec.name} as it needs --${needed}${
        value ? ` ${value}` : ""
      }: give both, or neither`,
    );
  }
}

/**
 * Checks the positional arguments typed with command `spec` (the command's own words first, as
 * `models get ID`): no more than its name and its {@link CommandSpec.args}, so `seed cancel A B`
 * does not cancel A alone and `seed secrets put NAME VALUE` does not read the value from stdin.
 * Too few are the caller's business (the usage text).
 * @throws UsageError "Cannot use "B" with cancel as it takes ID only" (or "as it takes no
 *   arguments"), naming the first argument too many as typed.
 */
export function checkArguments(spec: CommandSpec, positionals: string[]): void {
  const taken = spec.name.split(" ").length + (spec.args === "" ? 0 : 1);
  if (positionals.length <= taken) return;
  const takes = spec.args === "" ? "no arguments" : `${spec.args} only`;
  throw new UsageError(
    `Cannot use ${JSON.stringify(positionals[taken])} with ${spec.name} as it takes ${takes}`,
  );
}

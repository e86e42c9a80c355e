/**
 * Settings a process reads from environment variables at its start, with one message for every bad
 * value: `Cannot start <process> as <VARIABLE> must be <rule>: current value is "<value>"`. Each
 * setting's zod schema gives its rule as the message of every issue it raises (the words after
 * "must be"), and {@link settingsErrorMessage} writes the line. The worker
 * (workers/worker/config.ts), the inference server (workers/serve/main.ts) and the API
 * (api/main.ts) validate their variables so, and the environment server
 * (workers/envs/server_main.ts) its `--port`; this lives in jobs/ because it is the part they may
 * all import (README.md, Architecture).
 */
import { z } from "zod";

/**
 * The schema of a variable holding a whole number from `min` to `max` (of `options.unit`, e.g.
 * `ms` or `MiB`, when given): decimal digits only, so `1.5`, `1e3`, `0x10`, `-1`, ` 8` and `abc`
 * are refused, where `Number` or `z.coerce.number` would read some of them. Every way to break it
 * raises the one issue message, its rule: `a whole number of MiB from 0 to 65536`. It parses a
 * string into a number (digits past what a number holds, read as Infinity, are out of bounds too);
 * chain `.optional()` or `.default(n)` for an unset variable.
 */
export function wholeNumberSetting(min: number, max: number, options: { unit?: string } = {}) {
  const rule = `a whole number ${options.unit ? `of ${options.unit} ` : ""}from ${min} to ${max}`;
  return z.string({ error: rule }).regex(/^[0-9]+$/, { error: rule }).transform(Number)
    .pipe(z.number({ error: rule }).min(min, { error: rule }).max(max, { error: rule }));
}

/**
 * Parses the variables `schema` names (its keys) from `env`, an empty value counting as unset, so
 * `PORT=` takes the default as an absent `PORT` does.
 * @throws z.ZodError with an issue per bad variable (see {@link settingsErrorMessage}).
 */
export function readSettings<T extends z.ZodObject>(
  schema: T,
  env: Record<string, string | undefined>,
): z.output<T> {
  return schema.parse(
    Object.fromEntries(
      Object.keys(schema.shape).map((k) => [k, env[k] === "" ? undefined : env[k]]),
    ),
  );
}

/**
 * The one line that says why `process` (`the worker`, `the server`) cannot start, from the error of
 * a schema of settings whose issues' paths begin with the variable's name and whose messages are
 * rules: `Cannot start the worker as WORKER_POLL_MS must be a whole number of ms from 10 to 600000:
 * current value is "5s"`, then `; NAME must be …` for each other bad variable (each named once,
 * with its first issue). `env` gives the values shown (JSON-quoted, so spaces show).
 */
export function settingsErrorMessage(
  process: string,
  error: z.ZodError,
  env: Record<string, string | undefined> = Deno.env.toObject(),
): string {
  const rules = new Map<string, string>();
  for (const issue of error.issues) {
    const name = String(issue.path[0]);
    if (!rules.has(name)) rules.set(name, issue.message);
  }
  const why = [...rules].map(([name, rule]) =>
    `${name} must be ${rule}: current value is ${JSON.stringify(env[name])}`
  );
  return `Cannot start ${process} as ${why.join("; ")}`;
}

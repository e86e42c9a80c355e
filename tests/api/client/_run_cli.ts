/** Runs the CLI in process for tests, its output captured. */
import { cliMain } from "../../../api/client/cli.ts";
import type { CliIo } from "../../../api/client/cli_io.ts";

/** What one CLI run printed and returned. */
export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/**
 * Runs `seed ARGS` with `env` as its environment (SEED_API_URL, SEED_API_KEY, …), no terminal and
 * an empty stdin; throws what the CLI throws after its own checks.
 */
export async function runCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  let out = "";
  let err = "";
  const io: CliIo = {
    out: (t) => out += t,
    err: (t) => err += t,
    tty: false,
    env: (n) => env[n],
    stdin: () => Promise.resolve(""),
  };
  const code = await cliMain(args, io);
  return { code, out, err };
}

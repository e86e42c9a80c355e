/**
 * The I/O of the command-line client (api/client/cli.ts), in a file of its own so that the
 * subcommand files (cli_models.ts, cli_secrets.ts) take it without importing the CLI back.
 */

/** Where the CLI writes: stdout for results, stderr for messages and the progress bar. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** True when stderr is a terminal (the bar redraws in place). */
  tty: boolean;
  env: (name: string) => string | undefined;
  /** Reads all of stdin as text (`secrets put`). */
  stdin?: () => Promise<string>;
}

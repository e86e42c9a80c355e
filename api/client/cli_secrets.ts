/**
 * `seed secrets …`: tenant secrets (workers/seed/README.md, "LLM annotator for the analyzer
 * warm-up"), e.g. the API key a JobSpec's `warmup.analyzer.annotator.credential_secret` names.
 *
 *   secrets put NAME       stores the value read from stdin (one trailing newline dropped)
 *   secrets list           names and last update; values never come back
 *   secrets delete NAME    refused while a queued or running job names it
 *
 * The value is read from stdin, never argv: arguments are visible to every user in `ps`.
 */
import type { CliIo } from "./cli_io.ts";
import { usageLines } from "./cli_commands.ts";
import type { SeedClient } from "./client.ts";

/** Usage lines of the `secrets` commands, from the CLI's one table (cli_commands.ts). */
export const SECRETS_USAGE: string = usageLines("secrets");

/**
 * Runs `secrets SUB [NAME]`; returns the exit code (0 ok, 2 usage).
 * @throws ApiError on an HTTP error answer.
 */
export async function secretsCommand(
  client: SeedClient,
  args: { sub?: string; name?: string },
  io: CliIo,
): Promise<number> {
  const { sub, name } = args;
  const path = `/v1/secrets/${encodeURIComponent(name ?? "")}`;
  if (sub === "list") {
    const page = await client.json<{ secrets: { name: string; updated_at: string }[] }>(
      "/v1/secrets",
    );
    for (const s of page.secrets) io.out(`${s.name}\t${s.updated_at}\n`);
    return 0;
  }
  if (sub === "put" && name && io.stdin) {
    const value = (await io.stdin()).replace(/\r?\n$/, "");
    await client.json(path, {
      method: "PUT",
      body: JSON.stringify({ value }),
      headers: { "content-type": "application/json" },
    });
    io.err(`stored secret ${name}\n`);
    return 0;
  }
  if (sub === "delete" && name) {
    await client.fetch(path, { method: "DELETE" });
    io.err(`deleted secret ${name}\n`);
    return 0;
  }
  io.err(`Cannot run "secrets${sub ? ` ${sub}` : ""}" as it needs one of:\n${SECRETS_USAGE}\n`);
  return 2;
}

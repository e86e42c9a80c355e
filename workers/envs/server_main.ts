/**
 * `deno task env-server [--env ID]… [--port P] [--host H]`: serves built-in environments over
 * the HTTP environment protocol (workers/envs/http/protocol.ts).
 *
 * Without `--env` every built-in is served (each under `/envs/{id}`); with exactly one it is
 * also served at the root. Default port 8787 on 127.0.0.1 (`--port 0`: a free one, printed). Stops
 * on SIGINT/SIGTERM. A `--port` that is not a whole number from 0 to 65535 (decimal digits only:
 * `1e3`, `0x10` and an empty value are refused) or an unknown `--env` stops it before it serves,
 * with one line and exit status 2 (a usage error): `Cannot start the environment server as --port
 * must be a whole number from 0 to 65535: current value is "abc"` (jobs/settings.ts, the line of
 * the API's `PORT` and the inference server's `SERVE_PORT`). So does a command line it cannot read
 * (an unknown flag, a positional argument, `--port` last or followed by a value starting with a
 * dash such as `--port -1`): `Cannot start the environment server as its command line must be
 * [--env ID]… [--port P] [--host H]: Unknown option '--prot'…`.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { settingsErrorMessage, wholeNumberSetting } from "../../jobs/settings.ts";
import { serveEnvironments } from "./http/server.ts";
import { getEnvironment, listEnvironments } from "./registry.ts";

/** The flags it takes, as its usage error shows them. */
const USAGE = "[--env ID]… [--port P] [--host H]";

/** The command line, or exit 2 with one line when `parseArgs` cannot read it. */
function readArgs() {
  try {
    return parseArgs({
      args: Deno.args,
      options: {
        env: { type: "string", multiple: true },
        port: { type: "string", default: "8787" },
        host: { type: "string", default: "127.0.0.1" },
      },
    }).values;
  } catch (e) {
    // node:util's errors (…_UNKNOWN_OPTION, …_INVALID_OPTION_VALUE, …_UNEXPECTED_POSITIONAL) say
    // which argument; `--port -1` is one (a value starting with a dash), `--port` last another.
    if (!String((e as { code?: unknown }).code).startsWith("ERR_PARSE_ARGS_")) throw e;
    console.error(
      `Cannot start the environment server as its command line must be ${USAGE}: ${
        (e as Error).message.replaceAll("\n", " ")
      }`,
    );
    Deno.exit(2);
  }
}

const values = readArgs();
const flags = { "--port": values.port };
const parsed = z.object({ "--port": wholeNumberSetting(0, 65535) }).safeParse(flags);
if (!parsed.success) {
  console.error(settingsErrorMessage("the environment server", parsed.error, flags));
  Deno.exit(2);
}
const port = parsed.data["--port"];
let envs;
try {
  envs = values.env && values.env.length > 0
    ? values.env.flatMap((v) => v.split(",")).map((id) => getEnvironment(id.trim()))
    : listEnvironments();
} catch (e) {
  console.error((e as Error).message);
  Deno.exit(2);
}
const server = await serveEnvironments(envs, { port, hostname: values.host });
for (const env of envs) console.log(`serving ${env.id} at ${server.url}/envs/${env.id}`);
if (envs.length === 1) console.log(`serving ${envs[0].id} at ${server.url}`);
const stop = () => {
  server.close().then(() => Deno.exit(0));
};
Deno.addSignalListener("SIGINT", stop);
Deno.addSignalListener("SIGTERM", stop);

/**
 * `deno task env-server [--env ID]… [--port P] [--host H]`: serves built-in environments over
 * the HTTP environment protocol (workers/envs/http/protocol.ts).
 *
 * Without `--env` every built-in is served (each under `/envs/{id}`); with exactly one it is
 * also served at the root. Default port 8787 on 127.0.0.1. Stops on SIGINT/SIGTERM.
 */
import { parseArgs } from "node:util";
import { serveEnvironments } from "./http/server.ts";
import { getEnvironment, listEnvironments } from "./registry.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    env: { type: "string", multiple: true },
    port: { type: "string", default: "8787" },
    host: { type: "string", default: "127.0.0.1" },
  },
});
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(
    `Cannot start as --port must be an integer in 0..65535: current value is ${values.port}`,
  );
  Deno.exit(2);
}
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

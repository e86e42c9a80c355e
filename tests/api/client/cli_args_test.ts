/**
 * The CLI's job ids checked before anything is sent (api/client/cli_args.ts): no API runs here, and
 * SEED_API_URL names a port nothing listens on (one just closed), so a request would fail as a
 * refused connection.
 */
import assert from "node:assert/strict";
import { isJobIdStart } from "../../../api/client/cli_args.ts";
import { type CliRun, runCli } from "./_run_cli.ts";
import { JobIdPrefix } from "../../../api/schemas.ts";

const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
const nowhere = `http://127.0.0.1:${closed.addr.port}`;
closed.close();

/** Runs the CLI against an API that is not there. */
function run(args: string[]): Promise<CliRun> {
  return runCli(args, { SEED_API_URL: nowhere, SEED_API_KEY: "seed_unused" });
}

/** Ids typed wrong: other letters, too few or too many digits, hyphens out of place. */
const MALFORMED = [
  "xyz",
  "my-job",
  "deadbeeg",
  "abc1234",
  "0123-4567",
  "01234567-89ab-cdef-0123-4567-89ab",
  "0123456789abcdef0123456789abcdef0",
  "01234567-89ab-cdef-0123-4567890abcdef",
  " 01234567",
  "",
];

Deno.test("a malformed job id is a usage error naming it, for every command that takes one, and nothing is sent", async () => {
  for (const command of ["status", "follow", "cancel", "delete", "download", "skills", "metrics"]) {
    for (const id of MALFORMED.filter((id) => id !== "")) {
      const res = await run([command, id]);
      assert.deepEqual(res, {
        code: 2,
        out: "",
        err: `Cannot use job id ${
          JSON.stringify(id)
        } as it must be a job id or its first 8 to 32 hex digits (any case, with the id's hyphens in their places or none; seed list shows whole ids)\n`,
      }, `${command} ${id}`);
    }
  }
});

Deno.test("a job id's start the CLI takes is exactly one the API's id_prefix takes", () => {
  const taken = [
    "01234567",
    "DEADBEEF",
    "01234567-",
    "01234567-89ab",
    "0123456789ab",
    "01234567-89ab-cdef-0123-456789abcdef".slice(0, 35),
    "0123456789abcdef0123456789abcdef",
  ];
  for (const ref of [...taken, ...MALFORMED]) {
    assert.equal(isJobIdStart(ref), JobIdPrefix.safeParse(ref).success, ref);
  }
  for (const ref of taken) assert.ok(isJobIdStart(ref), ref);
  for (const ref of MALFORMED) assert.ok(!isJobIdStart(ref), ref);
});

Deno.test("a well-formed id's start goes to the API (here: a refused connection, not a usage error)", async () => {
  await assert.rejects(() => run(["status", "01234567"]), TypeError);
});

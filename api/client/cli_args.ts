/**
 * The CLI's arguments checked before anything is sent (api/client/cli.ts): numeric flags by their
 * own name (`--limit`, `--step`), and a job id, whole or as its unique start (the 8 characters the
 * dashboard shows for a job without a name), resolved to the whole id through `GET /v1/jobs`. A
 * flag value that breaks its rule, or a job id that is neither, is a {@link UsageError} naming what
 * was typed, before any request.
 */
import type { SeedClient } from "./client.ts";

/** Fewest hex digits a job id's start may have (the server's `id_prefix` takes 8 to 32). */
export const MIN_JOB_ID_DIGITS = 8;

/** Most hex digits a job id's start may have: all 32 of a uuid. */
const MAX_JOB_ID_DIGITS = 32;

/** A whole job id: a uuid as the API writes it, any case. */
const WHOLE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A mistake in how the command was typed (exit status 2, as a missing argument), found before
 * anything is sent.
 */
export class UsageError extends Error {
  override name = "UsageError";
}

/**
 * Whether `ref` is the start of a job id as the API's `id_prefix` takes it (api/schemas.ts
 * `JobIdPrefix`): {@link MIN_JOB_ID_DIGITS} to 32 hex digits in any case, with the id's hyphens
 * (after its 8th, 12th, 16th and 20th digit) in their places or none.
 */
export function isJobIdStart(ref: string): boolean {
  const lower = ref.toLowerCase();
  const hex = lower.replaceAll("-", "");
  if (!/^[0-9a-f]+$/.test(hex)) return false;
  if (hex.length < MIN_JOB_ID_DIGITS || hex.length > MAX_JOB_ID_DIGITS) return false;
  if (lower === hex) return true;
  const asUuid = [8, 12, 16, 20].reduceRight(
    (s, at) => `${s.slice(0, at)}-${s.slice(at)}`,
    hex.padEnd(MAX_JOB_ID_DIGITS, "0"),
  );
  return asUuid.startsWith(lower);
}

/** Matches the API shows of a prefix: at most this many, then "and more". */
const SHOWN_MATCHES = 10;

/**
 * The whole-number value of flag `--flag` (undefined when absent): decimal digits only, from `min`
 * to `max` (`Number()` would read "" as 0 and take `0x10` and `1e3`).
 * @throws UsageError "Cannot `what` as --flag must be a whole number from min to max: current
 *   value is "V"" otherwise.
 */
export function intOption(
  flag: string,
  raw: string | undefined,
  options: { what: string; min: number; max: number },
): number | undefined {
  if (raw === undefined) return undefined;
  const n = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= options.min && n <= options.max)) {
    throw new UsageError(
      `Cannot ${options.what} as --${flag} must be a whole number from ${options.min} to ${options.max}: current value is ${
        JSON.stringify(raw)
      }`,
    );
  }
  return n;
}

/** A job as `GET /v1/jobs` lists it (the fields the resolution reads). */
interface ListedJob {
  id: string;
  name?: string | null;
  status: string;
  created_at: string;
}

/**
 * The whole id of the job `ref` names: a whole id as given (unchanged: the API answers for it); the
 * start of one ({@link isJobIdStart}: at least {@link MIN_JOB_ID_DIGITS} hex digits, any case, with
 * the id's hyphens in their places or none) as the one job of the tenant whose id starts so
 * (`GET /v1/jobs?id_prefix=`).
 * @throws UsageError "Cannot use job id "REF" as it must be a job id or its first 8 to 32 hex
 *   digits …" for anything else (letters past `f`, fewer than 8 digits, a hyphen out of place),
 *   before any request; Error "Cannot find job REF …" for a start no job's id has; "Cannot tell
 *   which job REF is …" listing the matches (id, name, status, created) when several jobs' ids
 *   start so; the client's ApiError when the list fails.
 */
export async function resolveJobId(client: SeedClient, ref: string): Promise<string> {
  if (WHOLE_ID.test(ref)) return ref;
  if (!isJobIdStart(ref)) {
    throw new UsageError(
      `Cannot use job id ${JSON.stringify(ref)} as it must be a job id or its first ` +
        `${MIN_JOB_ID_DIGITS} to ${MAX_JOB_ID_DIGITS} hex digits (any case, with the id's ` +
        `hyphens in their places or none; seed list shows whole ids)`,
    );
  }
  const q = new URLSearchParams({ id_prefix: ref, limit: String(SHOWN_MATCHES) });
  const page = await client.json<{ jobs: ListedJob[]; next_cursor: string | null }>(
    `/v1/jobs?${q}`,
  );
  if (page.jobs.length === 1) return page.jobs[0].id;
  if (page.jobs.length === 0) {
    throw new Error(`Cannot find job ${ref}: no job of this tenant has an id starting with it`);
  }
  const lines = page.jobs.map((j) =>
    `  ${j.id}  ${j.name ?? "-"}  ${j.status}  ${j.created_at.slice(0, 19).replace("T", " ")}`
  );
  const count = page.next_cursor ? `more than ${page.jobs.length}` : String(page.jobs.length);
  throw new Error(
    `Cannot tell which job ${ref} is as ${count} jobs' ids start with it; give more of the id:\n${
      lines.join("\n")
    }${page.next_cursor ? "\n  …" : ""}`,
  );
}

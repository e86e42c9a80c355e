/**
 * The CLI's arguments checked before anything is sent (api/client/cli.ts): numeric flags by their
 * own name (`--limit`, `--step`), and a job id, whole or as its unique start (the 8 characters the
 * dashboard shows for a job without a name), resolved to the whole id through `GET /v1/jobs`.
 */
import type { SeedClient } from "./client.ts";

/** Fewest hex digits a job id's start may have (the server's `id_prefix` takes 8 to 32). */
export const MIN_JOB_ID_DIGITS = 8;

/** A whole job id: a uuid as the API writes it, any case. */
const WHOLE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Matches the API shows of a prefix: at most this many, then "and more". */
const SHOWN_MATCHES = 10;

/**
 * The whole-number value of flag `--flag` (undefined when absent): decimal digits only, from `min`
 * to `max` (`Number()` would read "" as 0 and take `0x10` and `1e3`).
 * @throws Error "Cannot `what` as --flag must be a whole number from min to max: current value is
 *   V" otherwise.
 */
export function intOption(
  flag: string,
  raw: string | undefined,
  options: { what: string; min: number; max: number },
): number | undefined {
  if (raw === undefined) return undefined;
  const n = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= options.min && n <= options.max)) {
    throw new Error(
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
 * start of one (at least {@link MIN_JOB_ID_DIGITS} hex digits, any case, with the id's hyphens in
 * their places or none) as the one job of the tenant whose id starts so (`GET /v1/jobs?id_prefix=`). Anything
 * else is passed on as given (the API answers 404).
 * @throws Error "Cannot find job REF …" for a start of fewer than 8 digits or one no job's id has;
 *   "Cannot tell which job REF is …" listing the matches (id, name, status, created) when several
 *   jobs' ids start so; the client's ApiError when the list fails.
 */
export async function resolveJobId(client: SeedClient, ref: string): Promise<string> {
  if (WHOLE_ID.test(ref) || !/^[0-9a-f][0-9a-f-]*$/i.test(ref)) return ref;
  const digits = ref.replaceAll("-", "").length;
  if (digits < MIN_JOB_ID_DIGITS) {
    throw new Error(
      `Cannot find job ${ref} as a job id's start must have at least ${MIN_JOB_ID_DIGITS} hex digits: it has ${digits} (seed list shows whole ids)`,
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

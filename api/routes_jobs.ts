/**
 * Job routes: `POST /v1/jobs`, `GET /v1/jobs` (a page; or, with `Accept: text/event-stream`, the
 * first page live: snapshot_stream.ts), `GET /v1/jobs/{id}`, `POST /v1/jobs/{id}/cancel`,
 * `DELETE /v1/jobs/{id}` (a final job with its artifacts: jobs/delete.ts).
 */
import type { Context } from "hono";
import { Hono } from "hono";
import { z } from "zod";
import { SSE_HEADERS } from "../jobs/sse_headers.ts";
import type { AuthEnv } from "./auth.ts";
import { type AppOptions, envsOf, type EnvsProvider } from "./deps.ts";
import {
  type Database,
  envSpecIssues,
  type Job,
  JOB_EVENTS_CHANNEL,
  JOB_LABEL_FIELDS,
  type JobLabels,
  JobLabelsInput,
  jobLabelsOf,
  type JobSpec,
  markJobDeleting,
  modelEnvIssues,
  purgeDeletedJob,
  requestCancel,
  reservedMetadataKeyIssues,
  rolloutEngineIssues,
  safeParseJobSpec,
  skillSourceIssues,
  submitJob,
  submittedFields,
  TERMINAL_STATUSES,
} from "../jobs/mod.ts";
import {
  BadRequestError,
  cancelHint,
  ConflictError,
  NotFoundError,
  UnprocessableError,
  validationError,
} from "./errors.ts";
import { getJob, latestEvalResults, listJobs } from "./queries.ts";
import { checkAnnotator, checkSpecRefs, rootModelBase } from "./spec_refs.ts";
import { JobIdParam, ListJobsQuery } from "./schemas.ts";
import { snapshotStream } from "./snapshot_stream.ts";
import { parseIdempotencyKey, parseJsonBody, parseQuery, parseQueryObject } from "./validate.ts";
import { jobView } from "./views.ts";

/**
 * The body of `POST /v1/jobs`: the JobSpec's fields plus the labels `name` (or `suffix`) and
 * `metadata` (jobs/labels.ts), which are stored beside the spec, not in it. `submitted` is the
 * JobSpec's fields as posted, defaults left out (jobs/spec.ts `submittedFields`), stored as the
 * job's `submitted_spec`.
 * @throws BadRequestError (400) with the field paths of every violation of either part.
 */
export function parseSubmitBody(
  raw: unknown,
): { spec: JobSpec; submitted: Record<string, unknown>; labels: JobLabels } {
  const fields: Record<string, unknown> = {};
  let rest: unknown = raw;
  if (raw !== null && typeof raw === "object" && !Array.isArray(raw)) {
    const other: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(raw)) {
      ((JOB_LABEL_FIELDS as readonly string[]).includes(k) ? fields : other)[k] = v;
    }
    rest = other;
  }
  const spec = safeParseJobSpec(rest);
  const labels = JobLabelsInput.safeParse(fields);
  const issues = [
    ...reservedMetadataKeyIssues(fields.metadata),
    ...(labels.error?.issues ?? []),
    ...(spec.error?.issues ?? []),
  ];
  if (issues.length > 0) throw validationError("body", new z.ZodError(issues));
  const stored = jobLabelsOf(labels.data!);
  if ("path" in stored) {
    throw new BadRequestError(stored.message, {
      errors: [{ path: stored.path, code: "custom", message: stored.message }],
    });
  }
  // The spec parsed, so `rest` was an object.
  const submitted = submittedFields(rest as Record<string, unknown>, spec.data!);
  return { spec: spec.data!, submitted, labels: stored };
}

/**
 * `metadata[key]=value` query parameters gathered into `metadata: {key: value}` (the other
 * parameters unchanged), for {@link ListJobsQuery}. A key given twice is refused by
 * `parseQuery` before this runs.
 */
function gatherMetadataQuery(query: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  // No prototype: a `metadata[__proto__]` key is kept as a key (and refused by the schema).
  const metadata: Record<string, string> = Object.create(null);
  for (const [k, v] of Object.entries(query)) {
    const m = /^metadata\[(.*)\]$/s.exec(k);
    if (m) metadata[m[1]] = v;
    else out[k] = v;
  }
  if (Object.keys(metadata).length > 0) out.metadata = metadata;
  return out;
}

/** Job views of `jobs` with their latest evaluation results (one query for all of them). */
async function jobViews(db: Database, jobs: Job[]) {
  const results = await latestEvalResults(db, jobs.map((j) => j.id));
  return jobs.map((j) => jobView(j, results.get(j.id) ?? null));
}

/**
 * The `{id}` path parameter as a uuid. A malformed id names no job, so it is a 404 like an
 * unknown one (never a 400 that would tell ids apart).
 */
export function jobIdOf(c: Context): string {
  const raw = c.req.param("id") ?? "";
  const parsed = JobIdParam.safeParse(raw);
  if (!parsed.success) {
    throw new NotFoundError(`Cannot find job ${raw}: no such job for this tenant`);
  }
  return parsed.data;
}

/**
 * 422 when `env` does not fit the environment list (jobs/env_catalog.ts `envSpecIssues`): an
 * unknown `env.id`, or `env.options` that break the environment's options schema; or when a
 * text-only `model.base` would be shown that environment's images (`modelEnvIssues`; `root`
 * answers the base a `job:` reference was trained from, see spec_refs.ts `rootModelBase`); or when
 * `seed.skill_source` is `reference` on an environment without a reference analyzer
 * (`skillSourceIssues`); or when `rollout.engine` endpoints would be sent that environment's
 * images (`rolloutEngineIssues`).
 */
async function checkEnv(
  envs: EnvsProvider,
  spec: JobSpec,
  root: () => Promise<string>,
): Promise<void> {
  const { env } = spec;
  const entries = await envs();
  const errors = envSpecIssues(entries, env);
  if (errors.length === 0) {
    const oracle = skillSourceIssues(entries, spec);
    if (oracle.length > 0) {
      throw new UnprocessableError(
        `Cannot queue the job as seed.skill_source "reference" needs an environment with a reference analyzer: ${
          oracle[0].message
        }`,
        { errors: oracle },
      );
    }
    const remote = rolloutEngineIssues(entries, spec);
    if (remote.length > 0) {
      throw new UnprocessableError(
        `Cannot queue the job as rollout.engine must get text observations: ${remote[0].message}`,
        { errors: remote },
      );
    }
    const base = await root();
    const label = base === spec.model.base ? base : `${spec.model.base} (trained from ${base})`;
    const model = modelEnvIssues(entries, { base, env, label });
    if (model.length === 0) return;
    throw new UnprocessableError(
      `Cannot queue the job as model.base must have an image encoder for ${env.id} with these options: ${
        model[0].message
      }`,
      { errors: model },
    );
  }
  const detail = errors[0].path === "env.id"
    ? `Cannot queue the job as env.id must name a known environment (${
      entries.map((e) => e.id).join(", ")
    }): current value is ${JSON.stringify(env.id)}`
    : `Cannot queue the job as env.options must fit the ${env.id} options schema: ${
      errors[0].path
    }: ${errors[0].message}`;
  throw new UnprocessableError(detail, { errors });
}

/**
 * Sets `env.max_turns`, when the spec leaves it out, to the listed environment's
 * `default_max_turns`, so the stored spec (and `GET /v1/jobs/{id}`) says what the job runs with.
 * An environment the list gives no default for (a deployment's own `envs` provider may omit it)
 * is left to the worker, which asks the environment (jobs/spec.ts `maxTurnsOf`).
 */
async function fillMaxTurns(envs: EnvsProvider, spec: JobSpec): Promise<void> {
  if (spec.env.max_turns !== undefined) return;
  const entry = (await envs()).find((e) => e.id === spec.env.id);
  if (entry?.default_max_turns !== undefined) spec.env.max_turns = entry.default_max_turns;
}

/** Mounts the job routes (relative to `/v1/jobs`). */
export function jobRoutes(options: AppOptions): Hono<AuthEnv> {
  const { db } = options;
  const envs = envsOf(options);
  const app = new Hono<AuthEnv>();

  app.post("/", async (c) => {
    const tenant = c.get("tenant");
    const idempotencyKey = parseIdempotencyKey(c);
    const { spec, submitted, labels } = parseSubmitBody(await parseJsonBody(c, z.unknown()));
    await checkEnv(
      envs,
      spec,
      () => rootModelBase(db, { tenantId: tenant.id, base: spec.model.base }),
    );
    await checkSpecRefs(db, spec, { tenantId: tenant.id, serviceBucket: options.store.bucket });
    await checkAnnotator(db, spec, { tenantId: tenant.id });
    await options.checkSpec?.(spec, { tenantId: tenant.id });
    await fillMaxTurns(envs, spec);
    const { job, created } = await submitJob(db, {
      tenantId: tenant.id,
      spec,
      submittedSpec: submitted,
      labels,
      idempotencyKey,
      // checkSpecRefs saw the base job or model; a delete may have taken it since (422, as if
      // gone then).
      requireBase: true,
    });
    c.header("location", `/v1/jobs/${job.id}`);
    return c.json((await jobViews(db, [job]))[0], created ? 201 : 200);
  });

  app.post("/:id/cancel", async (c) => {
    const jobId = jobIdOf(c);
    const outcome = await requestCancel(db, { tenantId: c.get("tenant").id, jobId });
    if (!outcome) throw new NotFoundError(`Cannot find job ${jobId}: no such job for this tenant`);
    const { job, moved } = outcome;
    // A job that had ended before this request is left as it is; one already `cancelling`
    // answers 202 as it is, since it ends `cancelled` anyway.
    if (!moved && TERMINAL_STATUSES.includes(job.status)) {
      throw new ConflictError(
        `Cannot cancel job ${jobId} as it must be queued or running: it has already ended as ${job.status}; nothing changed`,
      );
    }
    return c.json((await jobViews(db, [job]))[0], 202);
  });

  app.delete("/:id", async (c) => {
    const jobId = jobIdOf(c);
    const tenantId = c.get("tenant").id;
    const marked = await markJobDeleting(db, { tenantId, jobId });
    if (!marked) throw new NotFoundError(`Cannot find job ${jobId}: no such job for this tenant`);
    if ("reason" in marked) {
      throw new ConflictError(
        marked.reason === "not_final"
          ? `Cannot delete job ${jobId} as it must be final (succeeded, failed or cancelled): it is ${marked.status}; ${
            marked.status === "cancelling" ? "retry once it is cancelled" : cancelHint(jobId)
          }`
          : `Cannot delete job ${jobId} as no queued, running or cancelling job may train from it: job ${
            marked.usedBy[0]
          } uses it as model.base (directly or through a job: continuation); wait for it to end, or ${
            cancelHint(marked.usedBy[0])
          }`,
      );
    }
    // A failure from here on leaves the job marked (gone for every read); a repeated DELETE,
    // or the sweeper, finishes it (jobs/delete.ts).
    await purgeDeletedJob(db, options.store, marked);
    return c.body(null, 204);
  });

  app.get("/", async (c) => {
    parseQuery(c, z.record(z.string(), z.string()));
    const gathered = gatherMetadataQuery(c.req.query());
    const reserved = reservedMetadataKeyIssues(gathered.metadata);
    if (reserved.length > 0) throw validationError("query", new z.ZodError(reserved));
    const q = parseQueryObject(gathered, ListJobsQuery);
    const tenantId = c.get("tenant").id;
    const read = async () => {
      const page = await listJobs(db, tenantId, {
        statuses: q.status,
        name: q.name,
        namePrefix: q.name_prefix,
        idPrefix: q.id_prefix,
        metadata: q.metadata,
        limit: q.limit,
        cursor: q.cursor,
      });
      return { jobs: await jobViews(db, page.jobs), next_cursor: page.nextCursor };
    };
    if (!(c.req.header("accept") ?? "").includes("text/event-stream")) return c.json(await read());
    const body = snapshotStream({
      read: async () => JSON.stringify(await read()),
      subscribe: async (wake) => {
        // Every submit, status change and event of any job sends NOTIFY job_events.
        const stop = await db.listen(JOB_EVENTS_CHANNEL, () => wake());
        return () => void stop().catch(() => {});
      },
    }, {
      event: "jobs",
      pollMs: options.sse?.pollMs,
      keepaliveMs: options.sse?.keepaliveMs,
      log: options.log,
    });
    return new Response(body, {
      headers: SSE_HEADERS,
    });
  });

  app.get("/:id", async (c) => {
    const job = await getJob(db, c.get("tenant").id, jobIdOf(c));
    return c.json((await jobViews(db, [job]))[0]);
  });

  return app;
}

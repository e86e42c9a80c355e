/**
 * Artifact routes: checkpoints (list, one tar archive, single files by presigned URL) and skill
 * libraries (one step's, and the list of steps that have one). Object keys come only from the
 * job's rows, so a tenant can reach only its own objects; file names in paths are matched against
 * the row, never joined into keys.
 */
import { Hono } from "hono";
import type { AuthEnv } from "./auth.ts";
import type { AppOptions } from "./deps.ts";
import { NotFoundError, ProblemError } from "./errors.ts";
import {
  getCheckpoint,
  getSkillLibrary,
  type JobStatus,
  listCheckpoints,
  listSkillLibraries,
  TERMINAL_STATUSES,
} from "../jobs/mod.ts";
import { getJob } from "./queries.ts";
import { jobIdOf } from "./routes_jobs.ts";
import { FileQuery, SkillsQuery } from "./schemas.ts";
import { tarStream } from "./tar.ts";
import { parseQuery, stepParamOf } from "./validate.ts";
import { checkpointView, skillsView } from "./views.ts";

/** Most steps a 404 for a missing checkpoint or skill library names (those nearest the step). */
const SHOWN_STEPS = 20;

/**
 * The checkpoint of `job` at `step`.
 * @throws NotFoundError naming the steps that have a checkpoint ("… at step 7: its checkpoints
 *   are at steps 4, 8", up to {@link SHOWN_STEPS} nearest the step; "its only checkpoint is at
 *   step 4"; or "it has no checkpoints yet"), so a caller who guessed a step learns which to ask
 *   for.
 */
async function checkpointAt(
  options: AppOptions,
  job: { id: string; status: JobStatus },
  step: number,
) {
  const ckpt = await getCheckpoint(options.db, job.id, step);
  if (ckpt) return ckpt;
  const steps = (await listCheckpoints(options.db, job.id)).map((c) => c.step);
  const has = stepsHeld({ one: "checkpoint", many: "checkpoints" }, steps, step, job.status);
  throw new NotFoundError(`Cannot find a checkpoint of job ${job.id} at step ${step}: ${has}`);
}

/**
 * The end of a 404 for a step without a checkpoint or skill library (`what`, singular and plural):
 * `its checkpoints are at steps 4, 8` ({@link nearestSteps} of `step`; the latest ones when `step`
 * is undefined), `its only checkpoint is at step 4`, or for a job without any `it has no
 * checkpoints`, with ` yet` while the job is not final and may still save one.
 */
function stepsHeld(
  what: { one: string; many: string },
  steps: number[],
  step: number | undefined,
  status: JobStatus,
): string {
  if (steps.length === 1) return `its only ${what.one} is at step ${steps[0]}`;
  if (steps.length > 1) {
    return `its ${what.many} are at steps ${nearestSteps(steps, step ?? Infinity)}`;
  }
  return `it has no ${what.many}${TERMINAL_STATUSES.includes(status) ? "" : " yet"}`;
}

/**
 * `steps` (ascending) as `4, 8`, or, past {@link SHOWN_STEPS}, the ones nearest `step` with `…`
 * where some were left out and the count: `…, 90, 100, …, 190 (of 50)`.
 */
function nearestSteps(steps: number[], step: number): string {
  if (steps.length <= SHOWN_STEPS) return steps.join(", ");
  const at = steps.findIndex((s) => s > step);
  const middle = at === -1 ? steps.length : at;
  const start = Math.max(0, Math.min(middle - SHOWN_STEPS / 2, steps.length - SHOWN_STEPS));
  const shown = steps.slice(start, start + SHOWN_STEPS).map(String);
  if (start > 0) shown.unshift("…");
  if (start + SHOWN_STEPS < steps.length) shown.push("…");
  return `${shown.join(", ")} (of ${steps.length})`;
}

/** Mounts the checkpoint and skills routes on a `/v1/jobs` base. */
export function artifactRoutes(options: AppOptions): Hono<AuthEnv> {
  const { db, store } = options;
  const app = new Hono<AuthEnv>();

  app.get("/:id/checkpoints", async (c) => {
    const job = await getJob(db, c.get("tenant").id, jobIdOf(c));
    return c.json({ checkpoints: (await listCheckpoints(db, job.id)).map(checkpointView) });
  });

  app.get("/:id/checkpoints/:step", async (c) => {
    const job = await getJob(db, c.get("tenant").id, jobIdOf(c));
    const step = stepParamOf(c.req.param("step"));
    return c.json(checkpointView(await checkpointAt(options, job, step)));
  });

  app.get("/:id/checkpoints/:step/archive", async (c) => {
    const job = await getJob(db, c.get("tenant").id, jobIdOf(c));
    const step = stepParamOf(c.req.param("step"));
    const ckpt = await checkpointAt(options, job, step);
    const folder = `step-${step}`;
    // The store is checked before the first byte: the first file is opened here, so a store
    // that is down answers 503 + Retry-After (app.ts) instead of a 200 cut short. A failure
    // after this point can only cut the connection (the tar's end is missing: README, "Downloads").
    const first = ckpt.files.length ? await store.getStream(ckpt.files[0].key) : undefined;
    const body = tarStream(
      ckpt.files.map((f, i) => ({
        name: `${folder}/${f.name}`,
        bytes: f.bytes,
        sha256: f.sha256,
        open: () => i === 0 && first ? Promise.resolve(first) : store.getStream(f.key),
      })),
      { mtime: ckpt.createdAt },
    );
    return new Response(body, {
      headers: {
        "content-type": "application/x-tar",
        "content-disposition": `attachment; filename="job-${job.id}-${folder}.tar"`,
      },
    });
  });

  app.get("/:id/checkpoints/:step/files/:name{.+}", async (c) => {
    const job = await getJob(db, c.get("tenant").id, jobIdOf(c));
    const step = stepParamOf(c.req.param("step"));
    const q = parseQuery(c, FileQuery);
    const ckpt = await checkpointAt(options, job, step);
    const name = c.req.param("name");
    const file = ckpt.files.find((f) => f.name === name);
    if (!file) {
      throw new NotFoundError(
        `Cannot find file ${name} in checkpoint step ${step} of job ${job.id}: it has ${
          ckpt.files.map((f) => f.name).join(", ")
        }`,
      );
    }
    const url = await store.presignGet(file.key, { expiresInS: q.expires_in, filename: file.name });
    const expiresAt = new Date(Date.now() + q.expires_in * 1000).toISOString();
    c.header("cache-control", "no-store");
    if (q.redirect === "false") return c.json({ url, expires_at: expiresAt });
    return c.redirect(url, 302);
  });

  app.get("/:id/skills/steps", async (c) => {
    const job = await getJob(db, c.get("tenant").id, jobIdOf(c));
    const rows = await listSkillLibraries(db, job.id);
    return c.json({
      steps: rows.map((r) => ({
        step: r.step,
        attempt: r.attempt,
        skill_count: r.skillCount,
        created_at: r.createdAt.toISOString(),
      })),
    });
  });

  app.get("/:id/skills", async (c) => {
    const job = await getJob(db, c.get("tenant").id, jobIdOf(c));
    const q = parseQuery(c, SkillsQuery);
    const row = await getSkillLibrary(db, job.id, q.step);
    if (!row) {
      // As for checkpoints: the steps that have a library, so a guessed ?step= learns which to ask.
      const steps = (await listSkillLibraries(db, job.id)).map((r) => r.step);
      const at = q.step === undefined ? "" : ` at step ${q.step}`;
      const has = stepsHeld(
        { one: "skill library", many: "skill libraries" },
        steps,
        q.step,
        job.status,
      );
      throw new NotFoundError(`Cannot find a skill library of job ${job.id}${at}: ${has}`);
    }
    const bytes = await store.get(row.key, { sha256: row.sha256 });
    let library: unknown;
    try {
      library = JSON.parse(new TextDecoder().decode(bytes));
    } catch (error) {
      throw new ProblemError(
        502,
        "integrity",
        "Bad Gateway",
        `Cannot return the skill library of step ${row.step} as it must be JSON: ${error}`,
        { cause: error },
      );
    }
    return c.json(skillsView(row, library));
  });

  return app;
}

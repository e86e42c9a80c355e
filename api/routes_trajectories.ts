/**
 * Trajectory routes (workers/seed/README.md, "Trajectories and evaluations"): the rollouts and
 * evaluation episodes a job dumped at each step (jobs/trajectories.ts), with links to their
 * observation images. As in routes_artifacts.ts, object keys come only from the job's committed
 * rows (never from the request), so a tenant reaches only its own objects, and every object read is
 * checked against the SHA-256 in its row (a mismatch is a 502).
 */
import { Hono } from "hono";
import { z } from "zod";
import {
  getTrajectoryDumps,
  listTrajectoryDumpSummaries,
  readTrajectoryDump,
  readTrajectoryImage,
  type TrajectoryDump,
  type TrajectoryDumpSummary,
} from "../jobs/mod.ts";
import type { AuthEnv } from "./auth.ts";
import type { AppOptions } from "./deps.ts";
import { NotFoundError, ProblemError } from "./errors.ts";
import { getJob } from "./queries.ts";
import { jobIdOf } from "./routes_jobs.ts";
import { TrajectoriesQuery } from "./schemas.ts";
import { parseQuery, stepParamOf } from "./validate.ts";

/** The stored dump JSON, as far as the API reads it (workers/seed/run/trajectory_dump.ts). */
const StoredDump = z.object({
  total_trajectories: z.number().int().min(0),
  splits: z.array(z.record(z.string(), z.unknown())).optional(),
  trajectories: z.array(
    z.object({
      split: z.string(),
      steps: z.array(z.object({ image: z.string().nullable() }).catchall(z.unknown())),
    }).catchall(z.unknown()),
  ),
}).catchall(z.unknown());
type StoredDump = z.infer<typeof StoredDump>;

async function readDump(options: AppOptions, dump: TrajectoryDump): Promise<StoredDump> {
  let parsed;
  try {
    parsed = StoredDump.safeParse(await readTrajectoryDump(options.store, dump));
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    parsed = { success: false as const, error };
  }
  if (!parsed.success) {
    throw new ProblemError(
      502,
      "integrity",
      "Bad Gateway",
      `Cannot return the ${dump.kind} trajectories of step ${dump.step} as the stored dump must be a trajectory dump: ${parsed.error.message}`,
      { cause: parsed.error },
    );
  }
  return parsed.data;
}

function dumpView(d: TrajectoryDumpSummary | undefined) {
  if (!d) return null;
  return {
    attempt: d.attempt,
    trajectories: d.trajectoryCount,
    images: d.imageCount,
    bytes: d.bytes,
    sha256: d.sha256,
    created_at: d.createdAt.toISOString(),
  };
}

/** Mounts the trajectory routes on a `/v1/jobs` base. */
export function trajectoryRoutes(options: AppOptions): Hono<AuthEnv> {
  const { db, store } = options;
  const app = new Hono<AuthEnv>();

  app.get("/:id/trajectories", async (c) => {
    const job = await getJob(db, c.get("tenant").id, jobIdOf(c));
    const q = parseQuery(c, TrajectoriesQuery);
    if (q.step === undefined) {
      const bySteps = new Map<number, TrajectoryDumpSummary[]>();
      for (const d of await listTrajectoryDumpSummaries(db, job.id)) {
        bySteps.set(d.step, [...(bySteps.get(d.step) ?? []), d]);
      }
      return c.json({
        steps: [...bySteps].map(([step, dumps]) => ({
          step,
          rollout: dumpView(dumps.find((d) => d.kind === "rollout")),
          eval: dumpView(dumps.find((d) => d.kind === "eval")),
        })),
      });
    }
    const step = q.step;
    const dumps = await getTrajectoryDumps(db, job.id, step);
    if (dumps.length === 0) {
      throw new NotFoundError(`Cannot find trajectories of job ${job.id} at step ${step}`);
    }
    const base = `/v1/jobs/${job.id}/trajectories/${step}/images/`;
    const totals: { rollout: number | null; eval: number | null } = { rollout: null, eval: null };
    let evalSplits: StoredDump["splits"] | null = null;
    const trajectories = [];
    for (const dump of dumps) {
      const stored = await readDump(options, dump);
      totals[dump.kind] = stored.total_trajectories;
      if (dump.kind === "eval") evalSplits = stored.splits ?? [];
      const images = new Map(dump.images.map((i) => [i.name, i]));
      for (const t of stored.trajectories) {
        if (q.split !== undefined && t.split !== q.split) continue;
        trajectories.push({
          source: dump.kind,
          ...t,
          steps: t.steps.map((s) => {
            const image = s.image === null ? undefined : images.get(s.image);
            return {
              ...s,
              image: image
                ? {
                  name: image.name,
                  url: base + encodeURIComponent(image.name),
                  width: image.width,
                  height: image.height,
                  bytes: image.bytes,
                  sha256: image.sha256,
                }
                : null,
            };
          }),
        });
      }
    }
    return c.json({ step, split: q.split ?? null, totals, eval: evalSplits, trajectories });
  });

  app.get("/:id/trajectories/:step/images/:name", async (c) => {
    const job = await getJob(db, c.get("tenant").id, jobIdOf(c));
    const step = stepParamOf(c.req.param("step"));
    const name = c.req.param("name");
    const dumps = await getTrajectoryDumps(db, job.id, step);
    const dump = dumps.find((d) => d.images.some((i) => i.name === name));
    if (!dump) {
      throw new NotFoundError(
        `Cannot find image ${name} among the trajectories of job ${job.id} at step ${step}`,
      );
    }
    const image = dump.images.find((i) => i.name === name)!;
    const bytes = await readTrajectoryImage(store, dump, name);
    return new Response(new Uint8Array(bytes), {
      headers: {
        "content-type": "image/png",
        "content-length": String(bytes.byteLength),
        etag: `"${image.sha256}"`,
        "cache-control": "private, no-cache",
      },
    });
  });

  return app;
}

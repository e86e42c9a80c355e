/**
 * Unauthenticated operational routes: `/healthz` (the process answers), `/readyz` (database and
 * store reachable), `/metrics` (Prometheus text, counts over all tenants, no tenant data; behind
 * the operator key `SEED_METRICS_TOKEN`, 404 without one) and
 * `/openapi.json`; plus the authenticated `GET /v1/envs`.
 */
import { timingSafeEqual } from "node:crypto";
import { HeadBucketCommand } from "@aws-sdk/client-s3";
import { Hono } from "hono";
import { JOB_STATUSES, sweeperMetricsText } from "../jobs/mod.ts";
import type { AuthEnv } from "./auth.ts";
import { type AppOptions, envsOf } from "./deps.ts";
import { NotFoundError, UnauthorizedError, UnavailableError } from "./errors.ts";
import { openApiDocument } from "./openapi.ts";
import { jobCountsByStatus, queueStats } from "./queries.ts";

/** Renders Prometheus text exposition format 0.0.4 for the queue gauges. */
export function prometheusText(
  counts: Map<string, number>,
  stats: { oldestQueuedS: number; activeWorkers: number; meanQueueWaitS: number },
): string {
  const lines = [
    "# HELP seed_jobs Jobs by state.",
    "# TYPE seed_jobs gauge",
    ...JOB_STATUSES.map((s) => `seed_jobs{state="${s}"} ${counts.get(s) ?? 0}`),
    "# HELP seed_queue_oldest_wait_seconds Age of the oldest queued job.",
    "# TYPE seed_queue_oldest_wait_seconds gauge",
    `seed_queue_oldest_wait_seconds ${stats.oldestQueuedS}`,
    "# HELP seed_queue_wait_seconds_mean Mean queued-to-started wait of jobs started in the last hour.",
    "# TYPE seed_queue_wait_seconds_mean gauge",
    `seed_queue_wait_seconds_mean ${stats.meanQueueWaitS}`,
    "# HELP seed_active_workers Workers holding a live lease.",
    "# TYPE seed_active_workers gauge",
    `seed_active_workers ${stats.activeWorkers}`,
  ];
  return lines.join("\n") + "\n";
}

/**
 * `/metrics` shows every tenant's job counts, so only an operator reads it: 404 when no operator
 * key is configured, 401 unless the request carries it as a bearer token (compared in constant
 * time).
 */
function checkMetricsToken(token: string | undefined, authorization: string | undefined): void {
  if (!token) throw new NotFoundError("Cannot find /metrics as no operator key is configured");
  const given = new TextEncoder().encode(authorization?.match(/^Bearer (.+)$/i)?.[1] ?? "");
  const wanted = new TextEncoder().encode(token);
  if (given.byteLength !== wanted.byteLength || !timingSafeEqual(given, wanted)) {
    throw new UnauthorizedError(
      "Cannot serve /metrics as the request must carry the operator key (SEED_METRICS_TOKEN) as a bearer token",
    );
  }
}

/** Routes at the root: healthz, readyz, metrics, openapi.json. */
export function systemRoutes(options: AppOptions): Hono {
  const { db, store } = options;
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    try {
      await db.query("select 1");
    } catch (error) {
      throw new UnavailableError(`Cannot serve as the database must be reachable: ${error}`, {
        cause: error,
      });
    }
    try {
      await store.send(new HeadBucketCommand({ Bucket: store.bucket }));
    } catch (error) {
      throw new UnavailableError(`Cannot serve as the object store must be reachable: ${error}`, {
        cause: error,
      });
    }
    return c.json({ status: "ready" });
  });
  app.get("/metrics", async (c) => {
    checkMetricsToken(options.metricsToken, c.req.header("authorization"));
    const [counts, stats] = await Promise.all([jobCountsByStatus(db), queueStats(db)]);
    const sweeper = options.sweeperTotals ? sweeperMetricsText(options.sweeperTotals) : "";
    return c.body(prometheusText(counts, stats) + sweeper, 200, {
      "content-type": "text/plain; version=0.0.4; charset=utf-8",
    });
  });
  let doc: unknown;
  app.get("/openapi.json", (c) => c.json(doc ??= openApiDocument()));
  return app;
}

/** `GET /v1/envs` from the provider passed to createApp (default: the built-in catalog). */
export function envRoutes(options: AppOptions): Hono<AuthEnv> {
  const envs = envsOf(options);
  const app = new Hono<AuthEnv>();
  app.get("/", async (c) => c.json({ envs: await envs() }));
  return app;
}

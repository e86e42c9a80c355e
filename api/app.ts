/**
 * The HTTP API (README.md, "HTTP API (v1)") as a Hono app, without a server: tests call
 * `app.request()`, `api/main.ts` serves it with `Deno.serve`.
 *
 * One `onError` maps every thrown error to `application/problem+json` (handlers never catch).
 * The web dashboard is served at `/` (dashboard/routes.ts). `/v1/*` routes require a bearer API
 * key; request bodies are limited to `maxBodyBytes` (413).
 */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { IdempotencyConflictError, IntegrityError } from "../jobs/mod.ts";
import { type AuthEnv, bearerAuth } from "./auth.ts";
import type { AppOptions } from "./deps.ts";
import {
  ConflictError,
  NotFoundError,
  PayloadTooLargeError,
  ProblemError,
  problemFromError,
  problemResponse,
} from "./errors.ts";
import { dashboardRoutes } from "./dashboard/routes.ts";
import { artifactRoutes } from "./routes_artifacts.ts";
import { eventRoutes } from "./routes_events.ts";
import { jobRoutes } from "./routes_jobs.ts";
import { modelRoutes } from "./routes_models.ts";
import { envRoutes, systemRoutes } from "./routes_system.ts";
import { trajectoryRoutes } from "./routes_trajectories.ts";

/** Default request body limit: 1 MiB (a JobSpec is a few KiB). */
export const DEFAULT_MAX_BODY_BYTES = 1 << 20;

/** Maps the job domain's errors (jobs/errors.ts) to problems. */
function mapDomainError(error: unknown): ProblemError | undefined {
  if (error instanceof IdempotencyConflictError) {
    return new ConflictError(error.message, { cause: error });
  }
  if (error instanceof IntegrityError) {
    return new ProblemError(502, "integrity", "Bad Gateway", error.message, { cause: error });
  }
  return undefined;
}

/** Builds the app. See {@link AppOptions} for the dependencies and hooks. */
export function createApp(options: AppOptions): Hono {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const log = options.log ??
    ((record: Record<string, unknown>) => console.error(JSON.stringify(record)));
  const app = new Hono();

  app.onError((error, c) => {
    const problem = problemFromError(
      error,
      (e) => options.mapError?.(e) ?? mapDomainError(e),
    );
    if (problem.status >= 500) {
      log({
        level: "error",
        msg: "request failed",
        method: c.req.method,
        path: c.req.path,
        status: problem.status,
        error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        stack: error instanceof Error ? error.stack : undefined,
      });
    }
    return problemResponse({ ...problem, instance: c.req.path });
  });
  app.notFound((c) =>
    problemResponse({
      ...problemFromError(
        new NotFoundError(`Cannot find ${c.req.method} ${c.req.path}: no such route`),
      ),
      instance: c.req.path,
    })
  );

  const limit = bodyLimit({
    maxSize: maxBodyBytes,
    onError: (c) =>
      problemResponse({
        ...problemFromError(new PayloadTooLargeError(maxBodyBytes)),
        instance: c.req.path,
      }),
  });
  // Model uploads stream gigabytes; api/model_upload.ts enforces their own limits.
  app.use(
    "*",
    (c, next) => c.req.method === "POST" && c.req.path === "/v1/models" ? next() : limit(c, next),
  );

  app.route("/", systemRoutes(options));
  app.route("/", dashboardRoutes());
  const v1 = new Hono<AuthEnv>();
  v1.use("*", bearerAuth(options.db, { cacheMs: options.authCacheMs }));
  v1.route("/jobs", jobRoutes(options));
  v1.route("/jobs", eventRoutes(options));
  v1.route("/jobs", artifactRoutes(options));
  v1.route("/jobs", trajectoryRoutes(options));
  v1.route("/envs", envRoutes(options));
  v1.route("/models", modelRoutes(options));
  app.route("/v1", v1);
  return app;
}

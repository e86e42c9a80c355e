/**
 * The HTTP API (api/README.md, "HTTP API (v1)") as a Hono app, without a server: tests call
 * `app.request()`, `api/main.ts` serves it with `Deno.serve`.
 *
 * One `onError` maps every thrown error to `application/problem+json` (handlers never catch).
 * The web dashboard is served at `/` (dashboard/routes.ts). `/v1/*` routes require a bearer API
 * key; request bodies are limited to `maxBodyBytes` (413); the request target to
 * {@link MAX_TARGET_CHARS} (414) and the headers to {@link MAX_HEADER_BYTES} in {@link MAX_HEADERS}
 * fields (431) — below the HTTP layer's own limits, so these requests get a problem+json answer
 * too; a known path asked with another method is a 405 with `Allow`. A path with one trailing slash
 * is answered as the path without it.
 */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import {
  BaseChainTooLongError,
  BaseGoneError,
  createLogger,
  IdempotencyConflictError,
  IntegrityError,
  isTransient,
} from "../jobs/mod.ts";
import { type AuthEnv, bearerAuth } from "./auth.ts";
import type { AppOptions } from "./deps.ts";
import {
  ConflictError,
  HeadersTooLargeError,
  MethodNotAllowedError,
  NotFoundError,
  PayloadTooLargeError,
  ProblemError,
  problemFromError,
  problemResponse,
  RETRY_AFTER_S,
  UnavailableError,
  UnprocessableError,
  UriTooLongError,
} from "./errors.ts";
import { dashboardRoutes } from "./dashboard/routes.ts";
import { artifactRoutes } from "./routes_artifacts.ts";
import { eventRoutes } from "./routes_events.ts";
import { jobRoutes } from "./routes_jobs.ts";
import { modelRoutes } from "./routes_models.ts";
import { secretRoutes } from "./routes_secrets.ts";
import { envRoutes, systemRoutes } from "./routes_system.ts";
import { trajectoryRoutes } from "./routes_trajectories.ts";

/** Default request body limit: 1 MiB (a JobSpec is a few KiB). */
export const DEFAULT_MAX_BODY_BYTES = 1 << 20;
/** Longest request target (path and query), in characters. */
export const MAX_TARGET_CHARS = 8_192;
/** Largest header block (names, values and `: ` + CRLF per field), in bytes. */
export const MAX_HEADER_BYTES = 32_768;
/**
 * Most header fields. Deno's HTTP layer closes a request with 100 or more fields (or a header
 * block over ~64–100 KiB) with an empty 400 before the app sees it: those alone get no problem
 * body.
 */
export const MAX_HEADERS = 64;

/**
 * Methods each known route pattern serves, as regular expressions over the path with its one
 * trailing slash already removed (the app is not strict).
 */
function routeTable(app: Hono): { pattern: RegExp; methods: Set<string> }[] {
  const byPath = new Map<string, Set<string>>();
  for (const r of app.routes) {
    if (r.method === "ALL") continue; // middleware
    const methods = byPath.get(r.path) ?? new Set<string>();
    methods.add(r.method);
    if (r.method === "GET") methods.add("HEAD");
    byPath.set(r.path, methods);
  }
  return [...byPath].map(([path, methods]) => ({
    pattern: new RegExp(
      "^" +
        path.replace(/\/+$/, "").split("/").map((part) =>
          part.startsWith(":")
            ? part.endsWith("{.+}") ? ".+" : "[^/]+"
            : part === "*"
            ? ".*"
            : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
        ).join("/") + "$",
    ),
    methods,
  }));
}

/** Maps the job domain's errors (jobs/errors.ts) to problems. */
function mapDomainError(error: unknown): ProblemError | undefined {
  if (error instanceof IdempotencyConflictError) {
    return new ConflictError(error.message, { cause: error });
  }
  if (error instanceof BaseGoneError || error instanceof BaseChainTooLongError) {
    return new UnprocessableError(error.message, {
      cause: error,
      errors: [{
        path: error instanceof BaseChainTooLongError ? error.path : "model.base",
        code: error.code,
        message: error.message,
      }],
    });
  }
  if (error instanceof IntegrityError) {
    return new ProblemError(502, "integrity", "Bad Gateway", error.message, { cause: error });
  }
  if (isTransient(error)) {
    return new UnavailableError(
      "Cannot serve the request as the database and object store must be reachable: one is not; retry after the Retry-After seconds",
      { cause: error },
    );
  }
  return undefined;
}

/** Headers a problem carries besides its body: `Allow` (405), `Retry-After` (503). */
function headersOf(error: unknown, status: number): HeadersInit {
  if (error instanceof MethodNotAllowedError) return { allow: error.allow.join(", ") };
  if (status === 503) return { "retry-after": String(RETRY_AFTER_S) };
  return {};
}

/** Builds the app. See {@link AppOptions} for the dependencies and hooks. */
export function createApp(options: AppOptions): Hono {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const log = options.log ?? createLogger({ service: "api" });
  // The routes' event streams log their internal errors to the same log.
  const deps: AppOptions = { ...options, log };
  // Not strict: a path with one trailing slash (`/v1/jobs/`, `/v1/jobs/{id}/`) is answered as
  // the path without it, as most REST clients expect; the 405 check below matched it already, so
  // a strict router answered a 405 whose Allow listed the method used.
  const app = new Hono({ strict: false });

  app.onError((error, c) => {
    const problem = problemFromError(
      error,
      (e) => options.mapError?.(e) ?? mapDomainError(e),
    );
    if (problem.status >= 500) {
      log[problem.status === 503 ? "warn" : "error"]("request failed", {
        method: c.req.method,
        path: c.req.path,
        status: problem.status,
        error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        stack: error instanceof Error ? error.stack : undefined,
      });
    }
    return problemResponse({ ...problem, instance: c.req.path }, headersOf(error, problem.status));
  });
  let routes: ReturnType<typeof routeTable> | undefined;
  app.notFound((c) => {
    routes ??= routeTable(app);
    const allow = new Set<string>();
    for (const r of routes) if (r.pattern.test(c.req.path)) r.methods.forEach((m) => allow.add(m));
    const error = allow.size > 0
      ? new MethodNotAllowedError(c.req.method, c.req.path, [...allow].sort())
      : new NotFoundError(
        `Cannot find ${c.req.method} ${new URL(c.req.url).pathname}: no such route`,
      );
    const problem = problemFromError(error);
    return problemResponse({ ...problem, instance: c.req.path }, headersOf(error, problem.status));
  });

  // Size limits of the request line and headers, before anything reads them.
  app.use("*", async (c, next) => {
    const target = c.req.url.length - new URL(c.req.url).origin.length;
    if (target > MAX_TARGET_CHARS) throw new UriTooLongError(MAX_TARGET_CHARS, target);
    let count = 0;
    let bytes = 0;
    c.req.raw.headers.forEach((value, name) => {
      count++;
      bytes += name.length + value.length + 4;
    });
    if (count > MAX_HEADERS) {
      throw new HeadersTooLargeError(
        `Cannot accept the request as it must have at most ${MAX_HEADERS} header fields: current count is ${count}`,
      );
    }
    if (bytes > MAX_HEADER_BYTES) {
      throw new HeadersTooLargeError(
        `Cannot accept the request as its headers must be at most ${MAX_HEADER_BYTES} bytes: current size is ${bytes}`,
      );
    }
    await next();
  });

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

  app.route("/", systemRoutes(deps));
  app.route("/", dashboardRoutes());
  const v1 = new Hono<AuthEnv>();
  v1.use("*", bearerAuth(options.db, { cacheMs: options.authCacheMs }));
  v1.route("/jobs", jobRoutes(deps));
  v1.route("/jobs", eventRoutes(deps));
  v1.route("/jobs", artifactRoutes(deps));
  v1.route("/jobs", trajectoryRoutes(deps));
  v1.route("/envs", envRoutes(deps));
  v1.route("/models", modelRoutes(deps));
  v1.route("/secrets", secretRoutes(deps));
  app.route("/v1", v1);
  return app;
}

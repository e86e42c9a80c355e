/**
 * The HTTP API server (api/README.md, "HTTP API (v1)"): a stateless Hono app over `jobs/`, run as
 * `deno task api` (`main.ts`), any number of copies behind a load balancer.
 *
 * - `app.ts` builds the app (`createApp(options)`, `deps.ts` says what it needs): body limit,
 *   bearer keys (`auth.ts` over jobs/api_keys.ts), the routes, and one `onError` that maps every
 *   thrown error to problem+json (`errors.ts`).
 * - Routes: `routes_jobs.ts` (submit, list, get, cancel; `spec_refs.ts` checks a spec's `job:` and
 *   `s3://` references belong to the tenant), `routes_events.ts` (events as JSON pages or SSE via
 *   `sse.ts`; metrics as JSON or CSV via `csv.ts`), `routes_artifacts.ts` (checkpoints: one tar
 *   archive streamed by `tar.ts` with every hash checked, presigned files; skill libraries),
 *   `routes_trajectories.ts`, `routes_system.ts` (`/healthz`, `/readyz`, `/metrics`, `/v1/envs`,
 *   `/openapi.json` from `openapi.ts`).
 * - Input: zod schemas of queries and bodies (`schemas.ts`, `cursor.ts`, `json_limits.ts`) applied
 *   by `validate.ts`; answers shaped by `views.ts`; reads in `queries.ts`.
 *
 * The server files at this folder's top level import `jobs/` and each other, never `workers/`
 * and never the folders beside them that use the server: `client/` (HTTP client, CLI), `demo/`
 * (`deno task demo`) and `tools/` (key admin, docs generator). Adding a route: api/README.md,
 * "Adding a route".
 */
export { createApp, DEFAULT_MAX_BODY_BYTES } from "./app.ts";
export type { AppOptions, ArtifactReader, EnvsProvider, SpecCheck } from "./deps.ts";
export { type RunningApi, serveApi } from "./main.ts";

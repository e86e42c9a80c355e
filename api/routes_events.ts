/**
 * `GET /v1/jobs/{id}/events` (JSON pages or live SSE) and `GET /v1/jobs/{id}/metrics` (JSON or
 * CSV). Both check the job belongs to the tenant first (404 otherwise).
 */
import { Hono } from "hono";
import { SSE_HEADERS } from "../jobs/sse_headers.ts";
import type { AuthEnv } from "./auth.ts";
import { toCsv } from "./csv.ts";
import type { AppOptions } from "./deps.ts";
import { eventsAfter, getJob, isJobTerminal, metricsSeries } from "./queries.ts";
import { EventsQuery, MetricsQuery } from "./schemas.ts";
import { parseEventId, sseStream } from "./sse.ts";
import { jobIdOf } from "./routes_jobs.ts";
import { parseQuery } from "./validate.ts";
import { eventView, metricsView } from "./views.ts";
import { JOB_EVENTS_CHANNEL, TERMINAL_STATUSES } from "../jobs/mod.ts";

/** Mounts the events and metrics routes on a `/v1/jobs/:id` base. */
export function eventRoutes(options: AppOptions): Hono<AuthEnv> {
  const { db } = options;
  const app = new Hono<AuthEnv>();

  app.get("/:id/events", async (c) => {
    const tenant = c.get("tenant");
    const job = await getJob(db, tenant.id, jobIdOf(c));
    const wantsStream = (c.req.header("accept") ?? "").includes("text/event-stream");
    if (!wantsStream) {
      const q = parseQuery(c, EventsQuery);
      const rows = await eventsAfter(db, job.id, q.after ?? 0, q.limit);
      const last = rows[rows.length - 1];
      return c.json({
        events: rows.map(eventView),
        next_after: last ? last.id : (q.after ?? null),
        terminal: TERMINAL_STATUSES.includes(job.status),
      });
    }
    const q = parseQuery(c, EventsQuery.partial());
    const after = parseEventId(c.req.header("last-event-id")) ?? q.after ?? 0;
    const body = sseStream(
      {
        page: async (afterId, limit) =>
          (await eventsAfter(db, job.id, afterId, limit)).map(eventView),
        isTerminal: () => isJobTerminal(db, tenant.id, job.id),
        subscribe: async (wake) => {
          // jobs/ sends NOTIFY job_events with the job id on every event and status change.
          const stop = await db.listen(JOB_EVENTS_CHANNEL, (payload) => {
            if (payload === job.id) wake();
          });
          return () => void stop().catch(() => {});
        },
      },
      after,
      { ...options.sse, log: options.log },
    );
    return new Response(body, {
      headers: SSE_HEADERS,
    });
  });

  app.get("/:id/metrics", async (c) => {
    const tenant = c.get("tenant");
    const job = await getJob(db, tenant.id, jobIdOf(c));
    const q = parseQuery(c, MetricsQuery);
    const rows = await metricsSeries(db, job.id, { fromStep: q.from_step, toStep: q.to_step });
    const view = metricsView(rows);
    const csv = q.format === "csv" ||
      (q.format === undefined && (c.req.header("accept") ?? "").includes("text/csv"));
    if (!csv) return c.json(view);
    const header = ["step", "attempt", "created_at", ...view.names];
    const table = view.points.map((p) => [
      p.step,
      p.attempt,
      p.created_at,
      ...view.names.map((n) => p.values[n]),
    ]);
    return c.body(toCsv(header, table), 200, {
      "content-type": "text/csv; charset=utf-8",
      "content-disposition": `attachment; filename="job-${job.id}-metrics.csv"`,
    });
  });

  return app;
}

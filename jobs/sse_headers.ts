/**
 * Response headers of every Server-Sent Events stream the service sends: the job API's event and
 * job-list streams (api/routes_events.ts, api/routes_jobs.ts) and the inference server's streamed
 * completions (workers/serve/respond.ts). No proxy may cache or transform the stream, and nginx
 * may not buffer it (`X-Accel-Buffering: no`), so each message reaches the client as it is sent.
 */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no",
};

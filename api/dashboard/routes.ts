/**
 * The web dashboard (`GET /`): one HTML page, its scripts and styles, and the charting library
 * uPlot (npm `uplot`, read from its installed package at first request: no build step, no CDN),
 * all served by the API process itself, so the page and the API share one origin.
 *
 * The page signs in with an API key kept in `sessionStorage` and calls the same `/v1` routes as
 * any client (bearer header; live views read the SSE routes with `fetch`). Every response here
 * carries a Content-Security-Policy that allows scripts and styles only from this origin (no
 * inline script, no `eval`), images from this origin and `blob:` (trajectory images fetched with
 * the key), and no framing. The files are an allowlist: request paths never reach the file
 * system, and the page holds no secret.
 */
import { createRequire } from "node:module";
import { Hono } from "hono";
import { DEMO_PRESETS } from "../../jobs/presets.ts";
import { NotFoundError } from "../errors.ts";

/** The Content-Security-Policy of every dashboard response. */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  json: "application/json; charset=utf-8",
  svg: "image/svg+xml",
};

/** The editor's presets: the smallest valid spec, then the demo's (jobs/presets.ts). */
function presetsJson(): Uint8Array {
  const presets = { minimal: { env: { id: "sokoban" } }, ...DEMO_PRESETS };
  return new TextEncoder().encode(JSON.stringify(presets));
}

/** Served name → file (the page's own files, then uPlot's from its npm package). */
function assetFiles(): Map<string, () => string> {
  const local = (name: string) => () => new URL(`./static/${name}`, import.meta.url).pathname;
  const vendor = (path: string) => () => createRequire(import.meta.url).resolve(path);
  const files = new Map<string, () => string>([
    ["vendor/uPlot.iife.min.js", vendor("uplot/dist/uPlot.iife.min.js")],
    ["vendor/uPlot.min.css", vendor("uplot/dist/uPlot.min.css")],
  ]);
  for (
    const name of [
      "index.html",
      "favicon.svg",
      "style.css",
      "main.js",
      "api.js",
      "dom.js",
      "format.js",
      "stage_progress.js",
      "eta.js",
      "signin.js",
      "jobs.js",
      "submit.js",
      "job.js",
      "charts.js",
      "compare.js",
      "skills.js",
      "trajectories.js",
    ]
  ) files.set(name, local(name));
  return files;
}

/** Mounts `/` and `/dashboard/{file}`. */
export function dashboardRoutes(): Hono {
  const files = assetFiles();
  const cache = new Map<string, Uint8Array>([["presets.json", presetsJson()]]);
  const serve = async (name: string) => {
    const path = files.get(name);
    if (!path && !cache.has(name)) {
      throw new NotFoundError(`Cannot find dashboard file ${name}: no such file`);
    }
    let bytes = cache.get(name);
    if (!bytes) {
      bytes = await Deno.readFile(path!());
      cache.set(name, bytes);
    }
    const ext = name.slice(name.lastIndexOf(".") + 1);
    return new Response(new Uint8Array(bytes), {
      headers: {
        "content-type": TYPES[ext],
        "content-security-policy": DASHBOARD_CSP,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "x-frame-options": "DENY",
        "cache-control": "no-cache",
      },
    });
  };
  const app = new Hono();
  app.get("/", () => serve("index.html"));
  app.get("/dashboard/vendor/:file", (c) => serve(`vendor/${c.req.param("file")}`));
  app.get("/dashboard/:file", (c) => serve(c.req.param("file")));
  return app;
}

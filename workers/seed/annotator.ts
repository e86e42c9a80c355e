/**
 * The LLM annotator of the analyzer warm-up (workers/seed/README.md, "LLM annotator"; the paper
 * fine-tunes its analyzer on trajectories annotated by a stronger model): each trajectory's
 * analyzer prompt (`buildAnalyzerPrompt`, the one θ_old answers during RL) is sent as the user
 * message to an OpenAI-compatible chat-completions endpoint (JobSpec `warmup.analyzer.annotator`)
 * through the `openai` client, and the answer is parsed leniently (`parseSkillAnalysis`). Answers
 * that do not parse are dropped and counted; the parse rate is parsed / answered.
 *
 * Safety: the API key (a tenant secret) is sent only as the bearer token of requests to the
 * checked URL and is scrubbed from every error message; every request URL passes the annotator
 * URL rules (jobs/outbound_url.ts), and a host name is resolved first and refused when it points
 * at an internal address the operator did not list; redirects are not followed; the client never
 * reads `OPENAI_*` variables of the worker (its key, organization or project would leak).
 */
import OpenAI from "openai";
import type { JobSpec } from "../../jobs/mod.ts";
import {
  ANNOTATOR_HOSTS_VARIABLE,
  checkAnnotatorUrl,
  hostListFromEnv,
  isInternalHost,
  OutboundUrlError,
} from "../../jobs/mod.ts";
import type { SkillAnalysis, Trajectory } from "../envs/types.ts";
import {
  type AnalyzerPromptOptions,
  buildAnalyzerPrompt,
  parseSkillAnalysis,
} from "../skills/mod.ts";

/** The JobSpec's `warmup.analyzer.annotator` (defaults filled in). */
export type AnnotatorSpec = NonNullable<JobSpec["warmup"]["analyzer"]["annotator"]>;

/** Thrown when the annotator cannot label the warm-up data (message never holds the API key). */
export class AnnotatorError extends Error {
  override name = "AnnotatorError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** Options of {@link annotateTrajectories}. */
export interface AnnotateOptions {
  spec: AnnotatorSpec;
  /** The API key (the decrypted `credential_secret`). */
  apiKey: string;
  prompt?: AnalyzerPromptOptions;
  signal?: AbortSignal;
  /** Internal hosts allowed (default `SEED_ANNOTATOR_ALLOWED_HOSTS`). */
  allowedHosts?: readonly string[];
  /** Resolves a host name to its addresses (default `Deno.resolveDns`, A and AAAA). */
  resolve?: (host: string) => Promise<string[]>;
}

/** Counts of one annotation pass. */
export interface AnnotationReport {
  /** Trajectories sent. */
  requests: number;
  /** Requests answered (2xx with a completion). */
  answered: number;
  /** Answers whose skill parsed (the labels kept). */
  parsed: number;
  /** Requests that failed after retries (connection errors, timeouts, 4xx/5xx). */
  failed: number;
  /** parsed / answered (0 when nothing was answered). */
  parseRate: number;
}

/** What {@link annotateTrajectories} returns: a label per trajectory (null: none) and counts. */
export interface Annotation {
  labels: (SkillAnalysis | null)[];
  /** The raw answers (null where the request failed), in trajectory order. */
  raw: (string | null)[];
  report: AnnotationReport;
}

async function resolveDns(host: string): Promise<string[]> {
  const out: string[] = [];
  for (const type of ["A", "AAAA"] as const) {
    try {
      out.push(...await Deno.resolveDns(host, type));
    } catch {
      // no such record: the connection fails later, or uses the other family
    }
  }
  return out;
}

/** A host as WHATWG URL parsing writes it (IPv6 compressed, in brackets). */
function urlHost(address: string): string {
  return new URL(`http://${address.includes(":") ? `[${address}]` : address}/`).hostname;
}

/**
 * Checks one request URL: the annotator URL rules, then, for a host name the operator did not
 * list, that none of its resolved addresses is internal (a public name can point at 127.0.0.1).
 * The connection resolves the name again: a server that changes its answers in between (DNS
 * rebinding) is not caught.
 * @throws OutboundUrlError when it is refused.
 */
async function checkRequestUrl(
  raw: string,
  allowed: readonly string[],
  resolve: (host: string) => Promise<string[]>,
): Promise<void> {
  const url = checkAnnotatorUrl(raw, { allowedHosts: allowed });
  const host = url.hostname.toLowerCase();
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  if (allowed.includes(host) || allowed.includes(`${host}:${port}`)) return;
  if (/^[\d.]+$/.test(host) || host.startsWith("[")) return; // a literal: checked above
  const internal = (await resolve(host)).map(urlHost).find((a) => isInternalHost(a));
  if (internal) {
    throw new OutboundUrlError(
      "warmup.analyzer.annotator.base_url",
      raw,
      `its host must resolve to public addresses unless listed in ${ANNOTATOR_HOSTS_VARIABLE}: it resolves to ${internal}`,
    );
  }
}

/** The `fetch` the client uses: {@link checkRequestUrl} on every request, no redirects. */
function guardedFetch(
  allowed: readonly string[],
  resolve: (host: string) => Promise<string[]>,
): typeof fetch {
  return async (input, init) => {
    await checkRequestUrl(input instanceof Request ? input.url : String(input), allowed, resolve);
    return await fetch(input, { ...init, redirect: "manual" });
  };
}

/**
 * `message` with every occurrence of `secret` replaced (servers may echo a bad key back), also in
 * the forms an echo takes inside JSON (escaped quotes and backslashes, once or twice) and in a
 * URL (percent-encoded).
 */
export function scrub(message: string, secret: string): string {
  if (secret === "") return message;
  const once = JSON.stringify(secret).slice(1, -1);
  const twice = JSON.stringify(once).slice(1, -1);
  const forms = [...new Set([secret, once, twice, encodeURIComponent(secret)])]
    .sort((a, b) => b.length - a.length); // longest first: a form may contain another
  let out = message;
  for (const form of forms) out = out.split(form).join("[secret]");
  return out;
}

/**
 * The error that should stop the whole annotation, or undefined: a refused URL (thrown by
 * {@link guardedFetch}; the client wraps it as the cause of a connection error), or a 401, 403 or
 * 404 (bad key, no access, unknown model), which every other request would meet alike.
 */
function fatalOf(e: unknown): unknown {
  const cause = (e as { cause?: unknown })?.cause;
  if (e instanceof OutboundUrlError) return e;
  if (cause instanceof OutboundUrlError) return cause;
  if (e instanceof OpenAI.APIError && [401, 403, 404].includes(e.status ?? 0)) return e;
  return undefined;
}

/** An error's message, with its cause's (the client's "Connection error." hides the reason). */
function messageOf(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause instanceof Error && e.cause.message !== e.message
    ? ` (${e.cause.message})`
    : "";
  return e.message + cause;
}

/** The user message of {@link probeAnnotator}'s one request. */
export const ANNOTATOR_PROBE_PROMPT = "Reply with the word OK.";

/** The client of {@link annotateTrajectories} and {@link probeAnnotator}, after the URL check. */
async function annotatorClient(opts: Omit<AnnotateOptions, "prompt" | "signal">) {
  const { spec, apiKey } = opts;
  const allowed = (opts.allowedHosts ?? hostListFromEnv(ANNOTATOR_HOSTS_VARIABLE) ?? [])
    .map((h) => h.toLowerCase());
  const resolve = opts.resolve ?? resolveDns;
  await checkRequestUrl(spec.base_url, allowed, resolve);
  return new OpenAI({
    apiKey,
    baseURL: spec.base_url,
    organization: null,
    project: null,
    adminAPIKey: null,
    webhookSecret: null,
    timeout: spec.timeout_s * 1000,
    maxRetries: spec.max_retries,
    fetch: guardedFetch(allowed, resolve),
    logLevel: "off",
  });
}

/**
 * Checks, before any training, that the annotator answers: the URL rules (as for every request),
 * then one chat completion of {@link ANNOTATOR_PROBE_PROMPT} (at most 16 tokens) to `spec.model`
 * with the key, under the spec's timeout and retries. A job calls it when it starts, so a wrong
 * URL, key or model fails the job before the policy warm-up instead of after it.
 * @throws AnnotatorError naming the model and URL with the reason (a refused URL, a connection
 *   error, an HTTP status), the key scrubbed.
 */
export async function probeAnnotator(opts: Omit<AnnotateOptions, "prompt">): Promise<void> {
  const { spec, apiKey } = opts;
  try {
    const client = await annotatorClient(opts);
    await client.chat.completions.create({
      model: spec.model,
      messages: [{ role: "user", content: ANNOTATOR_PROBE_PROMPT }],
      max_tokens: 16,
      temperature: 0,
    }, { signal: opts.signal });
  } catch (e) {
    opts.signal?.throwIfAborted();
    throw new AnnotatorError(
      scrub(
        `Cannot use warmup.analyzer.annotator as ${spec.model} at ${spec.base_url} must answer a chat completion before the warm-up starts: ${
          messageOf(e)
        }`,
        apiKey,
      ),
      { cause: e },
    );
  }
}

/**
 * Labels `trajectories` with the annotator: at most `spec.concurrency` requests in flight, each
 * with `spec.timeout_s` and `spec.max_retries` (the client's exponential backoff on connection
 * errors, 408, 409, 429 and 5xx).
 * @throws AnnotatorError when the URL is refused, a request is refused for good (401, 403, 404),
 *   or every request failed; OutboundUrlError is its cause for a refused URL.
 */
export async function annotateTrajectories(
  trajectories: readonly Trajectory[],
  opts: AnnotateOptions,
): Promise<Annotation> {
  const { spec, apiKey } = opts;
  const fail = (e: unknown) =>
    new AnnotatorError(
      scrub(
        `Cannot label the analyzer warm-up data with ${spec.model} at ${spec.base_url}: ${
          messageOf(e)
        }`,
        apiKey,
      ),
    );
  let client: OpenAI;
  try {
    client = await annotatorClient(opts);
  } catch (e) {
    throw fail(e);
  }
  const n = trajectories.length;
  const labels: (SkillAnalysis | null)[] = new Array(n).fill(null);
  const raw: (string | null)[] = new Array(n).fill(null);
  const report: AnnotationReport = { requests: n, answered: 0, parsed: 0, failed: 0, parseRate: 0 };
  let firstError: unknown;
  let fatal: unknown;
  let next = 0;
  const worker = async () => {
    while (next < n && fatal === undefined) {
      const i = next++;
      opts.signal?.throwIfAborted();
      try {
        const completion = await client.chat.completions.create({
          model: spec.model,
          messages: [{ role: "user", content: buildAnalyzerPrompt(trajectories[i], opts.prompt) }],
          max_tokens: spec.max_tokens,
          temperature: spec.temperature,
        }, { signal: opts.signal });
        const text = completion.choices?.[0]?.message?.content ?? "";
        raw[i] = text;
        report.answered++;
        labels[i] = parseSkillAnalysis(text);
        if (labels[i]) report.parsed++;
      } catch (e) {
        opts.signal?.throwIfAborted();
        report.failed++;
        firstError ??= e;
        fatal ??= fatalOf(e);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(spec.concurrency, n) }, worker));
  if (fatal !== undefined) throw fail(fatal);
  if (n > 0 && report.answered === 0) throw fail(firstError);
  report.parseRate = report.answered === 0 ? 0 : report.parsed / report.answered;
  return { labels, raw, report };
}

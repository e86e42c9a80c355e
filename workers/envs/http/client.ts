/**
 * The HTTP environment client: an {@link AsyncEnvironment} backed by a server speaking
 * protocol.ts, with timeouts, retries and a host allowlist.
 *
 * Safety (a user may name the URL in a job):
 * - Only hosts in `SEED_ENV_ALLOWED_HOSTS` are contacted: comma-separated `host` (any port) or
 *   `host:port` entries (IPv6 in brackets, `[::1]:8080`); default loopback only
 *   (`localhost`, `127.0.0.1`, `[::1]`). Names are compared as written, not resolved.
 * - URLs in `deniedUrls` (the service's own database, object store, API) are always refused,
 *   even when their host is allowed: same host and same port (the scheme's default port when
 *   none is written: http 80, https 443, postgres 5432; a denied URL of another scheme without a
 *   port denies the whole host). `DATABASE_URL` and `S3_ENDPOINT` from the process environment
 *   are added to the list when set, else the embedded database and store of `SEED_DATA_DIR`
 *   (see {@link serviceUrlsFromEnv}). Every loopback name denies every other one.
 * - Only `http:`/`https:` URLs without credentials; redirects are not followed.
 *
 * Retries: connection errors, timeouts and 5xx answers are retried `retries` times with
 * exponential backoff (`backoffMs · 2^attempt`); 4xx answers never are. Steps and expert acts
 * carry `seq`, so a retried step is answered from the server's cache instead of acting twice;
 * creates (episodes, experts, skilled demonstrations) carry a fresh `request_id` that their
 * retries repeat, so a retry whose first answer was lost gets the same episode or expert instead
 * of leaving one behind on the server.
 */
import { z } from "zod";
import type {
  AsyncEnvironment,
  AsyncEpisode,
  AsyncExpert,
  Observation,
  PromptInput,
  SkillAnalysis,
  SkillJudgement,
  Split,
  StepResult,
  Task,
  Trajectory,
} from "../types.ts";
import { EnvOptionsError } from "../errors.ts";
import {
  ActResponseSchema,
  AnalysisResponseSchema,
  EpisodeCreatedSchema,
  ExpertCreatedSchema,
  InfoSchema,
  observationFromWire,
  ObservationResponseSchema,
  observationToWire,
  ParseResponseSchema,
  PromptResponseSchema,
  SkilledDemonstrationCreatedSchema,
  SkillJudgementResponseSchema,
  TasksResponseSchema,
  VocabularyResponseSchema,
  WireStepResultSchema,
} from "./protocol.ts";
import {
  checkOutboundUrl,
  hostListFromEnv,
  OutboundUrlError,
  serviceUrlsFromEnv,
} from "../../../jobs/outbound_url.ts";

export { serviceUrlsFromEnv };

/** Hosts contacted when `SEED_ENV_ALLOWED_HOSTS` is not set. */
export const DEFAULT_ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]"];

/** Client settings. */
export interface HttpEnvOptions {
  /** Per-request timeout (ms). Default 10 000. */
  timeoutMs?: number;
  /** Extra attempts after a connection error, timeout or 5xx. Default 3. */
  retries?: number;
  /** First backoff (ms), doubled each retry. Default 200. */
  backoffMs?: number;
  /** Allowed `host` / `host:port` entries; default `SEED_ENV_ALLOWED_HOSTS` or loopback. */
  allowedHosts?: readonly string[];
  /** URLs never contacted (the service's database, store, API), on top of the env's. */
  deniedUrls?: readonly string[];
  /** fetch implementation (default the global one). */
  fetch?: typeof fetch;
}

/** Thrown when an environment URL is refused by the allowlist or deny list. */
export class EnvUrlNotAllowedError extends Error {
  readonly url: string;
  /** @param url the refused URL; @param message the whole message (outbound_url.ts writes it). */
  constructor(url: string, message: string) {
    super(message);
    this.name = "EnvUrlNotAllowedError";
    this.url = url;
  }
}

/** Thrown when the server answers an error (`status`, problem `detail`), or cannot be reached. */
export class EnvHttpError extends Error {
  /** HTTP status; 0 when no answer came (connection error, timeout). */
  readonly status: number;
  readonly problem?: Record<string, unknown>;
  /** @param status HTTP status or 0; @param message what failed. */
  constructor(
    status: number,
    message: string,
    problem?: Record<string, unknown>,
    cause?: unknown,
  ) {
    super(message, { cause });
    this.name = "EnvHttpError";
    this.status = status;
    this.problem = problem;
  }
}

/** The allowed host entries from `SEED_ENV_ALLOWED_HOSTS` (or loopback). */
export function allowedHostsFromEnv(): string[] {
  return hostListFromEnv("SEED_ENV_ALLOWED_HOSTS") ?? [...DEFAULT_ALLOWED_HOSTS];
}

/**
 * Checks `rawUrl` against the scheme rule, the allowlist and the deny list (the rules shared
 * with other outbound URLs are in jobs/outbound_url.ts).
 * @returns the parsed URL.
 * @throws EnvUrlNotAllowedError when it is refused.
 */
export function checkEnvUrl(
  rawUrl: string,
  opts: { allowedHosts?: readonly string[]; deniedUrls?: readonly string[] } = {},
): URL {
  try {
    return checkOutboundUrl(rawUrl, {
      field: "environment URL",
      allowedHosts: opts.allowedHosts ?? allowedHostsFromEnv(),
      mode: "allowlist",
      variable: "SEED_ENV_ALLOWED_HOSTS",
      deniedUrls: opts.deniedUrls,
    });
  } catch (e) {
    if (e instanceof OutboundUrlError) throw new EnvUrlNotAllowedError(rawUrl, e.message);
    throw e;
  }
}

/** Low-level JSON calls with timeout, retry and the URL check. */
class Transport {
  readonly base: string;
  readonly #opts: Required<Omit<HttpEnvOptions, "allowedHosts" | "deniedUrls">>;
  readonly #check: { allowedHosts?: readonly string[]; deniedUrls?: readonly string[] };

  constructor(baseUrl: string, opts: HttpEnvOptions) {
    this.#check = { allowedHosts: opts.allowedHosts, deniedUrls: opts.deniedUrls };
    this.base = checkEnvUrl(baseUrl, this.#check).href.replace(/\/+$/, "");
    this.#opts = {
      timeoutMs: opts.timeoutMs ?? 10_000,
      retries: opts.retries ?? 3,
      backoffMs: opts.backoffMs ?? 200,
      fetch: opts.fetch ?? fetch,
    };
  }

  async call<T extends z.ZodType>(
    method: "GET" | "POST" | "DELETE",
    path: string,
    body: unknown,
    schema: T | null,
  ): Promise<z.infer<T>> {
    const url = this.base + path;
    checkEnvUrl(url, this.#check);
    let lastError: EnvHttpError | undefined;
    for (let attempt = 0; attempt <= this.#opts.retries; attempt++) {
      if (attempt > 0) {
        await new Promise((r) => setTimeout(r, this.#opts.backoffMs * 2 ** (attempt - 1)));
      }
      let res: Response;
      try {
        res = await this.#opts.fetch(url, {
          method,
          headers: body === undefined ? {} : { "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
          redirect: "manual",
          signal: AbortSignal.timeout(this.#opts.timeoutMs),
        });
      } catch (cause) {
        lastError = new EnvHttpError(
          0,
          `Cannot reach ${method} ${url}: ${String(cause)}`,
          undefined,
          cause,
        );
        continue;
      }
      const text = await res.text();
      if (res.status >= 500) {
        lastError = new EnvHttpError(
          res.status,
          `Cannot ${method} ${url} as the server failed: ${text.slice(0, 500)}`,
        );
        continue;
      }
      if (res.status >= 300) {
        let problem: Record<string, unknown> | undefined;
        try {
          problem = JSON.parse(text);
        } catch {
          problem = undefined;
        }
        throw new EnvHttpError(
          res.status,
          `Cannot ${method} ${url} as the request must be accepted: status ${res.status}, ` +
            `${String(problem?.detail ?? text.slice(0, 500))}`,
          problem,
        );
      }
      if (schema === null) return undefined as z.infer<T>;
      const parsed = schema.safeParse(JSON.parse(text));
      if (!parsed.success) {
        throw new EnvHttpError(
          res.status,
          `Cannot read answer of ${method} ${url} as it must match the protocol: ${
            z.prettifyError(parsed.error)
          }`,
        );
      }
      return parsed.data;
    }
    throw lastError!;
  }
}

function stepFromWire(w: z.infer<typeof WireStepResultSchema>): StepResult {
  return { ...w, observation: observationFromWire(w.observation) };
}

/**
 * Connects to the environment at `baseUrl` (reads `GET /v1/info`) and returns it as an
 * {@link AsyncEnvironment}. A 400 from `POST /v1/tasks` about options becomes `EnvOptionsError`.
 * @throws EnvUrlNotAllowedError when the URL is refused; EnvHttpError when the server fails.
 */
export async function connectHttpEnvironment(
  baseUrl: string,
  options: HttpEnvOptions = {},
): Promise<AsyncEnvironment> {
  const t = new Transport(baseUrl, options);
  const info = await t.call("GET", "/v1/info", undefined, InfoSchema);
  return {
    id: info.id,
    description: info.description,
    optionsJsonSchema: info.options_schema,
    defaultMaxTurns: info.default_max_turns,
    families: info.families,
    async sampleTasks(split: Split, count: number, seed: number, opts?: Record<string, unknown>) {
      try {
        const body = { split, count, seed, options: opts };
        return (await t.call("POST", "/v1/tasks", body, TasksResponseSchema)).tasks;
      } catch (e) {
        const errors = e instanceof EnvHttpError && e.status === 400
          ? e.problem?.errors
          : undefined;
        if (Array.isArray(errors) && errors.some((x) => String(x?.path).startsWith("options"))) {
          const issues = errors.map((x) => ({
            path: String(x.path).split(".").slice(1),
            message: String(x.message),
          }));
          throw new EnvOptionsError(info.id, issues, e);
        }
        throw e;
      }
    },
    createEpisode(task: Task): AsyncEpisode {
      let id: string | null = null;
      let seq = 0;
      return {
        task,
        async reset(): Promise<Observation> {
          seq = 0;
          if (id !== null) {
            const r = await t.call(
              "POST",
              `/v1/episodes/${id}/reset`,
              {},
              ObservationResponseSchema,
            );
            return observationFromWire(r.observation);
          }
          const created = await t.call(
            "POST",
            "/v1/episodes",
            { task, request_id: crypto.randomUUID() },
            EpisodeCreatedSchema,
          );
          id = created.episode_id;
          return observationFromWire(created.observation);
        },
        async step(actionText: string): Promise<StepResult> {
          if (id === null) {
            throw new EnvHttpError(
              0,
              `Cannot step episode of ${task.id} as reset() must be called first`,
            );
          }
          const body = { action: actionText, seq };
          const r = await t.call("POST", `/v1/episodes/${id}/step`, body, WireStepResultSchema);
          seq++;
          return stepFromWire(r);
        },
        async close(): Promise<void> {
          if (id === null) return;
          const old = id;
          id = null;
          await t.call("DELETE", `/v1/episodes/${old}`, undefined, null);
        },
      };
    },
    async buildPrompt(input: PromptInput): Promise<string> {
      const wire = { ...input, observation: observationToWire(input.observation) };
      return (await t.call("POST", "/v1/prompt", { input: wire }, PromptResponseSchema)).prompt;
    },
    async parseAction(response: string): Promise<string | null> {
      return (await t.call("POST", "/v1/parse", { response }, ParseResponseSchema)).action;
    },
    createExpert(task: Task): AsyncExpert {
      return remoteExpert(
        t,
        () =>
          t.call(
            "POST",
            "/v1/experts",
            { task, request_id: crypto.randomUUID() },
            ExpertCreatedSchema,
          )
            .then((r) => r.expert_id),
      );
    },
    async referenceAnalysis(trajectory: Trajectory): Promise<SkillAnalysis> {
      return await t.call("POST", "/v1/analysis", { trajectory }, AnalysisResponseSchema);
    },
    async vocabulary(): Promise<string[]> {
      return (await t.call("GET", "/v1/vocabulary", undefined, VocabularyResponseSchema)).words;
    },
    ...(info.skill_judge
      ? {
        async judgeSkill(trajectory: Trajectory, skill: string): Promise<SkillJudgement> {
          const body = { trajectory, skill };
          const r = await t.call("POST", "/v1/skill-judgement", body, SkillJudgementResponseSchema);
          // A server older than `matches_reference` judged truthful as the reference match.
          const matchesReference = r.matches_reference ?? r.truthful;
          return { wellFormed: r.well_formed, truthful: r.truthful, matchesReference };
        },
      }
      : {}),
    ...(info.skilled_demonstration
      ? {
        async skilledDemonstration(task: Task): Promise<{ skill: string; expert: AsyncExpert }> {
          const open = () =>
            t.call(
              "POST",
              "/v1/skilled-demonstrations",
              { task, request_id: crypto.randomUUID() },
              SkilledDemonstrationCreatedSchema,
            );
          const created = await open();
          const expert = remoteExpert(
            t,
            () => open().then((r) => r.expert_id),
            Promise.resolve(created.expert_id),
          );
          return { skill: created.skill, expert };
        },
      }
      : {}),
  };
}

/**
 * An expert living on the server (`/v1/experts/{id}`): `act` sends the observation with `seq`,
 * `close` deletes it. `opened` is the id of one already created; otherwise (and again after
 * `close`) the first `act` calls `open` to create one.
 */
function remoteExpert(
  t: Transport,
  open: () => Promise<string>,
  opened: Promise<string> | null = null,
): AsyncExpert {
  let id = opened;
  let seq = 0;
  return {
    async act(observation: Observation): Promise<string> {
      id ??= open();
      const body = { observation: observationToWire(observation), seq };
      const r = await t.call("POST", `/v1/experts/${await id}/act`, body, ActResponseSchema);
      seq++;
      return r.action;
    },
    async close(): Promise<void> {
      if (id === null) return;
      const old = await id;
      id = null;
      seq = 0;
      await t.call("DELETE", `/v1/experts/${old}`, undefined, null);
    },
  };
}

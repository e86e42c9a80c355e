/**
 * The HTTP environment server: serves any sync {@link Environment} over the protocol of
 * protocol.ts (Hono app; `serveEnvironments` binds it to a port).
 *
 * Live episodes and experts are kept in memory, keyed by random ids; those idle for longer than
 * `idleMs` are dropped, and at most `maxLive` of each exist (a further create answers 429). A
 * create that repeats the `request_id` of a live one is answered as the first was, creating
 * nothing (a client's retry after the first answer was lost); with another task it is a 409. The
 * `request_id` of an item deleted or idled out stays used for `idleMs` more (at most `maxLive` such
 * ids per store, oldest forgotten first): a late duplicate of its create is a 410 naming
 * `request_id`, not a new item nobody would drive or delete.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import {
  EnvOptionsError,
  InvalidTaskError,
  ObservationParseError,
  TaskSamplingError,
} from "../errors.ts";
import type { Environment, Episode, Expert, StepResult } from "../types.ts";
import { SPLITS } from "../types.ts";
import {
  ActRequestSchema,
  AnalysisRequestSchema,
  MAX_BODY_BYTES,
  observationFromWire,
  observationToWire,
  ParseRequestSchema,
  PromptRequestSchema,
  PROTOCOL_VERSION,
  SkillJudgementRequestSchema,
  StepRequestSchema,
  TaskRequestSchema,
  TasksRequestSchema,
} from "./protocol.ts";

/** Limits of the server's in-memory state. */
export interface EnvServerOptions {
  /** Drop an episode or expert unused for this long (ms). Default 15 minutes. */
  idleMs?: number;
  /** Most live episodes (and, separately, experts) per environment. Default 10 000. */
  maxLive?: number;
}

/** An error answered as `application/problem+json` with `status`. */
export class EnvServerError extends Error {
  readonly status: 400 | 404 | 409 | 410 | 413 | 429;
  readonly errors?: { path: string; message: string }[];

  /** @param status HTTP status; @param message the problem's detail. */
  constructor(
    status: 400 | 404 | 409 | 410 | 413 | 429,
    message: string,
    errors?: { path: string; message: string }[],
  ) {
    super(message);
    this.name = "EnvServerError";
    this.status = status;
    this.errors = errors;
  }
}

interface Live<T> {
  value: T;
  lastUsedMs: number;
  /** Steps (or acts) applied, and the last answer, for retried requests. */
  seq: number;
  last?: unknown;
  /** The create's `request_id` (scoped by route) and answer, repeated to a retried create. */
  requestKey?: string;
  created?: unknown;
  /** The create's task as JSON: a create repeating `requestKey` must send the same one. */
  createdFor?: string;
}

/** The request key of an item that is gone (deleted or idled out), kept to refuse its reuse. */
interface Retired {
  /** The id the create made. */
  id: string;
  /** When the item went (`Date.now()`, ms). */
  retiredMs: number;
}

/** A keyed store of live episodes or experts with idle expiry and a size cap. */
class LiveStore<T> {
  readonly #items = new Map<string, Live<T>>();
  /** Live ids by their create's request key. */
  readonly #byRequest = new Map<string, string>();
  /**
   * Request keys of items that are gone, oldest first (a Map keeps insertion order): each for
   * `idleMs` after its item went, at most `maxLive` of them.
   */
  readonly #retired = new Map<string, Retired>();
  constructor(readonly kind: string, readonly idleMs: number, readonly maxLive: number) {}

  /**
   * Creates a live item with `make(id)` and returns its answer; when `request.key` is that of a
   * live item, returns that item's first answer instead and makes nothing (a retried create).
   * `request.body` is what the create asked for (its task as JSON).
   * Throws EnvServerError 429 when `maxLive` items live; 409 when `request.key` is that of a
   * live item created for another body (a request id reused, not a retry: answering the first
   * item would hand the caller one it did not ask for); 410 when it is that of an item deleted or
   * idled out within the last `idleMs` (a late duplicate: a new item would be one nobody drives
   * or deletes).
   */
  create<A>(
    request: { key: string; body: string } | undefined,
    make: (id: string) => { value: T; answer: A },
  ): A {
    const requestKey = request?.key;
    this.#forgetRetired();
    // Idle items go first, so a late duplicate of one idled out but not yet swept is a 410 too.
    this.sweep();
    const retired = requestKey === undefined ? undefined : this.#retired.get(requestKey);
    if (retired !== undefined) {
      throw new EnvServerError(
        410,
        `Cannot create ${this.kind} as request_id must be new: ${this.kind} ${retired.id} was ` +
          `created for it and is gone (deleted or idled out); send a new request_id for a new ${this.kind}`,
        [{ path: "request_id", message: `already used for ${this.kind} ${retired.id}, now gone` }],
      );
    }
    const known = requestKey === undefined ? undefined : this.#byRequest.get(requestKey);
    if (known !== undefined) {
      const item = this.get(known);
      if (item.createdFor !== request?.body) {
        throw new EnvServerError(
          409,
          `Cannot create ${this.kind} as request_id must be new or repeat its first request: ` +
            `${this.kind} ${known} was created for it with another task`,
          [{ path: "request_id", message: `already used for ${this.kind} ${known}` }],
        );
      }
      return item.created as A;
    }
    if (this.#items.size >= this.maxLive) {
      throw new EnvServerError(
        429,
        `Cannot create ${this.kind} as live ${this.kind}s must be fewer than ${this.maxLive}: ` +
          `current value is ${this.#items.size}`,
      );
    }
    const id = crypto.randomUUID();
    const { value, answer } = make(id);
    this.#items.set(id, {
      value,
      lastUsedMs: Date.now(),
      seq: 0,
      requestKey,
      created: answer,
      createdFor: request?.body,
    });
    if (requestKey !== undefined) this.#byRequest.set(requestKey, id);
    return answer;
  }

  get(id: string): Live<T> {
    const item = this.#items.get(id);
    if (item === undefined) {
      throw new EnvServerError(
        404,
        `Cannot find ${this.kind} as the id must be a live ${this.kind}: current value is ${id}`,
      );
    }
    item.lastUsedMs = Date.now();
    return item;
  }

  /** Drops item `id` (nothing when there is none); its request key stays used (see create). */
  delete(id: string): void {
    const item = this.#items.get(id);
    if (item?.requestKey !== undefined) {
      this.#byRequest.delete(item.requestKey);
      this.#retired.set(item.requestKey, { id, retiredMs: Date.now() });
      if (this.#retired.size > this.maxLive) {
        this.#retired.delete(this.#retired.keys().next().value!);
      }
    }
    this.#items.delete(id);
  }

  /** Forgets the request keys of items gone for longer than `idleMs`. */
  #forgetRetired(): void {
    const cutoff = Date.now() - this.idleMs;
    for (const [key, retired] of this.#retired) {
      if (retired.retiredMs >= cutoff) break;
      this.#retired.delete(key);
    }
  }

  sweep(): void {
    const cutoff = Date.now() - this.idleMs;
    for (const [id, item] of this.#items) if (item.lastUsedMs < cutoff) this.delete(id);
  }
}

async function readBody<T extends z.ZodType>(c: Context, schema: T): Promise<z.infer<T>> {
  let json: unknown;
  try {
    json = await c.req.json();
  } catch (cause) {
    throw new EnvServerError(400, `Cannot read body as it must be JSON: ${String(cause)}`);
  }
  const result = schema.safeParse(json);
  if (!result.success) {
    const errors = result.error.issues.map((i) => ({
      path: i.path.map(String).join("."),
      message: i.message,
    }));
    throw new EnvServerError(
      400,
      `Cannot accept body as ${errors[0].path || "(root)"} must be valid: ${errors[0].message}`,
      errors,
    );
  }
  return result.data;
}

/**
 * The request key and body {@link LiveStore.create} matches a retried create by: `request_id`
 * scoped by `route` (the same id on another route is another request) and the task as JSON;
 * undefined without a `request_id`.
 */
function retryable(
  route: string,
  requestId: string | undefined,
  task: unknown,
): { key: string; body: string } | undefined {
  return requestId === undefined
    ? undefined
    : { key: `${route}:${requestId}`, body: JSON.stringify(task) };
}

/** Applies `seq` semantics: returns the cached answer of a retry, or undefined to act. */
function replayed(live: Live<unknown>, seq: number | undefined, what: string): unknown {
  if (seq === undefined) return undefined;
  if (seq === live.seq - 1 && live.last !== undefined) return live.last;
  if (seq !== live.seq) {
    throw new EnvServerError(
      409,
      `Cannot ${what} as seq must be ${live.seq} (or ${live.seq - 1} to repeat the last ` +
        `request): current value is ${seq}`,
    );
  }
  return undefined;
}

/** The routes of one environment (mounted at `/` and/or `/envs/{id}`). */
function envRoutes(env: Environment, options: EnvServerOptions): Hono {
  const idleMs = options.idleMs ?? 15 * 60_000;
  const maxLive = options.maxLive ?? 10_000;
  const episodes = new LiveStore<Episode>("episode", idleMs, maxLive);
  const experts = new LiveStore<Expert>("expert", idleMs, maxLive);
  const app = new Hono();
  app.get("/v1/info", (c) =>
    c.json({
      protocol_version: PROTOCOL_VERSION,
      id: env.id,
      description: env.description,
      options_schema: z.toJSONSchema(env.optionsSchema, { io: "input" }),
      families: [...env.families],
      default_max_turns: env.defaultMaxTurns,
      splits: [...SPLITS],
      skill_judge: env.judgeSkill !== undefined,
      skilled_demonstration: env.skilledDemonstration !== undefined,
    }));
  app.post("/v1/tasks", async (c) => {
    const body = await readBody(c, TasksRequestSchema);
    return c.json({ tasks: env.sampleTasks(body.split, body.count, body.seed, body.options) });
  });
  app.post("/v1/episodes", async (c) => {
    const { task, request_id } = await readBody(c, TaskRequestSchema);
    const answer = episodes.create(retryable("episode", request_id, task), (id) => {
      const episode = env.createEpisode(task);
      return {
        value: episode,
        answer: { episode_id: id, observation: observationToWire(episode.reset()) },
      };
    });
    return c.json(answer, 201);
  });
  app.post("/v1/episodes/:id/reset", (c) => {
    const live = episodes.get(c.req.param("id"));
    live.seq = 0;
    live.last = undefined;
    return c.json({ observation: observationToWire(live.value.reset()) });
  });
  app.post("/v1/episodes/:id/step", async (c) => {
    const live = episodes.get(c.req.param("id"));
    const body = await readBody(c, StepRequestSchema);
    const cached = replayed(live, body.seq, "step episode");
    if (cached !== undefined) return c.json(cached);
    const r: StepResult = live.value.step(body.action);
    const answer = { ...r, observation: observationToWire(r.observation) };
    live.seq++;
    live.last = answer;
    return c.json(answer);
  });
  app.delete("/v1/episodes/:id", (c) => {
    episodes.delete(c.req.param("id"));
    return c.body(null, 204);
  });
  app.post("/v1/prompt", async (c) => {
    const { input } = await readBody(c, PromptRequestSchema);
    const prompt = env.buildPrompt({
      ...input,
      observation: observationFromWire(input.observation),
    });
    return c.json({ prompt });
  });
  app.post("/v1/parse", async (c) => {
    const { response } = await readBody(c, ParseRequestSchema);
    return c.json({ action: env.parseAction(response) });
  });
  app.post("/v1/experts", async (c) => {
    const { task, request_id } = await readBody(c, TaskRequestSchema);
    const answer = experts.create(
      retryable("expert", request_id, task),
      (id) => ({ value: env.createExpert(task), answer: { expert_id: id } }),
    );
    return c.json(answer, 201);
  });
  app.post("/v1/experts/:id/act", async (c) => {
    const live = experts.get(c.req.param("id"));
    const body = await readBody(c, ActRequestSchema);
    const cached = replayed(live, body.seq, "act");
    if (cached !== undefined) return c.json(cached);
    const answer = { action: live.value.act(observationFromWire(body.observation)) };
    live.seq++;
    live.last = answer;
    return c.json(answer);
  });
  app.delete("/v1/experts/:id", (c) => {
    experts.delete(c.req.param("id"));
    return c.body(null, 204);
  });
  if (env.skilledDemonstration) {
    const demonstrate = env.skilledDemonstration.bind(env);
    // Its expert joins the others: `/v1/experts/{id}` acts on it and deletes it.
    app.post("/v1/skilled-demonstrations", async (c) => {
      const { task, request_id } = await readBody(c, TaskRequestSchema);
      const answer = experts.create(retryable("demonstration", request_id, task), (id) => {
        const { skill, expert } = demonstrate(task);
        return { value: expert, answer: { skill, expert_id: id } };
      });
      return c.json(answer, 201);
    });
  }
  app.post("/v1/analysis", async (c) => {
    const { trajectory } = await readBody(c, AnalysisRequestSchema);
    return c.json(env.referenceAnalysis(trajectory));
  });
  if (env.judgeSkill) {
    const judge = env.judgeSkill.bind(env);
    app.post("/v1/skill-judgement", async (c) => {
      const { trajectory, skill } = await readBody(c, SkillJudgementRequestSchema);
      const j = judge(trajectory, skill);
      return c.json({
        well_formed: j.wellFormed,
        truthful: j.truthful,
        matches_reference: j.matchesReference,
      });
    });
  }
  app.get("/v1/vocabulary", (c) => c.json({ words: env.vocabulary() }));
  return app;
}

function problem(c: Context, status: number, title: string, detail: string, errors?: unknown) {
  return c.body(
    JSON.stringify({ type: "about:blank", title, status, detail, ...(errors ? { errors } : {}) }),
    status as 400,
    { "content-type": "application/problem+json" },
  );
}

/**
 * The Hono app serving `envs`: each at `/envs/{id}/v1/…`, the first also at `/v1/…` when it is
 * the only one, plus `GET /v1/envs` (the ids and base paths served).
 */
export function createEnvApp(envs: readonly Environment[], options: EnvServerOptions = {}): Hono {
  const app = new Hono();
  app.use(
    "*",
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) =>
        problem(
          c,
          413,
          "Payload Too Large",
          `Cannot read body as it must be at most ${MAX_BODY_BYTES} bytes`,
        ),
    }),
  );
  app.get(
    "/v1/envs",
    (c) => c.json({ envs: envs.map((e) => ({ id: e.id, base_path: `/envs/${e.id}` })) }),
  );
  for (const env of envs) {
    const routes = envRoutes(env, options);
    app.route(`/envs/${env.id}`, routes);
    if (envs.length === 1) app.route("/", routes);
  }
  app.notFound((c) =>
    problem(c, 404, "Not Found", `Cannot find route ${c.req.method} ${c.req.path}`)
  );
  app.onError((err, c) => {
    if (err instanceof EnvServerError) {
      return problem(c, err.status, err.name, err.message, err.errors);
    }
    if (err instanceof EnvOptionsError) {
      const errors = err.issues.map((i) => ({
        path: ["options", ...i.path].join("."),
        message: i.message,
      }));
      return problem(c, 400, err.name, err.message, errors);
    }
    if (err instanceof InvalidTaskError || err instanceof TaskSamplingError) {
      return problem(c, 400, err.name, err.message);
    }
    // An expert handed an observation its environment cannot have shown (`POST …/act`): the
    // request is wrong, not the server (a 5xx would also make the client retry it).
    if (err instanceof ObservationParseError) {
      return problem(c, 400, err.name, err.message, [
        { path: "observation.text", message: err.message },
      ]);
    }
    return problem(c, 500, "Internal Server Error", `Cannot serve request: ${String(err)}`);
  });
  return app;
}

/** A running server. */
export interface EnvServer {
  /** Base URL of the server, e.g. `http://127.0.0.1:41234`. */
  url: string;
  port: number;
  /** Stops accepting and closes the listener. */
  close(): Promise<void>;
}

/**
 * Serves `envs` on `hostname:port` (port 0 picks a free one).
 * Resolves once the listener is bound.
 */
export function serveEnvironments(
  envs: readonly Environment[],
  opts: EnvServerOptions & { port?: number; hostname?: string } = {},
): Promise<EnvServer> {
  const app = createEnvApp(envs, opts);
  const hostname = opts.hostname ?? "127.0.0.1";
  return new Promise((resolve) => {
    const server = Deno.serve({
      port: opts.port ?? 0,
      hostname,
      onListen: (addr) => {
        const host = hostname.includes(":") ? `[${hostname}]` : hostname;
        resolve({
          url: `http://${host}:${addr.port}`,
          port: addr.port,
          close: () => server.shutdown(),
        });
      },
    }, app.fetch);
  });
}

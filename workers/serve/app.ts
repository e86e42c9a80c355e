/**
 * The inference server's HTTP app (Hono), in OpenAI's shapes:
 *
 * | method | path                   | answer                                                    |
 * |--------|------------------------|-----------------------------------------------------------|
 * | POST   | /v1/chat/completions   | `chat.completion`, or `chat.completion.chunk` SSE          |
 * | POST   | /v1/completions        | `text_completion` (also as SSE chunks)                    |
 * | GET    | /v1/models             | `{object: "list", data: [model]}`: checkpoints, uploads, named |
 * | GET    | /v1/models/{model}     | one model (a name's `/` escaped as `%2F` or not)          |
 * | GET    | /healthz               | `{ok, active, waiting, prefix_cache_bytes}` (bytes of prompt KV kept) |
 * | POST   | /v1/load_checkpoint, /v1/load_lora_adapter, /v1/unload_lora_adapter | lora_admin.ts |
 *
 * Every /v1 route needs a job-API key (auth.ts); errors are `{error: {message, type, param,
 * code}}` (errors.ts), mapped in one `onError`. Streams end with `data: [DONE]`; with
 * `stream_options.include_usage` a last chunk carries `usage` and no choices. A stream whose
 * client goes away, and a waiting request whose client goes away, leave the decode engine at
 * its next step.
 *
 * Extension fields: request `skills` (`"library"` | `{"step": N}`) and response `skill` (the
 * skill put into the prompt, with its library step and counts; null when the library is empty).
 */
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import {
  type ArtifactStore,
  type Database,
  listModels,
  listTenantCheckpoints,
} from "../../jobs/mod.ts";
import { countImageTokens } from "../model/mod.ts";
import { apiKeyAuth, type ServeAuthEnv } from "./auth.ts";
import type { DecodeEngine } from "./engine.ts";
import { badRequest, fromZod, modelNotFound, ServeError, toErrorResponse } from "./errors.ts";
import type { HeldModel, ModelRegistry, ServedModel } from "./models.ts";
import { chatMessages, encodePrompt, renderChat } from "./prompt.ts";
import { ChatRequestSchema, CompletionRequestSchema, type SkillsOption } from "./schemas.ts";
import { type Prepared, respond, type UsedSkill } from "./respond.ts";
import { chooseSkill, insertSkill, taskOf, withSkill } from "../skills/mod.ts";
import { ADMIN_ROUTES, mountLoraAdmin, type NamedModels } from "./lora_admin.ts";
import { checkPromptIds } from "./token_ids.ts";

/** What the app serves with. */
export interface ServeAppOptions {
  db: Database;
  store: ArtifactStore;
  engine: DecodeEngine;
  registry: ModelRegistry;
  /** Models loaded by name at runtime (lora_admin.ts); absent: no such routes. */
  named?: NamedModels;
  /** Key lookups are cached this long (ms, default 2000; 0 in tests). */
  authCacheMs?: number;
  /** Largest request body (bytes, default 1 MiB). */
  maxBodyBytes?: number;
  /** `max_tokens` when a request gives none (default 256; always within the context). */
  defaultMaxTokens?: number;
}

/**
 * The server's URLs and the methods each takes: another method is a 405 with `Allow`. Exact paths
 * (no trailing slash), as the router matches them: `POST /v1/chat/completions/` is a 404, as in
 * the job API, not a 405 saying that the URL takes only POST.
 */
const ROUTE_METHODS: readonly [RegExp, string][] = [
  [/^\/v1\/chat\/completions$/, "POST"],
  [/^\/v1\/completions$/, "POST"],
  [/^\/v1\/models(\/.+)?$/, "GET"],
  [/^\/healthz$/, "GET"],
  ...ADMIN_ROUTES.map((p): [RegExp, string] => [new RegExp(`^${p}$`), "POST"]),
];

/** Builds the app (see module doc). */
export function createServeApp(opts: ServeAppOptions): Hono<ServeAuthEnv> {
  const app = new Hono<ServeAuthEnv>();
  app.onError((e, c) => {
    const err = toErrorResponse(e);
    return c.json(err.body(), err.status as 400, err.options.headers);
  });
  app.notFound((c) => {
    const path = new URL(c.req.url).pathname;
    const allow = ROUTE_METHODS.find(([pattern]) => pattern.test(path))?.[1];
    const err = allow
      ? new ServeError(
        405,
        "invalid_request_error",
        `Cannot ${c.req.method} ${path} as this URL takes only ${allow}`,
        { headers: { allow } },
      )
      : new ServeError(
        404,
        "invalid_request_error",
        `Unknown request URL: ${c.req.method} ${path}`,
      );
    return c.json(err.body(), err.status as 404, err.options.headers);
  });
  app.get(
    "/healthz",
    (c) =>
      c.json({
        ok: true,
        active: opts.engine.active,
        waiting: opts.engine.waiting,
        prefix_cache_bytes: opts.engine.keptPrefixBytes,
      }),
  );
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;
  app.use(
    "/v1/*",
    bodyLimit({
      maxSize: maxBody,
      onError: () => {
        throw new ServeError(
          413,
          "invalid_request_error",
          `Cannot accept the request body as it must be at most ${maxBody} bytes`,
        );
      },
    }),
  );
  app.use("/v1/*", apiKeyAuth(opts.db, { cacheMs: opts.authCacheMs }));
  if (opts.named) mountLoraAdmin(app, opts.named);
  /** The model a request names: a model loaded by name, else a job checkpoint. */
  const acquire = async (tenantId: string, name: string) =>
    (await opts.named?.acquire(tenantId, name)) ??
      await opts.registry.acquire(await opts.registry.resolve(tenantId, name));

  app.get("/v1/models", async (c) => {
    const tenant = c.get("tenant");
    const rows = await listTenantCheckpoints(opts.db, tenant.id);
    const data: ReturnType<typeof modelObject>[] = [];
    for (const [i, r] of rows.entries()) {
      if (i === 0 || rows[i - 1].jobId !== r.jobId) {
        const latest = rows.filter((x) => x.jobId === r.jobId).at(-1)!;
        data.push(modelObject(`job:${r.jobId}`, latest.createdAt, tenant.name));
      }
      data.push(modelObject(`job:${r.jobId}@${r.step}`, r.createdAt, tenant.name));
    }
    for (const m of await listModels(opts.db, tenant.id)) {
      data.push(modelObject(`model:${m.id}`, m.createdAt, tenant.name));
    }
    for (const m of await opts.named?.list(tenant.id) ?? []) {
      data.push(modelObject(m.name, m.createdAt, tenant.name));
    }
    return c.json({ object: "list", data });
  });

  // `{.+}`: a name loaded with a slash (`Qwen/Qwen3-0.6B`, as Hugging Face names models) is one
  // model whether the client escapes the slash (`%2F`, as the openai client does) or not.
  app.get("/v1/models/:model{.+}", async (c) => {
    const tenant = c.get("tenant");
    const name = c.req.param("model");
    const loaded = (await opts.named?.list(tenant.id))?.find((m) => m.name === name);
    if (loaded) return c.json(modelObject(name, loaded.createdAt, tenant.name));
    const why = opts.named?.whyGone(tenant.id, name);
    if (why) throw modelNotFound(why);
    const source = await opts.registry.resolve(tenant.id, name);
    return c.json(modelObject(name, source.createdAt, tenant.name));
  });

  app.post("/v1/chat/completions", async (c) => {
    const body = ChatRequestSchema.safeParse(await readJson(c));
    if (!body.success) throw fromZod(body.error);
    const r = body.data;
    const tenant = c.get("tenant");
    const held = await acquire(tenant.id, r.model);
    return await holding(held, async (model, takeHold) => {
      let messages = chatMessages(r.messages);
      const skill = r.skills === undefined ? undefined : await pickSkill(
        opts.registry,
        model,
        r.skills,
        taskOf(messages.map((m) => m.content).join("\n")),
      );
      if (skill) messages = withSkill(messages, skill.text);
      const text = renderChat(model, messages);
      checkPromptChars(model, text, "messages");
      const p = prepare(model, encodePrompt(model, text, "chat"), {
        ...r,
        max_tokens: r.max_completion_tokens ?? r.max_tokens,
        logprobs: r.logprobs ? (r.top_logprobs ?? 0) : null,
      }, { defaultMaxTokens: opts.defaultMaxTokens, promptParam: "messages" });
      if (skill !== undefined) p.skill = skill;
      return respond(c, opts.engine, { ...p, takeHold }, "chat");
    });
  });

  app.post("/v1/completions", async (c) => {
    const body = CompletionRequestSchema.safeParse(await readJson(c));
    if (!body.success) throw fromZod(body.error);
    const r = body.data;
    const tenant = c.get("tenant");
    const held = await acquire(tenant.id, r.model);
    const ids = typeof r.prompt === "string" ? null : r.prompt.flat();
    if (ids && typeof ids[0] === "number") {
      // a token-id prompt (token_ids.ts): decoded as given
      if (r.skills !== undefined) {
        throw badRequest("Invalid request: skills need a text prompt", "skills");
      }
      return await holding(held, (model, takeHold) => {
        const prompt = checkPromptIds(ids as number[], model.config.vocab_size);
        const p = prepare(model, prompt, r, {
          defaultMaxTokens: opts.defaultMaxTokens,
          promptParam: "prompt",
        });
        return respond(c, opts.engine, { ...p, takeHold }, "completion");
      });
    }
    return await holding(held, async (model, takeHold) => {
      let prompt = Array.isArray(r.prompt) ? r.prompt[0] as string : r.prompt;
      // Checked before a skill is inserted: a skill alone is not the user's prompt.
      if (prompt === "") throw badRequest("Invalid request: prompt must not be empty", "prompt");
      const skill = r.skills === undefined
        ? undefined
        : await pickSkill(opts.registry, model, r.skills, taskOf(prompt));
      if (skill) prompt = insertSkill(prompt, skill.text);
      checkPromptChars(model, prompt, "prompt");
      const p = prepare(model, encodePrompt(model, prompt, "completion"), r, {
        defaultMaxTokens: opts.defaultMaxTokens,
        promptParam: "prompt",
      });
      if (skill !== undefined) p.skill = skill;
      return respond(c, opts.engine, { ...p, takeHold }, "completion");
    });
  });

  return app;
}

/**
 * Runs a request's handler with its checkpoint held: `respond` takes the hold over once the
 * request is in the engine (it lets go when the last choice ends); a handler that fails before
 * that lets go here.
 */
async function holding(
  held: HeldModel,
  handler: (model: ServedModel, takeHold: () => () => void) => Promise<Response> | Response,
): Promise<Response> {
  let taken = false;
  try {
    return await handler(held.model, () => {
      taken = true;
      return held.release;
    });
  } finally {
    if (!taken) held.release();
  }
}

/** An OpenAI model object. */
function modelObject(id: string, created: Date, owner: string) {
  return {
    id,
    object: "model" as const,
    created: Math.floor(created.getTime() / 1000),
    owned_by: owner,
  };
}

/** `application/json` or a `+json` type, with any parameters (as the job API accepts). */
const JSON_MEDIA_TYPE = /^application\/(?:[a-z0-9.+-]+\+)?json\s*(?:;|$)/i;

/**
 * The body as JSON: a 415 unless it is sent as JSON (the job API answers the same), a 400 naming
 * the parse error when it does not parse.
 */
async function readJson(c: Context): Promise<unknown> {
  const type = c.req.header("content-type");
  if (type === undefined || !JSON_MEDIA_TYPE.test(type.trim())) {
    throw new ServeError(
      415,
      "invalid_request_error",
      `Cannot read the request body as its Content-Type must be application/json: current value is ${
        JSON.stringify(type ?? null)
      }`,
      { code: "unsupported_media_type" },
    );
  }
  const text = await c.req.text();
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(
      `We could not parse the JSON body of your request: ${(e as Error).message}`,
      null,
    );
  }
}

/** The job's best skill for `task` from the library the request named (null: empty library). */
async function pickSkill(
  registry: ModelRegistry,
  model: ServedModel,
  option: SkillsOption,
  task: string | null,
): Promise<UsedSkill | null> {
  if (model.jobId === null) {
    throw badRequest(
      `Cannot use skills as the model must be a job's checkpoint (job:<id>): ${model.id} is an uploaded model, which has no skill library`,
      "skills",
    );
  }
  const { step, library } = await registry.skillLibrary(
    model.jobId,
    option === "library" ? undefined : option.step,
  );
  const choice = chooseSkill(library, task);
  if (!choice) return null;
  const s = choice.record;
  return {
    text: s.text,
    library_step: step,
    relevance: choice.relevance,
    times_seen: s.timesSeen,
    success_count: s.successCount,
    failure_count: s.failureCount,
    first_step: s.firstStep,
    last_step: s.lastStep,
    mean_teacher_gap: s.meanTeacherGap,
  };
}

/**
 * Refuses, before tokenizing, a prompt text too long for any tokenization of it to fit the
 * context (`Tokenizer.minTokens`): encoding runs on the thread that decodes every stream, and
 * ~1 MiB of text took 1.4–2 s, a stall of every stream on the server. 400
 * `context_length_exceeded` at `param`.
 */
function checkPromptChars(model: ServedModel, text: string, param: "messages" | "prompt"): void {
  const context = model.config.max_position_embeddings;
  const atLeast = model.tokenizer.minTokens(text);
  if (atLeast === null || atLeast < context) return;
  throw badRequest(
    `This model's maximum context length is ${context} tokens, and your prompt has ${text.length} characters: at least ${atLeast} tokens, as no token is longer than ${model.tokenizer.maxTokenChars} characters`,
    param,
    "context_length_exceeded",
  );
}

/** Checks the prompt against the model and fills the sampling defaults. */
function prepare(
  model: ServedModel,
  prompt: number[],
  r: {
    max_tokens?: number | null;
    n?: number | null;
    temperature?: number | null;
    top_p?: number | null;
    seed?: number | null;
    sampling_stream?: { seed: number; row: number } | null;
    stop?: string | string[] | null;
    stream?: boolean | null;
    stream_options?: { include_usage?: boolean } | null;
    /** Alternatives per token when log-probs are asked for; null/undefined: none. */
    logprobs?: number | null;
    return_tokens_as_token_ids?: boolean | null;
  },
  opts: {
    defaultMaxTokens?: number;
    /** The request field errors about the prompt name: `messages` (chat) or `prompt`. */
    promptParam: "messages" | "prompt";
  },
): Prepared {
  const { defaultMaxTokens = 256, promptParam } = opts;
  const context = model.config.max_position_embeddings;
  if (prompt.length === 0) throw badRequest("Invalid request: the prompt has no tokens", "prompt");
  if (model.config.vision_config && countImageTokens(prompt, model.config) > 0) {
    throw badRequest(
      "Invalid request: the prompt holds <image> placeholders and this server takes no images",
      promptParam,
    );
  }
  if (prompt.length >= context) {
    throw badRequest(
      `This model's maximum context length is ${context} tokens, and your prompt has ${prompt.length}`,
      promptParam,
      "context_length_exceeded",
    );
  }
  const room = context - prompt.length;
  if (r.max_tokens != null && r.max_tokens > room) {
    throw badRequest(
      `This model's maximum context length is ${context} tokens: your prompt has ${prompt.length} and max_tokens asks for ${r.max_tokens} more`,
      "max_tokens",
      "context_length_exceeded",
    );
  }
  const temperature = r.temperature ?? 1;
  return {
    model,
    prompt,
    maxTokens: r.max_tokens ?? Math.min(defaultMaxTokens, room),
    n: r.n ?? 1,
    greedy: temperature === 0,
    temperature: temperature === 0 ? 1 : temperature,
    topP: r.top_p ?? 1,
    seed: r.sampling_stream?.seed ?? r.seed ?? crypto.getRandomValues(new Uint32Array(1))[0],
    firstChoice: r.sampling_stream?.row ?? 0,
    stop: r.stop == null ? [] : typeof r.stop === "string" ? [r.stop] : r.stop,
    stream: r.stream ?? false,
    includeUsage: r.stream_options?.include_usage ?? false,
    logprobs: r.logprobs == null
      ? null
      : { top: r.logprobs, tokenIds: r.return_tokens_as_token_ids ?? false },
  };
}

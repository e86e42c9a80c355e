/**
 * Answers of the completion endpoints: a prepared request goes to the decode engine, and its
 * choices come back as one OpenAI JSON body (`chat.completion` / `text_completion`) or as an SSE
 * stream of chunks (`chat.completion.chunk` / `text_completion`) that ends with `data: [DONE]`;
 * with `include_usage`, a last chunk before it has no choices and the `usage`. A stream whose
 * client goes away, or a request whose client goes away while it waits, is cancelled in the
 * engine. The `skill` extension field is on the JSON body and on every chunk.
 */
import type { Context } from "hono";
import { SSE_HEADERS } from "../../jobs/mod.ts";
import { stopTokenIdsOf } from "../model/mod.ts";
import { type ChoiceSink, type DecodeEngine, type EngineFinish, QueueFullError } from "./engine.ts";
import { badRequest, queueFull, toErrorResponse } from "./errors.ts";
import type { ServedModel } from "./models.ts";
import { ChoiceText } from "./text.ts";

/** The skill put into a prompt, as reported in the response's `skill` field. */
export interface UsedSkill {
  text: string;
  /** Step of the library it came from. */
  library_step: number;
  /** Share of the task's content words in the skill (skill_choice.ts). */
  relevance: number;
  times_seen: number;
  success_count: number;
  failure_count: number;
  first_step: number;
  last_step: number;
  mean_teacher_gap: number | null;
}

/** A validated request, resolved to a model, a prompt and sampling settings. */
export interface Prepared {
  model: ServedModel;
  prompt: number[];
  maxTokens: number;
  n: number;
  greedy: boolean;
  temperature: number;
  topP: number;
  seed: number;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
  /** Present (maybe null) when the request asked for skills. */
  skill?: UsedSkill | null;
  /**
   * Takes over the request's hold on its checkpoint (models.ts `acquire`) once it is in the
   * engine: the function it returns is called when the last choice has ended.
   */
  takeHold?: () => () => void;
}

/** OpenAI's finish reason of an engine finish (errors and cancels have none). */
function finishReason(reason: EngineFinish): "stop" | "length" {
  return reason === "length" ? "length" : "stop";
}

/** What both answers share: ids, the choices' texts, the cancel signal, `usage`, `skill`. */
class Answer {
  readonly id: string;
  readonly created = Math.floor(Date.now() / 1000);
  readonly texts: ChoiceText[];
  readonly abort = new AbortController();
  readonly extra: { skill?: UsedSkill | null };

  constructor(readonly p: Prepared, readonly kind: "chat" | "completion", clientGone: AbortSignal) {
    this.id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${crypto.randomUUID()}`;
    const decode = (ids: number[]) => p.model.tokenizer.decode(ids, { skipSpecialTokens: true });
    this.texts = Array.from({ length: p.n }, () => new ChoiceText(decode, p.stop));
    this.extra = p.skill !== undefined ? { skill: p.skill } : {};
    if (clientGone.aborted) this.abort.abort();
    clientGone.addEventListener("abort", () => this.abort.abort(), { once: true });
  }

  usage(completion: number) {
    const prompt = this.p.prompt.length;
    return {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
    };
  }

  /**
   * Queues the request in the engine with one sink per choice.
   * @throws ServeError 429 when the queue is full, 400 when `n` exceeds the batch.
   */
  submit(engine: DecodeEngine, sinks: ChoiceSink[]): void {
    const p = this.p;
    let live = sinks.length;
    let release: (() => void) | undefined = undefined;
    // every choice's sink hears `finish` exactly once: after the last, the checkpoint may go
    const counted = sinks.map((s): ChoiceSink => ({
      token: (id) => s.token(id),
      finish: (reason, info) => {
        try {
          s.finish(reason, info);
        } finally {
          if (--live === 0) release?.();
        }
      },
    }));
    try {
      engine.submit({
        model: p.model,
        prompt: p.prompt,
        maxNewTokens: p.maxTokens,
        sampling: { greedy: p.greedy, temperature: p.temperature, topP: p.topP },
        seed: p.seed,
        eosTokenIds: stopTokenIdsOf(p.model.tokenizer, p.model.promptForm),
        choices: counted,
        signal: this.abort.signal,
      });
    } catch (e) {
      if (e instanceof QueueFullError) throw queueFull(e.message, e.retryAfterS);
      if (e instanceof RangeError) throw badRequest(`Invalid request: ${e.message}`, "n");
      throw e;
    }
    release = p.takeHold?.();
    if (live === 0) release?.(); // (the engine ends choices in its loop, never within submit)
  }
}

/** One choice's result. */
interface ChoiceResult {
  text: string;
  finishReason: "stop" | "length";
  tokens: number;
}

/**
 * Submits a prepared request to the engine and answers as JSON or as an SSE stream (see module
 * doc). @throws ServeError 429 / 400 from {@link Answer.submit}.
 */
export function respond(
  c: Context,
  engine: DecodeEngine,
  p: Prepared,
  kind: "chat" | "completion",
): Promise<Response> | Response {
  const a = new Answer(p, kind, c.req.raw.signal);
  return p.stream ? respondStream(engine, a) : respondJson(c, engine, a);
}

/** The whole answer as one JSON body, once every choice has ended. */
async function respondJson(c: Context, engine: DecodeEngine, a: Answer): Promise<Response> {
  const { p, kind, texts } = a;
  const results = texts.map(() => Promise.withResolvers<ChoiceResult>());
  a.submit(
    engine,
    texts.map((t, i) => ({
      token: (token) => t.push(token).stopped,
      finish: (reason, { tokens, error }) => {
        if (reason === "error" || reason === "cancelled") {
          results[i].reject(error ?? new Error(`The request was ${reason}`));
        } else {
          results[i].resolve({ text: t.text, finishReason: finishReason(reason), tokens });
        }
      },
    })),
  );
  const done = await Promise.all(results.map((r) => r.promise));
  const choices = done.map((d, index) =>
    kind === "chat"
      ? {
        index,
        message: { role: "assistant", content: d.text, refusal: null },
        logprobs: null,
        finish_reason: d.finishReason,
      }
      : { index, text: d.text, logprobs: null, finish_reason: d.finishReason }
  );
  return c.json({
    id: a.id,
    object: kind === "chat" ? "chat.completion" : "text_completion",
    created: a.created,
    model: p.model.id,
    system_fingerprint: null,
    choices,
    usage: a.usage(done.reduce((n, d) => n + d.tokens, 0)),
    ...a.extra,
  });
}

/** The answer as SSE chunks: one per text delta and choice, `data: [DONE]` after the last. */
function respondStream(engine: DecodeEngine, a: Answer): Response {
  const { p, kind, texts, id, created, extra } = a;
  const encoder = new TextEncoder();
  const object = kind === "chat" ? "chat.completion.chunk" : "text_completion";
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let closed = false;
  const send = (data: unknown) => {
    if (closed) return;
    try {
      controller.enqueue(encoder.encode(`data: ${JSON.stringify(data)}\n\n`));
    } catch {
      closed = true; // the client went away
    }
  };
  const chunk = (index: number, delta: string | null, finish: "stop" | "length" | null) => {
    const choice = kind === "chat"
      ? {
        index,
        delta: delta === null ? {} : { content: delta },
        logprobs: null,
        finish_reason: finish,
      }
      : { index, text: delta ?? "", logprobs: null, finish_reason: finish };
    return {
      id,
      object,
      created,
      model: p.model.id,
      system_fingerprint: null,
      choices: [choice] as Record<string, unknown>[],
      ...(p.includeUsage ? { usage: null } : {}),
      ...extra,
    };
  };
  let live = p.n, completion = 0;
  const end = () => {
    if (p.includeUsage) {
      send({
        id,
        object,
        created,
        model: p.model.id,
        system_fingerprint: null,
        choices: [],
        usage: a.usage(completion),
      });
    }
    if (!closed) {
      controller.enqueue(encoder.encode("data: [DONE]\n\n"));
      controller.close();
      closed = true;
    }
  };
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel() {
      closed = true;
      a.abort.abort();
    },
  });
  a.submit(
    engine,
    texts.map((t, i) => ({
      token(token) {
        const step = t.push(token);
        if (step.delta) send(chunk(i, step.delta, null));
        return step.stopped;
      },
      finish(reason, { tokens, error }) {
        completion += tokens;
        if (reason === "error") {
          const err = toErrorResponse(error);
          send(err.body());
        } else if (reason !== "cancelled") {
          const rest = t.finish();
          if (rest) send(chunk(i, rest, null));
          send(chunk(i, kind === "chat" ? null : "", finishReason(reason)));
        }
        if (--live === 0) {
          if (reason === "cancelled" && !closed) {
            closed = true;
            controller.close();
          } else end();
        }
      },
    })),
  );
  // chat streams open each choice with the assistant role, as OpenAI's do
  if (kind === "chat") {
    texts.forEach((_, i) => {
      const first = chunk(i, "", null);
      first.choices[0] = { ...first.choices[0], delta: { role: "assistant", content: "" } };
      send(first);
    });
  }
  return new Response(body, { headers: SSE_HEADERS });
}

/**
 * Answers of the completion endpoints: a prepared request goes to the decode engine, and its
 * choices come back as one OpenAI JSON body (`chat.completion` / `text_completion`) or as an SSE
 * stream of chunks (`chat.completion.chunk` / `text_completion`) that ends with `data: [DONE]`;
 * with `include_usage`, a last chunk before it has no choices and the `usage`. A stream whose
 * client goes away, or a request whose client goes away while it waits, is cancelled in the
 * engine. The `skill` extension field is on the JSON body and on every chunk. Asked for, each
 * choice carries its tokens' log-probs (logprobs.ts); a stream chunk carries those of the tokens
 * whose text it brings (a token that completes no character yet goes with the next chunk).
 */
import type { Context } from "hono";
import { SSE_HEADERS } from "../../jobs/mod.ts";
import {
  type ChoiceSink,
  type DecodeEngine,
  type EngineFinish,
  QueueFullError,
  type TokenLogprob,
} from "./engine.ts";
import { type LogprobRequest, LogprobWriter } from "./logprobs.ts";
import { badRequest, queueFull, toErrorResponse } from "./errors.ts";
import type { ServedModel } from "./models.ts";
import { ChoiceText } from "./text.ts";

/** The skill put into a prompt, as reported in the response's `skill` field. */
export interface UsedSkill {
  text: string;
  /** Step of the library it came from. */
  library_step: number;
  /** Share of the task's content words in the skill (workers/skills/choice.ts). */
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
  /**
   * Stream index of choice 0 (`sampling_stream.row`, else 0): choice j draws
   * `choiceRng(seed, firstChoice + j)`.
   */
  firstChoice: number;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
  /** Log-probs asked for (chat `logprobs`/`top_logprobs`, completions `logprobs`), else null. */
  logprobs: LogprobRequest | null;
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
  /** Writes log-prob entries when the request asked for them. */
  readonly logprobs: LogprobWriter | null;
  /** Per choice: the tokens and their log-probs not yet sent (all of them for a JSON answer). */
  readonly pending: { ids: number[]; lps: TokenLogprob[]; offset: number }[];

  constructor(readonly p: Prepared, readonly kind: "chat" | "completion", clientGone: AbortSignal) {
    this.id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${crypto.randomUUID()}`;
    const decode = (ids: number[]) => p.model.tokenizer.decode(ids, { skipSpecialTokens: true });
    this.texts = Array.from({ length: p.n }, () => new ChoiceText(decode, p.stop));
    this.extra = p.skill !== undefined ? { skill: p.skill } : {};
    this.logprobs = p.logprobs ? new LogprobWriter(p.model.tokenizer, p.logprobs) : null;
    this.pending = Array.from({ length: p.n }, () => ({ ids: [], lps: [], offset: 0 }));
    if (clientGone.aborted) this.abort.abort();
    clientGone.addEventListener("abort", () => this.abort.abort(), { once: true });
  }

  /** Keeps a token's log-probs for choice `i` (when asked for). */
  keep(i: number, id: number, lp: TokenLogprob | undefined): void {
    if (!this.logprobs || !lp) return;
    this.pending[i].ids.push(id);
    this.pending[i].lps.push(lp);
  }

  /** The `logprobs` field of choice `i` holding its kept tokens, which are then cleared. */
  take(i: number): unknown {
    const w = this.logprobs;
    if (!w) return null;
    const p = this.pending[i];
    const out = this.kind === "chat"
      ? { content: p.ids.map((id, k) => w.chat(id, p.lps[k])), refusal: null }
      : w.completion(p.ids, p.lps, p.offset);
    if (this.kind === "completion") {
      const c = out as { text_offset: number[]; tokens: string[] };
      p.offset = c.text_offset.length === 0
        ? p.offset
        : c.text_offset.at(-1)! + this.#textLength(p.ids.at(-1)!);
    }
    p.ids = [];
    p.lps = [];
    return out;
  }

  #textLength(id: number): number {
    return new TextDecoder().decode(new Uint8Array(this.logprobs!.token(id).bytes ?? [])).length;
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
      token: (id, lp) => s.token(id, lp),
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
        firstChoice: p.firstChoice,
        eosTokenIds: p.model.stopTokenIds,
        topLogprobs: p.logprobs?.top,
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
      token: (token, lp) => {
        a.keep(i, token, lp);
        return t.push(token).stopped;
      },
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
        logprobs: a.take(index),
        finish_reason: d.finishReason,
      }
      : { index, text: d.text, logprobs: a.take(index), finish_reason: d.finishReason }
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
  const chunk = (
    index: number,
    delta: string | null,
    finish: "stop" | "length" | null,
    logprobs: unknown = null,
  ) => {
    const choice = kind === "chat"
      ? {
        index,
        delta: delta === null ? {} : { content: delta },
        logprobs,
        finish_reason: finish,
      }
      : { index, text: delta ?? "", logprobs, finish_reason: finish };
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
      token(token, lp) {
        a.keep(i, token, lp);
        const step = t.push(token);
        if (step.delta) send(chunk(i, step.delta, null, a.take(i)));
        return step.stopped;
      },
      finish(reason, { tokens, error }) {
        completion += tokens;
        if (reason === "error") {
          const err = toErrorResponse(error);
          send(err.body());
        } else if (reason !== "cancelled") {
          const rest = t.finish();
          const left = a.pending[i].ids.length > 0;
          if (rest || left) send(chunk(i, rest, null, a.take(i)));
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

/**
 * A real HTTP server on loopback that speaks OpenAI's chat-completions shape
 * (`POST /v1/chat/completions` → `{id, object, created, model, choices: [{index, message,
 * finish_reason}], usage}`), answering each request with what `answer` returns for its user
 * message: a string (the completion's content) or `{status, body}` (an error answer). It records
 * every request (authorization header and JSON body).
 */

/** One request the server received. */
export interface ChatRequest {
  authorization: string | null;
  body: {
    model: string;
    messages: { role: string; content: string }[];
    max_tokens?: number;
    temperature?: number;
  };
}

/** What `answer` returns: the completion's text, or an error answer. */
export type ChatAnswer = string | { status: number; body: unknown };

/** A running chat server. */
export interface ChatServer {
  /** `http://127.0.0.1:{port}/v1` (the base URL an OpenAI client takes). */
  baseUrl: string;
  requests: ChatRequest[];
  close(): Promise<void>;
}

/** Starts the server on a free loopback port. */
export function startChatServer(
  answer: (prompt: string, request: ChatRequest) => ChatAnswer,
): ChatServer {
  const requests: ChatRequest[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (r) => {
    const url = new URL(r.url);
    if (r.method !== "POST" || url.pathname !== "/v1/chat/completions") {
      return Response.json({ error: { message: "no such route" } }, { status: 404 });
    }
    const request: ChatRequest = {
      authorization: r.headers.get("authorization"),
      body: await r.json(),
    };
    requests.push(request);
    const prompt = request.body.messages.find((m) => m.role === "user")?.content ?? "";
    const a = answer(prompt, request);
    if (typeof a !== "string") return Response.json(a.body, { status: a.status });
    return Response.json({
      id: `chatcmpl-${requests.length}`,
      object: "chat.completion",
      created: 1_790_000_000,
      model: request.body.model,
      choices: [{
        index: 0,
        message: { role: "assistant", content: a },
        finish_reason: "stop",
        logprobs: null,
      }],
      usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
    });
  });
  const { port } = server.addr as Deno.NetAddr;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => server.shutdown(),
  };
}

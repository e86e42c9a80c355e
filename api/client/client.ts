/**
 * A small HTTP client of the API (used by the CLI and the tests): bearer auth, problem+json
 * errors turned into {@link ApiError}, and an SSE reader that reconnects with `Last-Event-ID`.
 */
import type { Problem } from "../errors.ts";

/** An HTTP error answer; `problem` is the parsed problem+json body when there was one. */
export class ApiError extends Error {
  readonly status: number;
  readonly problem?: Problem;
  constructor(method: string, path: string, status: number, problem?: Problem, text?: string) {
    const fields =
      problem?.errors?.map((e) => `\n  ${e.path || "(body)"}: ${e.message}`).join("") ??
        "";
    const detail = problem?.detail ?? text?.slice(0, 500) ?? "";
    super(`${method} ${path} failed with HTTP ${status}: ${detail}${fields}`);
    this.name = "ApiError";
    this.status = status;
    this.problem = problem;
  }
}

/** One SSE message as received. */
export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/** An uploaded model as the API answers it (`GET /v1/models/{id}`; see api/schemas.ts). */
export interface ModelInfo {
  id: string;
  /** `model:<id>`: what a JobSpec's `model.base` names it by. */
  base: string;
  name: string | null;
  architecture: string;
  parameter_count: number;
  /** Bytes of its kept files together. */
  bytes: number;
  files: { name: string; bytes: number; sha256: string }[];
  config: Record<string, unknown>;
  created_at: string;
  /** Archive entries the service did not keep (upload answers only). */
  skipped_files?: string[];
}

/** Options of {@link SeedClient.uploadModel}. */
export interface UploadModelOptions {
  /** A label (`?name=`, 1-200 characters). */
  name?: string;
  /** Sets `Idempotency-Key`: a retry with the same key and archive answers the same model. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** Client configuration. */
export interface ClientOptions {
  /** Base URL, e.g. `http://127.0.0.1:8787` (no trailing slash needed). */
  baseUrl: string;
  /** API key (`seed_…`). */
  apiKey?: string;
}

/** Parses an SSE byte stream into messages (per the WHATWG EventSource parsing rules). */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = "";
  let msg: { id?: string; event?: string; data: string[] } = { data: [] };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.search(/\r\n|\n|\r/)) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
      if (line === "") {
        if (msg.data.length > 0 || msg.event) {
          yield { id: msg.id, event: msg.event ?? "message", data: msg.data.join("\n") };
        }
        msg = { data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") msg.data.push(value);
      else if (field === "event") msg.event = value;
      else if (field === "id") msg.id = value;
    }
  }
}

/** The API client. Every method throws {@link ApiError} on a non-2xx answer. */
export class SeedClient {
  readonly baseUrl: string;
  readonly #apiKey?: string;
  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#apiKey = options.apiKey;
  }

  /** Sends a request; returns the raw response when it is 2xx/3xx (redirects not followed). */
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.#apiKey) headers.set("authorization", `Bearer ${this.#apiKey}`);
    const method = init.method ?? "GET";
    const res = await fetch(`${this.baseUrl}${path}`, {
      ...init,
      headers,
      redirect: "manual",
    });
    if (res.status >= 400) {
      const text = await res.text();
      let problem: Problem | undefined;
      if ((res.headers.get("content-type") ?? "").includes("json")) {
        try {
          problem = JSON.parse(text);
        } catch { /* not JSON after all: keep the text */ }
      }
      throw new ApiError(method, path, res.status, problem, text);
    }
    return res;
  }

  /** Sends a request and parses the JSON answer. */
  async json<T = Record<string, unknown>>(path: string, init: RequestInit = {}): Promise<T> {
    return await (await this.fetch(path, init)).json() as T;
  }

  /** `POST /v1/jobs` with a spec object; `idempotencyKey` sets the header. */
  submit(spec: unknown, idempotencyKey?: string): Promise<Record<string, unknown>> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (idempotencyKey) headers["idempotency-key"] = idempotencyKey;
    return this.json("/v1/jobs", { method: "POST", body: JSON.stringify(spec), headers });
  }

  /**
   * `POST /v1/models`: streams `archive` (a tar of a model folder, e.g. model_folder.ts
   * `folderTar`) as the request body. Answers the model, and `created: false` when an earlier
   * upload with the same Idempotency-Key made it (HTTP 200 instead of 201).
   */
  async uploadModel(
    archive: ReadableStream<Uint8Array>,
    options: UploadModelOptions = {},
  ): Promise<{ model: ModelInfo; created: boolean }> {
    const headers: Record<string, string> = { "content-type": "application/x-tar" };
    if (options.idempotencyKey) headers["idempotency-key"] = options.idempotencyKey;
    const query = options.name === undefined
      ? ""
      : `?${new URLSearchParams({ name: options.name })}`;
    const res = await this.fetch(`/v1/models${query}`, {
      method: "POST",
      body: archive,
      headers,
      signal: options.signal,
    });
    return { model: await res.json() as ModelInfo, created: res.status === 201 };
  }

  /** `GET /v1/models`: the tenant's models, newest first. */
  async listModels(): Promise<ModelInfo[]> {
    return (await this.json<{ models: ModelInfo[] }>("/v1/models")).models;
  }

  /** `GET /v1/models/{id}`. */
  getModel(id: string): Promise<ModelInfo> {
    return this.json<ModelInfo>(`/v1/models/${encodeURIComponent(id)}`);
  }

  /** `DELETE /v1/models/{id}` (a 409 {@link ApiError} while a queued or running job uses it). */
  async deleteModel(id: string): Promise<void> {
    await this.fetch(`/v1/models/${encodeURIComponent(id)}`, { method: "DELETE" });
  }

  /**
   * Follows `GET /v1/jobs/{id}/events` as SSE, yielding each event once, reconnecting with
   * `Last-Event-ID` after a dropped connection (backoff 0.2 s doubling to 5 s, `maxRetries`
   * consecutive failures), and ending at the server's `end` message. HTTP 4xx is not retried.
   */
  async *follow(
    jobId: string,
    options: { lastEventId?: string; maxRetries?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<SseMessage> {
    let lastId = options.lastEventId;
    let failures = 0;
    while (!options.signal?.aborted) {
      try {
        const headers: Record<string, string> = { accept: "text/event-stream" };
        if (lastId !== undefined) headers["last-event-id"] = lastId;
        const res = await this.fetch(`/v1/jobs/${encodeURIComponent(jobId)}/events`, {
          headers,
          signal: options.signal,
        });
        for await (const msg of parseSse(res.body!)) {
          failures = 0;
          if (msg.event === "end") return;
          if (msg.event === "error") throw new Error(`server stream error: ${msg.data}`);
          if (msg.id !== undefined) lastId = msg.id;
          yield msg;
        }
      } catch (error) {
        if (error instanceof ApiError && error.status < 500) throw error;
        if (options.signal?.aborted) return;
        if (++failures > (options.maxRetries ?? 20)) throw error;
        await new Promise((r) => setTimeout(r, Math.min(5000, 200 * 2 ** (failures - 1))));
      }
    }
  }
}

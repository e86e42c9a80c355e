/**
 * Errors of the inference server in OpenAI's error shape, and the one place that maps any error
 * to a response body:
 *
 * ```json
 * {"error": {"message": "…", "type": "invalid_request_error", "param": "temperature",
 *   "code": null}}
 * ```
 *
 * Types and codes follow OpenAI's API: `invalid_request_error` (400, with code
 * `named_model_limit_exceeded` when a tenant's registered names are full; 404 with code
 * `model_not_found`; 413), `authentication_error` is sent as `invalid_request_error` with code
 * `invalid_api_key` (401) as OpenAI does, `rate_limit_error` with code `rate_limit_exceeded`
 * (429, with `Retry-After`), `server_error` (500, and 502 with code `checkpoint_integrity` for a
 * stored object that fails its SHA-256).
 */
import { ZodError } from "zod";
import { IntegrityError } from "../../jobs/mod.ts";

/** The body of every error response. */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** An error that is already an HTTP response in OpenAI's shape. */
export class ServeError extends Error {
  override name = "ServeError";
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly options: {
      param?: string | null;
      code?: string | null;
      headers?: Record<string, string>;
      cause?: unknown;
    } = {},
  ) {
    super(message, { cause: options.cause });
  }

  /** The response body. */
  body(): OpenAiErrorBody {
    return {
      error: {
        message: this.message,
        type: this.type,
        param: this.options.param ?? null,
        code: this.options.code ?? null,
      },
    };
  }
}

/** 400: a request field is missing, malformed or unsupported (`param` names it). */
export function badRequest(message: string, param: string | null, code: string | null = null) {
  return new ServeError(400, "invalid_request_error", message, { param, code });
}

/** 401: missing, malformed, unknown or revoked API key. */
export function unauthorized(message: string): ServeError {
  return new ServeError(401, "invalid_request_error", message, { code: "invalid_api_key" });
}

/** 404: a model this tenant cannot see (unknown, another tenant's, or without checkpoint). */
export function modelNotFound(message: string): ServeError {
  return new ServeError(404, "invalid_request_error", message, {
    param: "model",
    code: "model_not_found",
  });
}

/** 429: the decode queue is full; retry after `retryAfterS` seconds. */
export function queueFull(message: string, retryAfterS: number): ServeError {
  return new ServeError(429, "rate_limit_error", message, {
    code: "rate_limit_exceeded",
    headers: { "retry-after": String(retryAfterS) },
  });
}

/** The first issue of a zod error as a 400 naming its field (`messages.0.content`). */
export function fromZod(e: ZodError): ServeError {
  const issue = e.issues[0];
  // An unknown field is named by its own path (zod puts it in `keys`, beside the parent's path).
  const path = issue.code === "unrecognized_keys" ? [...issue.path, issue.keys[0]] : issue.path;
  const param = path.map(String).join(".") || null;
  return badRequest(
    `Invalid request: ${param ?? "body"} ${issue.message.replace(/^Invalid input: /, "")}`,
    param,
  );
}

/**
 * Any error → (status, body, headers): a {@link ServeError} as it is, a zod error as a 400, an
 * object failing its SHA-256 (`IntegrityError` from the artifact store) as a 502, anything else
 * as a 500 whose message is kept (never a stack).
 */
export function toErrorResponse(e: unknown): ServeError {
  if (e instanceof ServeError) return e;
  if (e instanceof ZodError) return fromZod(e);
  const message = e instanceof Error ? e.message : String(e);
  if (e instanceof IntegrityError) {
    return new ServeError(
      502,
      "server_error",
      // The object key holds internal ids (tenant): name only the file.
      `Cannot serve the request as the stored ${
        e.key.includes("/skills/") ? "skill library" : "checkpoint file"
      } ${e.key.split("/").at(-1)} failed its SHA-256 check`,
      { code: "checkpoint_integrity", cause: e },
    );
  }
  return new ServeError(500, "server_error", message, { cause: e });
}

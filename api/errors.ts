/**
 * HTTP problems (RFC 9457 `application/problem+json`) and the one place that maps errors to
 * responses. Handlers never catch: they throw a {@link ProblemError} (or let a zod or domain
 * error escape) and {@link problemFromError} turns it into a response body.
 */
import { ZodError } from "zod";

/** One invalid field: zod's path joined with dots (`rollout.group_size`, `[0]` for indices). */
export interface FieldIssue {
  /** Dotted field path; `""` for the whole body/query. */
  path: string;
  /** zod's issue code, e.g. `too_small`, `invalid_type`. */
  code: string;
  message: string;
  /** Where a malformed JSON body breaks (1-based line and column, 0-based byte offset). */
  position?: { line: number; column: number; byte: number };
}

/** A problem+json body. `errors` is present for validation problems. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance?: string;
  errors?: FieldIssue[];
}

/** The media type of every error body. */
export const PROBLEM_JSON = "application/problem+json";

/** Base class: an error that is already an HTTP problem with a status and a stable type slug. */
export class ProblemError extends Error {
  /** HTTP status code (4xx/5xx). */
  readonly status: number;
  /** Stable slug; the problem `type` is `https://seed.dev/problems/{slug}`. */
  readonly slug: string;
  /** Short, human title for the status class. */
  readonly title: string;
  /** Field issues for validation problems. */
  readonly errors?: FieldIssue[];

  constructor(
    status: number,
    slug: string,
    title: string,
    detail: string,
    options: { cause?: unknown; errors?: FieldIssue[] } = {},
  ) {
    super(detail, { cause: options.cause });
    this.name = "ProblemError";
    this.status = status;
    this.slug = slug;
    this.title = title;
    this.errors = options.errors;
  }
}

/** 400: malformed JSON, or a body/query/header that violates its schema (with field paths). */
export class BadRequestError extends ProblemError {
  constructor(detail: string, options: { cause?: unknown; errors?: FieldIssue[] } = {}) {
    super(400, "bad-request", "Bad Request", detail, options);
    this.name = "BadRequestError";
  }
}

/** 401: missing, malformed, unknown or revoked API key. */
export class UnauthorizedError extends ProblemError {
  constructor(detail: string) {
    super(401, "unauthorized", "Unauthorized", detail);
    this.name = "UnauthorizedError";
  }
}

/** 404: unknown resource, including another tenant's job (never 403, so ids do not leak). */
export class NotFoundError extends ProblemError {
  constructor(detail: string) {
    super(404, "not-found", "Not Found", detail);
    this.name = "NotFoundError";
  }
}

/**
 * 409: a request that conflicts with stored state (e.g. Idempotency-Key reused with another body).
 */
export class ConflictError extends ProblemError {
  constructor(detail: string, options: { cause?: unknown } = {}) {
    super(409, "conflict", "Conflict", detail, options);
    this.name = "ConflictError";
  }
}

/**
 * How to stop an active job, for a 409 it causes: "cancel it first with `seed cancel ID` or
 * `POST /v1/jobs/ID/cancel`" — the command and the route, so the message alone says what to do.
 * No brackets, so a message may put it inside its own.
 */
export function cancelHint(jobId: string): string {
  return `cancel it first with \`seed cancel ${jobId}\` or \`POST /v1/jobs/${jobId}/cancel\``;
}

/** 405: a known path asked with a method it does not serve; `allow` lists the ones it does. */
export class MethodNotAllowedError extends ProblemError {
  /** Methods the path serves (the `Allow` header). */
  readonly allow: string[];
  constructor(method: string, path: string, allow: string[]) {
    super(
      405,
      "method-not-allowed",
      "Method Not Allowed",
      `Cannot ${method} ${path} as the method must be one of ${allow.join(", ")}`,
    );
    this.name = "MethodNotAllowedError";
    this.allow = allow;
  }
}

/** 414: request target (path and query) longer than the limit. */
export class UriTooLongError extends ProblemError {
  constructor(maxChars: number, chars: number) {
    super(
      414,
      "uri-too-long",
      "URI Too Long",
      `Cannot accept the request as its path and query must be at most ${maxChars} characters: current length is ${chars}`,
    );
    this.name = "UriTooLongError";
  }
}

/** 415: a request body whose Content-Type is not `expected` (default `application/json`). */
export class UnsupportedMediaTypeError extends ProblemError {
  constructor(contentType: string | undefined, expected = "application/json") {
    super(
      415,
      "unsupported-media-type",
      "Unsupported Media Type",
      `Cannot accept the request body as its Content-Type must be ${expected}: current value is ${
        contentType === undefined ? "missing" : JSON.stringify(contentType.slice(0, 200))
      }`,
    );
    this.name = "UnsupportedMediaTypeError";
  }
}

/** 431: request headers larger (or more numerous) than the limits. */
export class HeadersTooLargeError extends ProblemError {
  constructor(detail: string) {
    super(431, "headers-too-large", "Request Header Fields Too Large", detail);
    this.name = "HeadersTooLargeError";
  }
}

/** 413: request body larger than the configured limit. */
export class PayloadTooLargeError extends ProblemError {
  constructor(maxBytes: number) {
    super(
      413,
      "payload-too-large",
      "Payload Too Large",
      `Cannot accept the request body as it must be at most ${maxBytes} bytes`,
    );
    this.name = "PayloadTooLargeError";
  }
}

/** 422: well-formed but semantically invalid (unknown env id, unknown base job, …). */
export class UnprocessableError extends ProblemError {
  constructor(detail: string, options: { cause?: unknown; errors?: FieldIssue[] } = {}) {
    super(422, "unprocessable", "Unprocessable Content", detail, options);
    this.name = "UnprocessableError";
  }
}

/** Seconds a client is told to wait (`Retry-After`) when a dependency is unreachable. */
export const RETRY_AFTER_S = 5;

/** 503: a dependency (database, object store) is unreachable; answered with `Retry-After`. */
export class UnavailableError extends ProblemError {
  constructor(detail: string, options: { cause?: unknown } = {}) {
    super(503, "unavailable", "Service Unavailable", detail, options);
    this.name = "UnavailableError";
  }
}

/**
 * Joins a zod path (`["rollout", "group_size"]`, `["items", 0]`) as `rollout.group_size`,
 * `items[0]`.
 */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out === "" ? String(key) : `.${String(key)}`;
  }
  return out;
}

/**
 * Converts a zod error into field issues, prefixing each path (e.g. `query`), in zod's order. A
 * bad record key (`invalid_key`) carries its key's own messages (zod's is only "Invalid key in
 * record").
 */
export function zodIssues(error: ZodError, prefix: readonly PropertyKey[] = []): FieldIssue[] {
  return error.issues.map((issue) => ({
    path: formatPath([...prefix, ...issue.path]),
    code: issue.code,
    message: issue.code === "invalid_key" && issue.issues.length > 0
      ? issue.issues.map((i) => i.message).join("; ")
      : issue.message,
  }));
}

/**
 * A 400 that carries zod's field paths; `where` names the part of the request (`body`, `query`).
 */
export function validationError(where: string, error: ZodError): BadRequestError {
  const errors = zodIssues(error);
  const first = errors[0];
  const at = first?.path ? ` at \`${first.path}\`` : "";
  return new BadRequestError(
    `Cannot accept the request ${where} as it violates the schema${at}: ${
      first?.message ?? "invalid"
    }`,
    { errors, cause: error },
  );
}

/**
 * A mapper from a domain error (thrown by jobs/ or a provider) to a {@link ProblemError}, or
 * undefined when it does not recognise the error. Passed to `createApp` as `mapError`.
 */
export type ErrorMapper = (error: unknown) => ProblemError | undefined;

/**
 * Maps any thrown value to a problem body. Order: ProblemError, a bare ZodError (400), the
 * optional domain mapper, an error with a numeric `status` 4xx (e.g. Hono's HTTPException),
 * then 500 with a generic detail (the cause is not leaked to the client).
 */
export function problemFromError(error: unknown, mapError?: ErrorMapper): Problem {
  let problem: ProblemError | undefined;
  if (error instanceof ProblemError) problem = error;
  else if (error instanceof ZodError) problem = validationError("body", error);
  else problem = mapError?.(error);
  if (!problem && error instanceof Error) {
    const status = (error as { status?: unknown }).status;
    if (typeof status === "number" && status >= 400 && status < 500) {
      problem = new ProblemError(status, "http-error", "Client Error", error.message);
    }
  }
  if (!problem) {
    return {
      type: "https://seed.dev/problems/internal",
      title: "Internal Server Error",
      status: 500,
      detail: "The server failed to handle the request; see the server log for details",
    };
  }
  const body: Problem = {
    type: `https://seed.dev/problems/${problem.slug}`,
    title: problem.title,
    status: problem.status,
    detail: problem.message,
  };
  if (problem.errors) body.errors = problem.errors;
  return body;
}

/** Builds the `application/problem+json` response for a problem body. */
export function problemResponse(problem: Problem, headers: HeadersInit = {}): Response {
  const h = new Headers(headers);
  h.set("content-type", PROBLEM_JSON);
  return new Response(JSON.stringify(problem), { status: problem.status, headers: h });
}

/**
 * Request validation with zod: every body, query and path parameter enters through one of these
 * functions, which throw a 400 {@link BadRequestError} carrying zod's field paths.
 */
import type { Context } from "hono";
import type { z } from "zod";
import {
  BadRequestError,
  UnsupportedMediaTypeError,
  validationError,
  zodIssues,
} from "./errors.ts";
import { jsonSyntaxError } from "./json_syntax.ts";
import { jsonLimitIssue } from "./json_limits.ts";
import { MAX_STEP_DIGITS, StepParam } from "./schemas.ts";

/** `application/json` or a `+json` type, with any parameters (`; charset=utf-8`). */
const JSON_MEDIA_TYPE = /^application\/(?:[a-z0-9.+-]+\+)?json\s*(?:;|$)/i;

/** True when a Content-Type header names JSON (see {@link JSON_MEDIA_TYPE}). */
export function isJsonContentType(value: string | undefined): boolean {
  return value !== undefined && JSON_MEDIA_TYPE.test(value.trim());
}

/**
 * Reads the body as JSON and validates it. Throws 415 when a non-empty body is not sent as
 * `application/json`; 400 for malformed JSON (detail and `errors[0].position` name the line,
 * column and byte offset where it breaks), for JSON that breaks the limits of
 * api/json_limits.ts (too deep, or strings Postgres cannot store) and for schema violations
 * (errors[] with field paths). An empty body is `{}`.
 */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<
  z.output<S>
> {
  const text = await c.req.text();
  let raw: unknown = {};
  if (text.trim() !== "") {
    const type = c.req.header("content-type");
    if (!isJsonContentType(type)) throw new UnsupportedMediaTypeError(type);
    try {
      raw = JSON.parse(text);
    } catch (error) {
      const at = jsonSyntaxError(text);
      const where = at ? ` at line ${at.line}, column ${at.column} (byte ${at.byte})` : "";
      const expected = at ? `expected ${at.expected}` : (error as Error).message;
      throw new BadRequestError(
        `Cannot parse the request body as it must be JSON: ${expected}${where}`,
        {
          cause: error,
          errors: [{
            path: "",
            code: "invalid_json",
            message: `Expected ${at?.expected ?? "valid JSON"}`,
            ...(at && { position: { line: at.line, column: at.column, byte: at.byte } }),
          }],
        },
      );
    }
  }
  const issue = jsonLimitIssue(raw);
  if (issue) {
    throw new BadRequestError(
      `Cannot accept the request body${
        issue.path ? ` at \`${issue.path}\`` : ""
      } as ${issue.message}`,
      { errors: [issue] },
    );
  }
  const result = schema.safeParse(raw);
  if (!result.success) throw validationError("body", result.error);
  return result.data;
}

/**
 * Validates the query string. Every key takes one value: a repeated key (`?limit=1&limit=500`)
 * is a 400 at that key, not a silent pick of one of them (Hono's `query()` keeps the first).
 */
export function parseQuery<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  for (const [key, values] of Object.entries(c.req.queries())) {
    if (values.length > 1) {
      const message = `must be given once: it was given ${values.length} times`;
      throw new BadRequestError(`Cannot accept the request query as \`${key}\` ${message}`, {
        errors: [{ path: key, code: "repeated", message: `Query parameter ${message}` }],
      });
    }
  }
  const result = schema.safeParse(c.req.query());
  if (!result.success) throw validationError("query", result.error);
  return result.data;
}

/**
 * Validates query parameters already read with {@link parseQuery} and reshaped (e.g.
 * `metadata[key]=value` gathered into one object).
 * @throws BadRequestError (400) with the field paths of the violations.
 */
export function parseQueryObject<S extends z.ZodType>(query: unknown, schema: S): z.output<S> {
  const result = schema.safeParse(query);
  if (!result.success) throw validationError("query", result.error);
  return result.data;
}

/**
 * The `Idempotency-Key` header (`POST /v1/jobs`, `POST /v1/models`): absent, or 1–255 visible
 * ASCII characters.
 * @throws BadRequestError (400 at `headers.Idempotency-Key`) for any other value.
 */
export function parseIdempotencyKey(c: Context): string | undefined {
  const key = c.req.header("idempotency-key");
  if (key === undefined) return undefined;
  if (!/^[\x21-\x7e]{1,255}$/.test(key)) {
    const message = "Idempotency-Key must be 1-255 visible ASCII characters";
    throw new BadRequestError(`Cannot accept the request as its ${message}`, {
      errors: [{ path: "headers.Idempotency-Key", code: "invalid_format", message }],
    });
  }
  return key;
}

/**
 * The `{step}` path parameter: decimal digits (leading zeros read as the number), 0 to 10^9.
 * @throws BadRequestError (400 at `step`) for anything else (`abc`, `1.5`, `-1`, `1e3`): a step
 *   that is no whole number is a malformed request, not a checkpoint that does not exist.
 */
export function stepParamOf(raw: string | undefined): number {
  const parsed = StepParam.safeParse(raw);
  if (!parsed.success) {
    throw new BadRequestError(
      `Cannot read the step path parameter as it must be a whole number from 0 to 1000000000 (decimal digits, at most ${MAX_STEP_DIGITS} with leading zeros): current value is ${
        JSON.stringify(String(raw).slice(0, 64))
      }`,
      { errors: zodIssues(parsed.error, ["step"]), cause: parsed.error },
    );
  }
  return parsed.data;
}

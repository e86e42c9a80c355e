/**
 * Bearer API keys for the inference server: the job API's keys and tenants, checked by the
 * service's one key check (`bearerKeyChecker`, jobs/api_keys.ts: hashed, looked up, cached 2 s so
 * a revoked key stops working within that time, as on the job API). Errors are OpenAI-shaped 401s.
 */
import type { MiddlewareHandler } from "hono";
import {
  bearerKeyChecker,
  type BearerKeyFailure,
  type Database,
  type TenantRef,
} from "../../jobs/mod.ts";
import { unauthorized } from "./errors.ts";

/** Hono environment of authenticated routes. */
export interface ServeAuthEnv {
  Variables: { tenant: TenantRef };
}

const MESSAGES: Record<BearerKeyFailure, string> = {
  missing:
    "You didn't provide an API key: send `Authorization: Bearer <api key>` (a key of the job API)",
  malformed: "Incorrect API key provided: keys look like `seed_…`",
  unknown: "Incorrect API key provided: it is unknown or revoked",
};

/** Middleware: sets `tenant` or throws a 401 ServeError. */
export function apiKeyAuth(
  db: Database,
  options: { cacheMs?: number } = {},
): MiddlewareHandler<ServeAuthEnv> {
  const check = bearerKeyChecker(db, options);
  return async (c, next) => {
    const result = await check(c.req.header("authorization"));
    if ("failure" in result) throw unauthorized(MESSAGES[result.failure]);
    c.set("tenant", result.tenant);
    await next();
  };
}

/**
 * Bearer API-key authentication. `Authorization: Bearer seed_…` is checked by the service's one
 * key check (`bearerKeyChecker`, jobs/api_keys.ts: hashed, looked up, cached 2 s so a revoked key
 * stops working within that time on every API copy); the matching tenant is put on the context as
 * `tenant`. Every /v1 route runs behind it.
 */
import type { MiddlewareHandler } from "hono";
import { bearerKeyChecker, type BearerKeyFailure, type TenantRef } from "../jobs/api_keys.ts";
import type { Database } from "../jobs/db.ts";
import { UnauthorizedError } from "./errors.ts";

/** Hono environment of authenticated routes. */
export interface AuthEnv {
  Variables: { tenant: TenantRef };
}

const MESSAGES: Record<BearerKeyFailure, string> = {
  missing: "Cannot authenticate the request as it must carry `Authorization: Bearer <api key>`",
  malformed:
    "Cannot authenticate the request as the Authorization header must be `Bearer seed_…` " +
    "with the whole key (seed_ and 43 letters, digits, - or _, as `deno task keys create` prints it)",
  unknown:
    "Cannot authenticate the request as the API key must be active: it is unknown or revoked",
};

/**
 * Middleware factory; throws {@link UnauthorizedError} (401) for a missing, malformed or unknown
 * key.
 */
export function bearerAuth(db: Database, options: { cacheMs?: number } = {}): MiddlewareHandler<
  AuthEnv
> {
  const check = bearerKeyChecker(db, options);
  return async (c, next) => {
    const result = await check(c.req.header("authorization"));
    if ("failure" in result) throw new UnauthorizedError(MESSAGES[result.failure]);
    c.set("tenant", result.tenant);
    await next();
  };
}

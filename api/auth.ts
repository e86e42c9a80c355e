/**
 * Bearer API-key authentication. `Authorization: Bearer seed_…` is hashed (SHA-256) and looked
 * up; the matching tenant is put on the context as `tenant`. Every /v1 route runs behind it.
 *
 * Lookups are cached per key hash for `cacheMs` (default 2 s, bounded to 10,000 entries), so a
 * revoked key stops working within that time on every API copy.
 */
import type { MiddlewareHandler } from "hono";
import { API_KEY_PATTERN, hashKey, resolveKey, type TenantRef } from "./api_keys.ts";
import type { Database } from "../jobs/db.ts";
import { UnauthorizedError } from "./errors.ts";

/** Hono environment of authenticated routes. */
export interface AuthEnv {
  Variables: { tenant: TenantRef };
}

const MAX_CACHE_ENTRIES = 10_000;

/** Middleware factory; throws {@link UnauthorizedError} (401) for a missing, malformed or unknown key. */
export function bearerAuth(db: Database, options: { cacheMs?: number } = {}): MiddlewareHandler<
  AuthEnv
> {
  const cacheMs = options.cacheMs ?? 2_000;
  const cache = new Map<string, { tenant: TenantRef | undefined; until: number }>();
  return async (c, next) => {
    const header = c.req.header("authorization");
    if (!header) {
      throw new UnauthorizedError(
        "Cannot authenticate the request as it must carry `Authorization: Bearer <api key>`",
      );
    }
    const m = header.match(/^Bearer\s+(\S+)\s*$/i);
    if (!m || !API_KEY_PATTERN.test(m[1])) {
      throw new UnauthorizedError(
        "Cannot authenticate the request as the Authorization header must be `Bearer seed_…`",
      );
    }
    const hash = hashKey(m[1]);
    const now = Date.now();
    let hit = cache.get(hash);
    if (!hit || hit.until < now) {
      hit = { tenant: await resolveKey(db, m[1]), until: now + cacheMs };
      if (cache.size >= MAX_CACHE_ENTRIES) cache.clear();
      if (cacheMs > 0) cache.set(hash, hit);
    }
    if (!hit.tenant) {
      throw new UnauthorizedError(
        "Cannot authenticate the request as the API key must be active: it is unknown or revoked",
      );
    }
    c.set("tenant", hit.tenant);
    await next();
  };
}

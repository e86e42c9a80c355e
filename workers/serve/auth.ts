/**
 * Bearer API keys for the inference server: the job API's keys and tenants (jobs/api_keys.ts),
 * looked up by hash and cached for `cacheMs` (default 2 s, at most 10,000 keys), so a revoked
 * key stops working within that time, as on the job API. Errors are OpenAI-shaped 401s.
 */
import type { MiddlewareHandler } from "hono";
import {
  API_KEY_PATTERN,
  type Database,
  hashKey,
  resolveKey,
  type TenantRef,
} from "../../jobs/mod.ts";
import { unauthorized } from "./errors.ts";

/** Hono environment of authenticated routes. */
export interface ServeAuthEnv {
  Variables: { tenant: TenantRef };
}

const MAX_CACHE_ENTRIES = 10_000;

/** Middleware: sets `tenant` or throws a 401 ServeError. */
export function apiKeyAuth(
  db: Database,
  options: { cacheMs?: number } = {},
): MiddlewareHandler<ServeAuthEnv> {
  const cacheMs = options.cacheMs ?? 2_000;
  const cache = new Map<string, { tenant: TenantRef | undefined; until: number }>();
  return async (c, next) => {
    const header = c.req.header("authorization");
    if (!header) {
      throw unauthorized(
        "You didn't provide an API key: send `Authorization: Bearer <api key>` (a key of the job API)",
      );
    }
    const m = header.match(/^Bearer\s+(\S+)\s*$/i);
    if (!m || !API_KEY_PATTERN.test(m[1])) {
      throw unauthorized("Incorrect API key provided: keys look like `seed_…`");
    }
    const hash = hashKey(m[1]);
    const now = Date.now();
    let hit = cache.get(hash);
    if (!hit || hit.until < now) {
      hit = { tenant: await resolveKey(db, m[1]), until: now + cacheMs };
      if (cache.size >= MAX_CACHE_ENTRIES) cache.clear();
      if (cacheMs > 0) cache.set(hash, hit);
    }
    if (!hit.tenant) throw unauthorized("Incorrect API key provided: it is unknown or revoked");
    c.set("tenant", hit.tenant);
    await next();
  };
}

/**
 * API keys: generation, hashing and the key table's operations (create, list, revoke, resolve),
 * shared by the job API (api/auth.ts) and the inference server (workers/serve/auth.ts).
 *
 * A key is `seed_` + 43 base64url characters (32 random bytes). Only its hex SHA-256 is stored;
 * the first 12 characters are kept as `prefix` so people can tell keys apart in listings.
 */
import { createHash, randomBytes } from "node:crypto";
import { and, asc, eq, isNull } from "drizzle-orm";
import { apiKeys, tenants } from "./schema.ts";
import type { Database } from "./db.ts";

/** Shape of a key: `seed_` then 43 base64url characters. */
export const API_KEY_PATTERN = /^seed_[A-Za-z0-9_-]{43}$/;
/** Characters of a key kept in the clear as its `prefix`. */
export const KEY_PREFIX_CHARS = 12;

/** The tenant a request acts for. */
export interface TenantRef {
  id: string;
  name: string;
}

/** A key as listed (never the secret). */
export interface KeyInfo {
  id: string;
  tenant: string;
  name: string | null;
  prefix: string;
  created_at: string;
  revoked_at: string | null;
}

/** Thrown by {@link revokeKey} when no key matches. */
export class KeyNotFoundError extends Error {
  constructor(ref: string) {
    super(`Cannot revoke key ${ref} as it must be an existing key id or prefix: none matched`);
    this.name = "KeyNotFoundError";
  }
}

/** Returns a fresh random API key (shown to its owner once). */
export function generateKey(): string {
  return `seed_${randomBytes(32).toString("base64url")}`;
}

/** Lowercase hex SHA-256 of a key: what the database stores. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** Returns the tenant named `name`, creating it when absent. */
export async function ensureTenant({ orm: db }: Database, name: string): Promise<TenantRef> {
  await db.insert(tenants).values({ name }).onConflictDoNothing({ target: tenants.name });
  const [row] = await db.select({ id: tenants.id, name: tenants.name }).from(tenants)
    .where(eq(tenants.name, name));
  return row;
}

/** Creates a key for tenant `tenant` (creating the tenant if needed); returns the secret once. */
export async function createKey(
  database: Database,
  tenant: string,
  options: { name?: string } = {},
): Promise<{ key: string; info: KeyInfo }> {
  const db = database.orm;
  const t = await ensureTenant(database, tenant);
  const key = generateKey();
  const [row] = await db.insert(apiKeys).values({
    tenantId: t.id,
    name: options.name ?? null,
    prefix: key.slice(0, KEY_PREFIX_CHARS),
    hash: hashKey(key),
  }).returning();
  return { key, info: keyInfo(row, t.name) };
}

function keyInfo(row: typeof apiKeys.$inferSelect, tenant: string): KeyInfo {
  return {
    id: row.id,
    tenant,
    name: row.name,
    prefix: row.prefix,
    created_at: row.createdAt.toISOString(),
    revoked_at: row.revokedAt?.toISOString() ?? null,
  };
}

/** Lists keys, optionally of one tenant, oldest first. */
export async function listKeys({ orm: db }: Database, tenant?: string): Promise<KeyInfo[]> {
  const rows = await db.select({ key: apiKeys, tenant: tenants.name }).from(apiKeys)
    .innerJoin(tenants, eq(apiKeys.tenantId, tenants.id))
    .where(tenant === undefined ? undefined : eq(tenants.name, tenant))
    .orderBy(asc(apiKeys.createdAt), asc(apiKeys.id));
  return rows.map((r) => keyInfo(r.key, r.tenant));
}

/**
 * Revokes the key whose id (uuid) or prefix is `ref`; revoking twice keeps the first time.
 * Throws {@link KeyNotFoundError} when nothing matches.
 */
export async function revokeKey({ orm: db }: Database, ref: string): Promise<KeyInfo> {
  const isUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(ref);
  const match = isUuid ? eq(apiKeys.id, ref) : eq(apiKeys.prefix, ref);
  await db.update(apiKeys).set({ revokedAt: new Date() }).where(
    and(match, isNull(apiKeys.revokedAt)),
  );
  const rows = await db.select({ key: apiKeys, tenant: tenants.name }).from(apiKeys)
    .innerJoin(tenants, eq(apiKeys.tenantId, tenants.id)).where(match);
  if (rows.length === 0) throw new KeyNotFoundError(ref);
  return keyInfo(rows[0].key, rows[0].tenant);
}

/** The tenant of an active (unrevoked) key, or undefined for an unknown or revoked key. */
export async function resolveKey(
  { orm: db }: Database,
  key: string,
): Promise<TenantRef | undefined> {
  const [row] = await db.select({ id: tenants.id, name: tenants.name }).from(apiKeys)
    .innerJoin(tenants, eq(apiKeys.tenantId, tenants.id))
    .where(and(eq(apiKeys.hash, hashKey(key)), isNull(apiKeys.revokedAt)));
  return row;
}

/** Why an `Authorization` header did not name an active key. */
export type BearerKeyFailure = "missing" | "malformed" | "unknown";

/** The outcome of checking one `Authorization` header. */
export type BearerKeyCheck = { tenant: TenantRef } | { failure: BearerKeyFailure };

/** Most keys {@link bearerKeyChecker} keeps in its cache; a full cache is cleared. */
const MAX_CACHED_KEYS = 10_000;

/**
 * The one check of a bearer API key, shared by the job API (api/auth.ts) and the inference server
 * (workers/serve/auth.ts), which differ only in how they answer a failure. The returned function
 * reads `Authorization: Bearer seed_…` (scheme case-insensitive) and resolves the key's tenant;
 * lookups are cached per key hash for `cacheMs` milliseconds (default 2,000; 0 = no cache), so a
 * revoked key stops working within that time on every process.
 */
export function bearerKeyChecker(
  db: Database,
  options: { cacheMs?: number } = {},
): (authorization: string | undefined) => Promise<BearerKeyCheck> {
  const cacheMs = options.cacheMs ?? 2_000;
  const cache = new Map<string, { tenant: TenantRef | undefined; until: number }>();
  return async (authorization) => {
    if (!authorization) return { failure: "missing" };
    const m = authorization.match(/^Bearer\s+(\S+)\s*$/i);
    if (!m || !API_KEY_PATTERN.test(m[1])) return { failure: "malformed" };
    const hash = hashKey(m[1]);
    const now = Date.now();
    let hit = cache.get(hash);
    if (!hit || hit.until < now) {
      hit = { tenant: await resolveKey(db, m[1]), until: now + cacheMs };
      if (cache.size >= MAX_CACHED_KEYS) cache.clear();
      if (cacheMs > 0) cache.set(hash, hit);
    }
    return hit.tenant ? { tenant: hit.tenant } : { failure: "unknown" };
  };
}

/**
 * Tenant secrets (workers/seed/README.md, "Secrets"): named values a tenant stores once (`PUT
 * /v1/secrets/{name}`) and a JobSpec names, e.g. an LLM annotator's API key. Values are encrypted
 * at rest with AES-256-GCM under the service's secrets key ({@link SecretCipher}); the tenant id
 * and the name are the associated data, so a row moved to another tenant or name does not
 * decrypt. Nothing here returns a value except {@link readSecretValue}, which only workers call.
 */
import type { Queryable } from "./db.ts";
import { dataDirFromEnv } from "./db.ts";
import { readOrCreateSecret } from "./embedded/_secret_file.ts";
import { toDate } from "./_rows.ts";

/** A secret name: a letter, then letters, digits, `_` or `-`; at most 64 characters. */
export const SECRET_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,63}$/;
/** Largest secret value, in UTF-8 bytes. */
export const MAX_SECRET_VALUE_BYTES = 8_192;

/** Thrown when a stored secret cannot be decrypted (another secrets key, or a tampered row). */
export class SecretKeyError extends Error {
  override name = "SecretKeyError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
const unb64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

/** AES-256-GCM encryption of secret values under one 256-bit key. */
export class SecretCipher {
  readonly #key: Promise<CryptoKey>;

  /** @param keyHex the key, 64 hex digits. @throws RangeError when it is not. */
  constructor(keyHex: string) {
    if (!/^[0-9a-f]{64}$/i.test(keyHex)) {
      throw new RangeError(
        "Cannot use the secrets key as it must be 64 hex digits (256 bits): current value is not",
      );
    }
    const raw = Uint8Array.from(keyHex.match(/../g)!, (h) => parseInt(h, 16));
    this.#key = crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  }

  /** Encrypts `value` for `(tenantId, name)`: base64 nonce (12 bytes) and ciphertext + tag. */
  async encrypt(
    tenantId: string,
    name: string,
    value: string,
  ): Promise<{ nonce: string; ciphertext: string }> {
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const data = new TextEncoder().encode(value);
    const sealed = await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: aad(tenantId, name) },
      await this.#key,
      data,
    );
    return { nonce: b64(iv), ciphertext: b64(new Uint8Array(sealed)) };
  }

  /**
   * Decrypts a value stored for `(tenantId, name)`.
   * @throws SecretKeyError when the key differs from the one it was stored with, or the row was
   *   altered or moved.
   */
  async decrypt(
    tenantId: string,
    name: string,
    sealed: { nonce: string; ciphertext: string },
  ): Promise<string> {
    try {
      const plain = await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: unb64(sealed.nonce), additionalData: aad(tenantId, name) },
        await this.#key,
        unb64(sealed.ciphertext),
      );
      return new TextDecoder().decode(plain);
    } catch (cause) {
      throw new SecretKeyError(
        `Cannot decrypt secret ${name} as the service's secrets key must be the one it was stored with (SEED_SECRETS_KEY): it is not`,
        { cause },
      );
    }
  }
}

function aad(tenantId: string, name: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(`seed-secret:${tenantId}:${name}`);
}

/**
 * The service's cipher: `SEED_SECRETS_KEY` (64 hex digits) when set, else the key file
 * `secrets.key` of `SEED_DATA_DIR` (created on first use, mode 0600; enough when the API and the
 * workers share that folder). Deployments over several machines set `SEED_SECRETS_KEY` on each.
 */
export function secretCipherFromEnv(): SecretCipher {
  const key = Deno.env.get("SEED_SECRETS_KEY");
  if (key) return new SecretCipher(key.trim());
  const dir = dataDirFromEnv();
  Deno.mkdirSync(dir, { recursive: true });
  return new SecretCipher(readOrCreateSecret(`${dir}/secrets.key`));
}

/** What a listing shows of a secret: never its value. */
export interface SecretInfo {
  name: string;
  createdAt: Date;
  updatedAt: Date;
}

const SQL = {
  /** putSecret: insert or replace; `inserted` tells which. */
  putSecret: `insert into tenant_secrets (tenant_id, name, nonce, ciphertext)
    values ($1::uuid, $2::text, $3::text, $4::text)
    on conflict (tenant_id, name) do update
      set nonce = excluded.nonce, ciphertext = excluded.ciphertext, updated_at = now()
    returning name, created_at, updated_at, (xmax = 0) as inserted`,
  /** listSecrets: the tenant's secret names, by name. */
  listSecrets: `select name, created_at, updated_at from tenant_secrets
    where tenant_id = $1::uuid order by name`,
  /** getSecretInfo: one secret's name and dates. */
  getSecretInfo: `select name, created_at, updated_at from tenant_secrets
    where tenant_id = $1::uuid and name = $2::text`,
  /** readSecret: one secret's ciphertext. */
  readSecret: `select nonce, ciphertext from tenant_secrets
    where tenant_id = $1::uuid and name = $2::text`,
  /**
   * deleteSecret: deletes one secret unless a queued, running or cancelling job of the tenant
   * names it as its annotator's credential or a rollout endpoint's `api_key_secret` (those rows
   * locked FOR SHARE, so a racing submit
   * either sees the secret or is seen here); returns its name.
   */
  deleteSecret: `with users as (
      select id from jobs
      where tenant_id = $1::uuid and status in ('queued', 'running', 'cancelling')
        and (spec->'warmup'->'analyzer'->'annotator'->>'credential_secret' = $2::text
          or spec->'rollout'->'engine'->'endpoints'
            @> jsonb_build_array(jsonb_build_object('api_key_secret', $2::text)))
      for share)
    delete from tenant_secrets where tenant_id = $1::uuid and name = $2::text
      and not exists (select 1 from users)
    returning name`,
  /** secretUsers: ids of the tenant's active jobs whose annotator or rollout endpoint names it. */
  secretUsers: `select id from jobs
    where tenant_id = $1::uuid and status in ('queued', 'running', 'cancelling')
      and (spec->'warmup'->'analyzer'->'annotator'->>'credential_secret' = $2::text
        or spec->'rollout'->'engine'->'endpoints'
          @> jsonb_build_array(jsonb_build_object('api_key_secret', $2::text)))
    order by queued_at limit 10`,
} as const;

function toInfo(r: Record<string, unknown>): SecretInfo {
  return {
    name: String(r.name),
    createdAt: toDate(r.created_at)!,
    updatedAt: toDate(r.updated_at)!,
  };
}

/**
 * Stores `value` as the tenant's secret `name` (encrypted), replacing an earlier value.
 * @returns its listing and whether it was new.
 * @throws RangeError when the name or value is out of bounds (the API checks both first).
 */
export async function putSecret(
  db: Queryable,
  cipher: SecretCipher,
  input: { tenantId: string; name: string; value: string },
): Promise<SecretInfo & { created: boolean }> {
  const { tenantId, name, value } = input;
  if (!SECRET_NAME_PATTERN.test(name)) {
    throw new RangeError(`Cannot store secret as its name must match ${SECRET_NAME_PATTERN}`);
  }
  const bytes = new TextEncoder().encode(value).length;
  if (bytes === 0 || bytes > MAX_SECRET_VALUE_BYTES) {
    throw new RangeError(
      `Cannot store secret ${name} as its value must be 1-${MAX_SECRET_VALUE_BYTES} bytes: current size is ${bytes}`,
    );
  }
  const sealed = await cipher.encrypt(tenantId, name, value);
  const [row] = await db.query(SQL.putSecret, [tenantId, name, sealed.nonce, sealed.ciphertext]);
  return { ...toInfo(row), created: row.inserted === true };
}

/** The tenant's secrets (names and dates only), by name. */
export async function listSecrets(db: Queryable, tenantId: string): Promise<SecretInfo[]> {
  return (await db.query(SQL.listSecrets, [tenantId])).map(toInfo);
}

/** One secret's name and dates; null when the tenant has none of that name. */
export async function getSecretInfo(
  db: Queryable,
  tenantId: string,
  name: string,
): Promise<SecretInfo | null> {
  if (!SECRET_NAME_PATTERN.test(name)) return null;
  const [row] = await db.query(SQL.getSecretInfo, [tenantId, name]);
  return row ? toInfo(row) : null;
}

/**
 * Deletes one secret: true when deleted, `{usedBy}` (job ids) when a queued, running or
 * cancelling job still names it (nothing deleted), false when the tenant has none of that name.
 */
export async function deleteSecret(
  db: Queryable,
  tenantId: string,
  name: string,
): Promise<boolean | { usedBy: string[] }> {
  if (!SECRET_NAME_PATTERN.test(name)) return false;
  if ((await db.query(SQL.deleteSecret, [tenantId, name])).length > 0) return true;
  const users = await db.query(SQL.secretUsers, [tenantId, name]);
  if (users.length) return { usedBy: users.map((r) => String(r.id)) };
  return false;
}

/**
 * The decrypted value of the tenant's secret `name`; null when there is none. Workers only: the
 * API never returns a value.
 * @throws SecretKeyError when it does not decrypt under `cipher`.
 */
export async function readSecretValue(
  db: Queryable,
  cipher: SecretCipher,
  tenantId: string,
  name: string,
): Promise<string | null> {
  if (!SECRET_NAME_PATTERN.test(name)) return null;
  const [row] = await db.query<{ nonce: string; ciphertext: string }>(SQL.readSecret, [
    tenantId,
    name,
  ]);
  return row ? await cipher.decrypt(tenantId, name, row) : null;
}

/**
 * Uploaded models (api/README.md, "Bring your own model"): rows of the `models` table, tenant-scoped.
 * The API uploads a folder's files under {@link modelPrefix} first and commits the row last
 * (`commitModel`); a row is only ever written for a folder that passed validation.
 */
import type { Queryable } from "./db.ts";
import type { CheckpointFile, Model } from "./schema.ts";
import { activeBaseChain, toDate } from "./_rows.ts";

/**
 * `chain(active_id, base, depth)`: each of the tenant's queued/running/cancelling jobs with its
 * `model.base`, then, while that is `job:<uuid>[@step]`, the base of the job it names (at most 16
 * links, as api/spec_refs.ts `rootModelBase` follows): a job continuing a LoRA job on a model uses
 * that model too. Its rows are not locked (a recursive query cannot be), so only direct users are
 * fenced against a racing submit; an indirect user submitted during a delete fails at its worker
 * with a clear "no such model" error.
 */
const CHAIN = activeBaseChain("$1");

const SQL = {
  /**
   * commitModel: the model's row; with an idempotency key already used by this tenant nothing
   * is inserted (the caller then reads the existing row).
   */
  commitModel: `insert into models (id, tenant_id, name, architecture, config, parameter_count,
      files, bytes, idempotency_key, request_sha256)
    values ($1::uuid, $2::uuid, $3::text, $4::text, $5::jsonb, $6::bigint, $7::jsonb, $8::bigint,
      $9::text, $10::text)
    on conflict (tenant_id, idempotency_key) do nothing
    returning *`,
  /** modelByIdempotencyKey: the tenant's model uploaded with this key. */
  modelByIdempotencyKey:
    `select * from models where tenant_id = $1::uuid and idempotency_key = $2::text`,
  /** getModel: one model of the tenant. */
  getModel: `select * from models where tenant_id = $1::uuid and id = $2::uuid`,
  /** listModels: the tenant's models, newest first. */
  listModels: `select * from models where tenant_id = $1::uuid order by created_at desc, id`,
  /**
   * deleteModel: deletes the tenant's model unless a queued, running or cancelling job of the
   * tenant names it as `model.base` (the job row is locked FOR SHARE, so a submit racing the
   * delete either sees the model or is seen here). Returns the deleted row.
   */
  deleteModel: `with users as (
      select id from jobs
      where tenant_id = $1::uuid and status in ('queued', 'running', 'cancelling')
        and spec->'model'->>'base' = 'model:' || $2::text
      for share)
    delete from models where tenant_id = $1::uuid and id = $2::uuid
      and not exists (select 1 from users)
    returning *`,
  /** modelUsers: ids of the tenant's active jobs that use the model, directly or by a job: chain. */
  modelUsers: `with recursive ${CHAIN}
    select distinct c.active_id as id, j.queued_at from chain c join jobs j on j.id = c.active_id
    where c.base = 'model:' || $2::text
    order by j.queued_at limit 10`,
} as const;

/** Maps a `models` row (either driver). */
function toModel(r: Record<string, unknown>): Model {
  return {
    id: String(r.id),
    tenantId: String(r.tenant_id),
    name: r.name === null || r.name === undefined ? null : String(r.name),
    architecture: String(r.architecture),
    config: r.config,
    parameterCount: Number(r.parameter_count),
    files: r.files as CheckpointFile[],
    bytes: Number(r.bytes),
    idempotencyKey: r.idempotency_key === null ? null : String(r.idempotency_key),
    requestSha256: String(r.request_sha256),
    createdAt: toDate(r.created_at)!,
  };
}

/** `tenants/{tenant}/models/{model}/`: where an uploaded model's files live. */
export function modelPrefix(tenantId: string, modelId: string): string {
  if (!/^[0-9a-f-]{36}$/.test(tenantId) || !/^[0-9a-f-]{36}$/.test(modelId)) {
    throw new RangeError(
      `Cannot build a model prefix as the tenant and model ids must be uuids: current values are ${tenantId} and ${modelId}`,
    );
  }
  return `tenants/${tenantId}/models/${modelId}/`;
}

/** A validated model to commit. */
export interface ModelInput {
  id: string;
  tenantId: string;
  name: string | null;
  architecture: string;
  config: Record<string, unknown>;
  parameterCount: number;
  files: CheckpointFile[];
  idempotencyKey?: string;
  /** Hex SHA-256 of the uploaded archive. */
  requestSha256: string;
}

/**
 * Commits a model's row (its files are already in the store). With an idempotency key the
 * tenant already used, nothing is inserted and the earlier model comes back with
 * `created: false` — unless that upload had other bytes or another name: then `conflict` is the
 * earlier model and nothing changes.
 */
export async function commitModel(
  db: Queryable,
  input: ModelInput,
): Promise<{ model: Model; created: boolean; conflict?: undefined } | { conflict: Model }> {
  const bytes = input.files.reduce((s, f) => s + f.bytes, 0);
  const rows = await db.query(SQL.commitModel, [
    input.id,
    input.tenantId,
    input.name,
    input.architecture,
    JSON.stringify(input.config),
    input.parameterCount,
    JSON.stringify(input.files),
    bytes,
    input.idempotencyKey ?? null,
    input.requestSha256,
  ]);
  if (rows.length) return { model: toModel(rows[0]), created: true };
  const earlier = await modelByIdempotencyKey(db, input.tenantId, input.idempotencyKey!);
  if (!earlier) throw new Error("Cannot commit the model: its idempotency key row vanished");
  if (earlier.requestSha256 !== input.requestSha256 || earlier.name !== input.name) {
    return { conflict: earlier };
  }
  return { model: earlier, created: false };
}

/** The tenant's model uploaded with `key`, or null. */
export async function modelByIdempotencyKey(
  db: Queryable,
  tenantId: string,
  key: string,
): Promise<Model | null> {
  const rows = await db.query(SQL.modelByIdempotencyKey, [tenantId, key]);
  return rows.length ? toModel(rows[0]) : null;
}

/** One model of the tenant, or null (another tenant's model reads as missing). */
export async function getModel(
  db: Queryable,
  tenantId: string,
  modelId: string,
): Promise<Model | null> {
  if (!/^[0-9a-f-]{36}$/.test(modelId)) return null;
  const rows = await db.query(SQL.getModel, [tenantId, modelId]);
  return rows.length ? toModel(rows[0]) : null;
}

/** The tenant's models, newest first. */
export async function listModels(db: Queryable, tenantId: string): Promise<Model[]> {
  return (await db.query(SQL.listModels, [tenantId])).map(toModel);
}

/**
 * Deletes the tenant's model row (the caller deletes its objects after). Answers the deleted
 * row, `{ usedBy }` with the ids of the queued/running/cancelling jobs that name it (nothing
 * deleted), or null when the tenant has no such model.
 */
export async function deleteModel(
  db: Queryable,
  tenantId: string,
  modelId: string,
): Promise<Model | { usedBy: string[] } | null> {
  if (!/^[0-9a-f-]{36}$/.test(modelId)) return null;
  // Users through a job: chain first (unlocked, see CHAIN); direct users are fenced in the delete.
  const indirect = await db.query(SQL.modelUsers, [tenantId, modelId]);
  if (indirect.length) return { usedBy: indirect.map((r) => String(r.id)) };
  const rows = await db.query(SQL.deleteModel, [tenantId, modelId]);
  if (rows.length) return toModel(rows[0]);
  const users = await db.query(SQL.modelUsers, [tenantId, modelId]);
  if (users.length) return { usedBy: users.map((r) => String(r.id)) };
  return null;
}

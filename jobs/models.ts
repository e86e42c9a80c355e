/**
 * Uploaded models (api/README.md, "Bring your own model"): rows of the `models` table,
 * tenant-scoped. The API uploads a folder's files under {@link modelPrefix} first and commits the
 * row last (`commitModel`); a row is only ever written for a folder that passed validation.
 */
import type { Database, Queryable } from "./db.ts";
import type { CheckpointFile, Model } from "./schema.ts";
import { activeBaseChain, toDate } from "./_rows.ts";

/**
 * `chain(user_id, base, depth)`: each of the tenant's queued/running/cancelling jobs with its
 * `model.base`, then, while that is `job:<uuid>[@step]` naming a job with adapter-only
 * checkpoints, the base of that job (jobs/_rows.ts `baseChain`): a job continuing a LoRA job on a
 * model uses that model too. Direct and indirect users alike are fenced against a racing submit:
 * the submit locks the model at the root of its base's chain (jobs/queue.ts `submitJob` with
 * `requireBase`).
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
   * lockModel: the tenant's model, locked FOR UPDATE until the delete commits. A submit whose
   * `model.base` is the model, or a `job:` chain ending at it, locks it FOR SHARE in its insert's
   * transaction (jobs/queue.ts `SQL.lockBaseModel`), so the delete either waits for that submit
   * and then sees its job in `modelUsers` (a new statement, a new snapshot), or the submit waits
   * and finds no row. This is the only lock the delete takes (see jobs/queue.ts `submitJob` on
   * why that keeps the two free of deadlocks).
   */
  lockModel: `select id from models where tenant_id = $1::uuid and id = $2::uuid for update`,
  /** deleteModel: the locked model's row (`lockModel`), once `modelUsers` found no user. */
  deleteModel: `delete from models where tenant_id = $1::uuid and id = $2::uuid returning *`,
  /**
   * modelUsers: ids of the tenant's active jobs that use the model, directly or by a job: chain.
   */
  modelUsers: `with recursive ${CHAIN}
    select distinct c.user_id as id, j.queued_at from chain c join jobs j on j.id = c.user_id
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
 * Deletes the tenant's model row (the caller deletes its objects after), in one transaction:
 * locks the row (SQL.lockModel), looks for users, deletes. Answers the deleted row, `{ usedBy }`
 * with the ids of the queued/running/cancelling jobs that use it, directly or through a `job:`
 * chain (nothing deleted), or null when the tenant has no such model. A submit naming the model,
 * directly or through a `job:` chain, that races this delete is ordered by the row lock: either
 * its job is among the users, or it finds the model gone (jobs/queue.ts `submitJob` with
 * `requireBase`).
 */
export async function deleteModel(
  db: Database,
  tenantId: string,
  modelId: string,
): Promise<Model | { usedBy: string[] } | null> {
  if (!/^[0-9a-f-]{36}$/.test(modelId)) return null;
  const params = [tenantId, modelId];
  return await db.transaction(async (tx) => {
    const [row] = await tx.query(SQL.lockModel, params);
    if (!row) return null;
    const users = await tx.query(SQL.modelUsers, params);
    if (users.length) return { usedBy: users.map((r) => String(r.id)) };
    return toModel((await tx.query(SQL.deleteModel, params))[0]);
  });
}

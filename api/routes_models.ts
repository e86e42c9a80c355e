/**
 * Model routes (api/README.md, "Bring your own model"): `POST /v1/models` uploads a Hugging Face
 * folder as a tar stream (`content-type: application/x-tar`; `?name=` labels it; idempotent with
 * `Idempotency-Key`), `GET /v1/models`, `GET /v1/models/{id}`, `DELETE /v1/models/{id}` (409 while
 * a queued or running job names it). An upload is validated (AppOptions `checkModel`) before its
 * row is written; on any failure its objects are deleted and no row exists.
 */
import type { Context } from "hono";
import { Hono } from "hono";
import type { AuthEnv } from "./auth.ts";
import type { AppOptions } from "./deps.ts";
import {
  commitModel,
  deleteModel,
  getModel,
  listModels,
  type Model,
  modelByIdempotencyKey,
  modelPrefix,
} from "../jobs/mod.ts";
import {
  cancelHint,
  ConflictError,
  NotFoundError,
  ProblemError,
  UnprocessableError,
  UnsupportedMediaTypeError,
} from "./errors.ts";
import { DEFAULT_MODEL_UPLOAD_LIMITS, emptyUploadError, readModelUpload } from "./model_upload.ts";
import { type ModelView, UploadModelQuery } from "./schemas.ts";
import { parseIdempotencyKey, parseQuery } from "./validate.ts";

/** The wire form of a model ({@link ModelView}, documented in the OpenAPI document). */
export function modelView(m: Model): ModelView {
  return {
    id: m.id,
    base: `model:${m.id}`,
    name: m.name,
    architecture: m.architecture,
    parameter_count: m.parameterCount,
    bytes: m.bytes,
    files: m.files.map((f) => ({ name: f.name, bytes: f.bytes, sha256: f.sha256 })),
    config: m.config as Record<string, unknown>,
    created_at: m.createdAt.toISOString(),
  };
}

function modelIdOf(c: Context): string {
  return c.req.param("id") ?? "";
}

const notFound = (id: string) =>
  new NotFoundError(`Cannot find model ${id}: no such model for this tenant`);

/** True when an upload repeats `earlier`'s request: the same archive bytes and `?name=`. */
function sameUpload(earlier: Model, upload: { sha256: string; name: string | null }): boolean {
  return earlier.requestSha256 === upload.sha256 && earlier.name === upload.name;
}

/** 409: an Idempotency-Key this tenant already used for another archive or name. */
function keyReused(key: string, earlier: Model): ConflictError {
  return new ConflictError(
    `Cannot reuse Idempotency-Key "${key}" as it must come with the same archive and name: it already uploaded model ${earlier.id} from a different request`,
  );
}

/** Mounts the model routes (relative to `/v1/models`). */
export function modelRoutes(options: AppOptions): Hono<AuthEnv> {
  const { db } = options;
  const app = new Hono<AuthEnv>();
  const limits = { ...DEFAULT_MODEL_UPLOAD_LIMITS, ...options.modelUploadLimits };

  app.post("/", async (c) => {
    const tenantId = c.get("tenant").id;
    const check = options.checkModel;
    if (!check) {
      throw new ProblemError(
        501,
        "not-implemented",
        "Not Implemented",
        "Cannot upload models as this server has no model check configured",
      );
    }
    const contentType = c.req.header("content-type");
    if ((contentType ?? "").split(";")[0].trim().toLowerCase() !== "application/x-tar") {
      throw new UnsupportedMediaTypeError(contentType, "application/x-tar");
    }
    const key = parseIdempotencyKey(c);
    const name = parseQuery(c, UploadModelQuery).name ?? null;
    const body = c.req.raw.body;
    if (!body) throw emptyUploadError();
    // A retry with a key this tenant used: the archive is read and hashed, never stored again.
    const earlier = key === undefined ? null : await modelByIdempotencyKey(db, tenantId, key);
    const id = crypto.randomUUID();
    const prefix = modelPrefix(tenantId, id);
    const store = earlier ? null : options.store;
    const upload = await readModelUpload(body, { store, prefix }, limits);
    const discard = () =>
      Promise.all(upload.files.map((f) => options.store.delete(f.key).catch(() => {})));
    if (earlier) {
      if (!sameUpload(earlier, { sha256: upload.sha256, name })) throw keyReused(key!, earlier);
      return c.json({
        ...modelView(earlier),
        skipped_files: upload.skipped,
        skipped_file_count: upload.skippedCount,
      }, 200);
    }
    let checked;
    try {
      checked = check({ small: upload.small, safetensors: upload.safetensors });
    } catch (e) {
      await discard();
      const where = e as { file?: unknown; field?: unknown; message?: unknown };
      if (typeof where.file !== "string") throw e;
      throw new UnprocessableError(String(where.message), {
        cause: e,
        errors: [{
          path: `${where.file}:${String(where.field ?? "-")}`,
          code: "invalid_model",
          message: String(where.message),
        }],
      });
    }
    const result = await commitModel(db, {
      id,
      tenantId,
      name,
      architecture: checked.architecture,
      config: checked.configJson,
      parameterCount: checked.parameterCount,
      files: upload.files,
      idempotencyKey: key,
      requestSha256: upload.sha256,
    }).catch(async (e) => {
      await discard();
      throw e;
    });
    if (result.conflict) {
      await discard();
      throw keyReused(key!, result.conflict);
    }
    if (!result.created) await discard(); // a concurrent retry with the same key won
    c.header("location", `/v1/models/${result.model.id}`);
    return c.json(
      {
        ...modelView(result.model),
        skipped_files: upload.skipped,
        skipped_file_count: upload.skippedCount,
      },
      result.created ? 201 : 200,
    );
  });

  app.get("/", async (c) => {
    const models = await listModels(db, c.get("tenant").id);
    return c.json({ models: models.map(modelView) });
  });

  app.get("/:id", async (c) => {
    const id = modelIdOf(c);
    const model = await getModel(db, c.get("tenant").id, id);
    if (!model) throw notFound(id);
    return c.json(modelView(model));
  });

  app.delete("/:id", async (c) => {
    const id = modelIdOf(c);
    const result = await deleteModel(db, c.get("tenant").id, id);
    if (!result) throw notFound(id);
    if ("usedBy" in result) {
      throw new ConflictError(
        `Cannot delete model ${id} as no queued, running or cancelling job may use it: job ${
          result.usedBy[0]
        } uses it as model.base (directly or through a job: continuation); wait for it to end, or ${
          cancelHint(result.usedBy[0])
        }`,
      );
    }
    await Promise.all(result.files.map((f) => options.store.delete(f.key)));
    return c.body(null, 204);
  });

  return app;
}

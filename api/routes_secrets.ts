/**
 * Secret routes (workers/seed/README.md, "Secrets"): `PUT /v1/secrets/{name}` with `{"value": "…"}`
 * stores a tenant secret (201 new, 200 replaced), `GET /v1/secrets` lists names and dates,
 * `GET /v1/secrets/{name}` shows one's name and dates, `DELETE /v1/secrets/{name}` (204; 409 while
 * a queued or running job names it). No
 * answer ever carries a value: a JobSpec names a secret (`warmup.analyzer.annotator
 * .credential_secret`) and only the worker reads it.
 */
import type { Context } from "hono";
import { Hono } from "hono";
import type { AuthEnv } from "./auth.ts";
import type { AppOptions } from "./deps.ts";
import {
  deleteSecret,
  getSecretInfo,
  listSecrets,
  putSecret,
  SECRET_NAME_PATTERN,
  type SecretCipher,
  secretCipherFromEnv,
  type SecretInfo,
} from "../jobs/mod.ts";
import { BadRequestError, cancelHint, ConflictError, NotFoundError } from "./errors.ts";
import { PutSecretBody, type SecretView } from "./schemas.ts";
import type { z } from "zod";
import { parseJsonBody } from "./validate.ts";

/** The wire form of a secret: its name and dates, never its value. */
export function secretView(s: SecretInfo): z.infer<typeof SecretView> {
  return {
    name: s.name,
    created_at: s.createdAt.toISOString(),
    updated_at: s.updatedAt.toISOString(),
  };
}

/** The `{name}` path parameter (400 naming it when it breaks the pattern). */
function nameOf(c: Context): string {
  const name = c.req.param("name") ?? "";
  if (!SECRET_NAME_PATTERN.test(name)) {
    const message = `must match ${SECRET_NAME_PATTERN.source}`;
    throw new BadRequestError(
      `Cannot use the secret name as it ${message}: current value is ${name.slice(0, 80)}`,
      { errors: [{ path: "name", code: "invalid_format", message: `Secret name ${message}` }] },
    );
  }
  return name;
}

const notFound = (name: string) =>
  new NotFoundError(`Cannot find secret ${name}: no such secret for this tenant`);

/** Mounts the secret routes (relative to `/v1/secrets`). */
export function secretRoutes(options: AppOptions): Hono<AuthEnv> {
  const { db } = options;
  let cipher: SecretCipher | undefined = options.secretCipher;
  const app = new Hono<AuthEnv>();

  app.put("/:name", async (c) => {
    const name = nameOf(c);
    const { value } = await parseJsonBody(c, PutSecretBody);
    cipher ??= secretCipherFromEnv();
    const stored = await putSecret(db, cipher, { tenantId: c.get("tenant").id, name, value });
    return c.json(secretView(stored), stored.created ? 201 : 200);
  });

  app.get("/", async (c) => {
    const secrets = await listSecrets(db, c.get("tenant").id);
    return c.json({ secrets: secrets.map(secretView) });
  });

  app.get("/:name", async (c) => {
    const name = nameOf(c);
    const info = await getSecretInfo(db, c.get("tenant").id, name);
    if (!info) throw notFound(name);
    return c.json(secretView(info));
  });

  app.delete("/:name", async (c) => {
    const name = nameOf(c);
    const result = await deleteSecret(db, c.get("tenant").id, name);
    if (result === false) throw notFound(name);
    if (result !== true) {
      throw new ConflictError(
        `Cannot delete secret ${name} as no queued or running job may use it: job ${
          result.usedBy[0]
        } names it as warmup.analyzer.annotator.credential_secret or a rollout.engine endpoint's api_key_secret; wait for it to end, or ${
          cancelHint(result.usedBy[0])
        }`,
      );
    }
    return c.body(null, 204);
  });
  return app;
}

/**
 * Submit-time tenancy check of the references a JobSpec can make to stored artifacts:
 * `model.base` = `job:<uuid>[@step]` (an earlier job's checkpoint), `model:<uuid>` (an uploaded
 * model) and `s3://bucket/…` URIs in
 * `model.base` and `warmup.data`. Workers read these with the service's own credentials, so
 * without this check a tenant could name another tenant's job, or another tenant's objects in the
 * service's bucket (`s3://seed/tenants/<other>/…`), train from them and download the result.
 */
import type { JobSpec } from "../jobs/mod.ts";
import {
  checkAnnotatorUrl,
  getJob,
  getModel,
  getSecretInfo,
  JOB_REF_PATTERN,
  MODEL_REF_PATTERN,
  OutboundUrlError,
} from "../jobs/mod.ts";
import type { Database } from "../jobs/db.ts";
import { type FieldIssue, UnprocessableError } from "./errors.ts";

const S3_URI = /^s3:\/\/([^/]+)\/(.*)$/;

/**
 * Throws {@link UnprocessableError} (422, field path `model.base` or `warmup.data`) when the spec
 * names a job that is not the tenant's (unknown or another tenant's: the same answer), an object
 * of the service's bucket `serviceBucket` outside `tenants/{tenantId}/`, or an object of another
 * bucket (the worker reads only `serviceBucket`, so such a job could only fail).
 */
export async function checkSpecRefs(
  db: Database,
  spec: JobSpec,
  ctx: { tenantId: string; serviceBucket: string },
): Promise<void> {
  const issues: FieldIssue[] = [];
  const ownPrefix = `tenants/${ctx.tenantId}/`;
  const s3Refs: [string, string | undefined][] = [
    ["model.base", spec.model.base],
    ["warmup.data", spec.warmup.data],
  ];
  for (const [path, value] of s3Refs) {
    const m = value === undefined ? null : S3_URI.exec(value);
    if (m && m[1] !== ctx.serviceBucket) {
      // The worker reads only the service's bucket (workers/worker/context.ts): refused here too,
      // instead of a job that is queued and then fails.
      issues.push({
        path,
        code: "other_bucket",
        message: `s3:// URIs must name the service's bucket ${ctx.serviceBucket}, not ${m[1]}`,
      });
    } else if (m && !m[2].startsWith(ownPrefix)) {
      issues.push({
        path,
        code: "foreign_object",
        message:
          `Objects of the service's bucket must be under s3://${ctx.serviceBucket}/${ownPrefix}`,
      });
    }
  }
  const job = JOB_REF_PATTERN.exec(spec.model.base);
  if (job && !(await getJob(db, { tenantId: ctx.tenantId, jobId: job[1] }))) {
    issues.push({
      path: "model.base",
      code: "unknown_job",
      message: `job:${job[1]} must name a job of this tenant`,
    });
  }
  const model = MODEL_REF_PATTERN.exec(spec.model.base);
  if (model && !(await getModel(db, ctx.tenantId, model[1]))) {
    issues.push({
      path: "model.base",
      code: "unknown_model",
      message: `model:${model[1]} must name a model of this tenant (POST /v1/models)`,
    });
  }
  if (issues.length === 0) return;
  throw new UnprocessableError(
    `Cannot queue the job as ${issues[0].path} must refer to this tenant's artifacts: ${
      issues[0].message
    }`,
    { errors: issues },
  );
}

/**
 * Most `job:` links {@link rootModelBase} follows (a chain longer than this is left unresolved).
 */
const MAX_BASE_LINKS = 16;

/**
 * The base a `job:<uuid>[@step]` model was trained from: follows `job:` → that job's `model.base`
 * through this tenant's jobs (at most {@link MAX_BASE_LINKS} links), so a submit-time check can
 * tell that a job continued from a `builtin:tiny` job has no image encoder either. Answers `base`
 * itself when it is not a job reference, and the last base reached when the chain meets a job
 * that is not this tenant's (checkSpecRefs reports it) or gets too long.
 */
export async function rootModelBase(
  db: Database,
  ref: { tenantId: string; base: string },
): Promise<string> {
  const { tenantId, base } = ref;
  let current = base;
  for (let i = 0; i < MAX_BASE_LINKS; i++) {
    const ref = JOB_REF_PATTERN.exec(current);
    if (!ref) return current;
    const job = await getJob(db, { tenantId, jobId: ref[1] });
    const next = (job?.spec as { model?: { base?: unknown } } | undefined)?.model?.base;
    if (typeof next !== "string") return current;
    current = next;
  }
  return current;
}

/**
 * Throws {@link UnprocessableError} (422) when `warmup.analyzer.annotator` (or an endpoint of
 * `rollout.engine`, the same rules at `rollout.engine.endpoints[i].base_url` and
 * `….api_key_secret`) names a
 * `credential_secret` the tenant has not stored (`…annotator.credential_secret`), or a
 * `base_url` the URL rules refuse (`…annotator.base_url`: internal hosts the operator did not
 * list in `SEED_ANNOTATOR_ALLOWED_HOSTS`, the service's own endpoints; jobs/outbound_url.ts).
 * A URL badly written (whitespace at the ends, another scheme, credentials) never gets here: the
 * JobSpec schema refuses it with a 400 (api/README.md, "400 or 422").
 * The worker checks both again when it runs the job.
 */
export async function checkAnnotator(
  db: Database,
  spec: JobSpec,
  ctx: { tenantId: string },
): Promise<void> {
  const uses: { at: string; baseUrl: string; secretField: string; secret?: string }[] = [];
  const annotator = spec.warmup.analyzer.annotator;
  if (annotator) {
    uses.push({
      at: "warmup.analyzer.annotator",
      baseUrl: annotator.base_url,
      secretField: "credential_secret",
      secret: annotator.credential_secret,
    });
  }
  const engine = spec.rollout.engine;
  if (engine !== "local") {
    engine.endpoints.forEach((e, i) =>
      uses.push({
        at: `rollout.engine.endpoints[${i}]`,
        baseUrl: e.base_url,
        secretField: "api_key_secret",
        secret: e.api_key_secret,
      })
    );
  }
  const issues: FieldIssue[] = [];
  for (const use of uses) {
    try {
      checkAnnotatorUrl(use.baseUrl, { field: `${use.at}.base_url` });
    } catch (e) {
      if (!(e instanceof OutboundUrlError)) throw e;
      issues.push({ path: `${use.at}.base_url`, code: "url_refused", message: e.message });
    }
    if (use.secret !== undefined && !(await getSecretInfo(db, ctx.tenantId, use.secret))) {
      issues.push({
        path: `${use.at}.${use.secretField}`,
        code: "unknown_secret",
        message:
          `Cannot use secret ${use.secret} as it must be a secret of this tenant (PUT /v1/secrets/{name})`,
      });
    }
  }
  if (issues.length === 0) return;
  throw new UnprocessableError(
    `Cannot queue the job as ${issues[0].path} must be usable: ${issues[0].message}`,
    { errors: issues },
  );
}

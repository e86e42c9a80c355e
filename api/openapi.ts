/**
 * The OpenAPI 3.1 document of the API, assembled by hand around JSON Schemas generated with
 * `z.toJSONSchema` from the same zod schemas the routes validate with (JobSpec from jobs/, query
 * and response schemas from api/schemas.ts). OpenAPI 3.1 uses JSON Schema 2020-12, zod's default
 * target, so the generated schemas are used as they are.
 */
import { z } from "zod";
import { JobLabelsInput, JobSpecSchema } from "../jobs/mod.ts";
import * as s from "./schemas.ts";

type Json = Record<string, unknown>;

function schema(zod: z.ZodType, io: "input" | "output" = "output"): Json {
  const out = z.toJSONSchema(zod, { io, unrepresentable: "any" }) as Json;
  delete out.$schema;
  return out;
}

function queryParams(zod: z.ZodObject): Json[] {
  return Object.entries(zod.shape).map(([name, field]) => {
    const s = schema(field as z.ZodType, "input");
    // An object parameter is sent as `name[key]=value` (`metadata[team]=nlp`).
    const deep = s.type === "object" ? { style: "deepObject", explode: true } : {};
    return { name, in: "query", required: false, ...deep, schema: s };
  });
}

/**
 * `POST /v1/jobs`'s body: the JobSpec's fields plus the label fields (jobs/labels.ts), which the
 * route parses apart (api/routes_jobs.ts `parseSubmitBody`).
 */
function jobSubmitSchema(): Json {
  const spec = schema(JobSpecSchema, "input");
  const labels = schema(JobLabelsInput, "input");
  return {
    ...spec,
    properties: {
      ...(spec.properties as Json),
      ...(labels.properties as Json),
    },
  };
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: string) => ({ "application/json": { schema: ref(name) } });
const problem = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: ref("Problem") } },
});
const ok = (description: string, content: Json) => ({ description, content });
const jobId = {
  name: "id",
  in: "path",
  required: true,
  schema: { type: "string", format: "uuid" },
};
/** `{id}` of a model: a uuid, like a job's. */
const modelId = jobId;
const step = { name: "step", in: "path", required: true, schema: { type: "integer", minimum: 0 } };
const errors = {
  "400": problem("Invalid query or path (errors[] holds zod field paths)"),
  "401": problem("Missing or invalid API key"),
  "404": problem("No such job for this tenant"),
};

/** Builds the OpenAPI 3.1 document (a plain JSON object). */
export function openApiDocument(): Json {
  return {
    openapi: "3.1.0",
    info: {
      title: "SEED job service",
      version: "1.0.0",
      description:
        "Submit SEED/GRPO/SFT training jobs, follow them live, download checkpoints and skill libraries. Errors are application/problem+json.",
    },
    servers: [{ url: "/" }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", bearerFormat: "seed_…" } },
      schemas: {
        JobSpecInput: schema(JobSpecSchema, "input"),
        JobSubmit: jobSubmitSchema(),
        JobSpec: schema(JobSpecSchema, "output"),
        Job: schema(s.JobView),
        JobList: schema(s.JobList),
        Event: schema(s.EventView),
        EventPage: schema(s.EventPage),
        MetricsSeries: schema(s.MetricsSeries),
        Checkpoint: schema(s.CheckpointView),
        CheckpointList: schema(s.CheckpointList),
        PresignedUrl: schema(s.PresignedUrl),
        Skills: schema(s.SkillsView),
        TrajectoryStepList: schema(s.TrajectoryStepList),
        Trajectories: schema(s.TrajectoriesView),
        EnvList: schema(s.EnvList),
        Model: schema(s.ModelView),
        ModelUpload: schema(s.ModelUploadView),
        ModelList: schema(s.ModelList),
        PutSecret: schema(s.PutSecretBody, "input"),
        Secret: schema(s.SecretView),
        SecretList: schema(s.SecretList),
        Problem: schema(s.ProblemView),
      },
    },
    paths: {
      "/v1/jobs": {
        post: {
          summary: "Submit a job",
          parameters: [{
            name: "Idempotency-Key",
            in: "header",
            required: false,
            schema: { type: "string", minLength: 1, maxLength: 255 },
          }],
          requestBody: { required: true, content: json("JobSubmit") },
          responses: {
            "201": ok("Job created", json("Job")),
            "200": ok("Same Idempotency-Key and body: the job created before", json("Job")),
            "400": problem("Malformed JSON or schema violation (errors[] holds field paths)"),
            "401": errors["401"],
            "409": problem("Idempotency-Key reused with a different body"),
            "413": problem("Body over the size limit"),
            "422": problem("Semantically invalid (e.g. unknown env id)"),
          },
        },
        get: {
          summary:
            "List jobs, newest first. With `Accept: text/event-stream`: the page live, as `event: jobs` messages (same JSON) sent at once and on every change",
          parameters: queryParams(s.ListJobsQuery),
          responses: {
            "200": ok("A page of jobs (or its live stream)", {
              ...json("JobList"),
              "text/event-stream": { schema: { type: "string" } },
            }),
            ...errors,
          },
        },
      },
      "/v1/jobs/{id}": {
        get: {
          summary: "A job: status, attempt, progress (stage/step/ETA), latest metrics, error",
          parameters: [jobId],
          responses: { "200": ok("The job", json("Job")), ...errors },
        },
        delete: {
          summary:
            "Delete a final job with everything it made: checkpoints, skill libraries, evaluations, trajectories and images, events and metrics",
          parameters: [jobId],
          responses: {
            "204": {
              description: "Deleted (a delete cut off part-way is finished by repeating it)",
            },
            "401": errors["401"],
            "404": errors["404"],
            "409": problem(
              "The job is queued, running or cancelling, or an active job trains from it",
            ),
          },
        },
      },
      "/v1/jobs/{id}/cancel": {
        post: {
          summary: "Request cancellation (queued → cancelled; running → cancelling)",
          parameters: [jobId],
          responses: {
            "202": ok("The job after the request", json("Job")),
            ...errors,
            "409": problem("The job has already ended (succeeded, failed or cancelled)"),
          },
        },
      },
      "/v1/jobs/{id}/events": {
        get: {
          summary:
            "Event log: JSON pages (after=), or with Accept: text/event-stream a live SSE stream resumable with Last-Event-ID that ends when the job is terminal",
          parameters: [jobId, ...queryParams(s.EventsQuery), {
            name: "Last-Event-ID",
            in: "header",
            required: false,
            schema: { type: "integer", minimum: 0 },
          }],
          responses: {
            "200": ok("Events", {
              ...json("EventPage"),
              "text/event-stream": { schema: { type: "string" } },
            }),
            ...errors,
          },
        },
      },
      "/v1/jobs/{id}/metrics": {
        get: {
          summary: "Per-step metrics series (JSON, or CSV with format=csv / Accept: text/csv)",
          parameters: [jobId, ...queryParams(s.MetricsQuery)],
          responses: {
            "200": ok("Series", {
              ...json("MetricsSeries"),
              "text/csv": { schema: { type: "string" } },
            }),
            ...errors,
          },
        },
      },
      "/v1/jobs/{id}/checkpoints": {
        get: {
          summary: "Checkpoints of a job with their files",
          parameters: [jobId],
          responses: { "200": ok("Checkpoints", json("CheckpointList")), ...errors },
        },
      },
      "/v1/jobs/{id}/checkpoints/{step}": {
        get: {
          summary: "One checkpoint of a job with its files (400 when step is no whole number)",
          parameters: [jobId, step],
          responses: { "200": ok("The checkpoint", json("Checkpoint")), ...errors },
        },
      },
      "/v1/jobs/{id}/checkpoints/{step}/archive": {
        get: {
          summary:
            "One tar of the checkpoint: SHA256SUMS first, then each file (streamed, each sha256 verified; a mismatch aborts the stream)",
          parameters: [jobId, step],
          responses: {
            "200": ok("The archive", {
              "application/x-tar": { schema: { type: "string", format: "binary" } },
            }),
            ...errors,
          },
        },
      },
      "/v1/jobs/{id}/checkpoints/{step}/files/{name}": {
        get: {
          summary: "A presigned URL of one checkpoint file (302, or JSON with redirect=false)",
          parameters: [
            jobId,
            step,
            {
              name: "name",
              in: "path",
              required: true,
              description:
                "A file name of the checkpoint, e.g. config.json or merged/config.json (the slash sent as is or as %2F)",
              schema: { type: "string" },
            },
            ...queryParams(s.FileQuery),
          ],
          responses: {
            "302": { description: "Redirect to the presigned URL" },
            "200": ok("The presigned URL and its expiry", json("PresignedUrl")),
            ...errors,
          },
        },
      },
      "/v1/jobs/{id}/skills": {
        get: {
          summary: "The skill library, latest or at ?step=",
          parameters: [jobId, ...queryParams(s.SkillsQuery)],
          responses: { "200": ok("The library", json("Skills")), ...errors },
        },
      },
      "/v1/jobs/{id}/skills/steps": {
        get: {
          summary: "The steps that have a skill library, with their skill counts",
          parameters: [jobId],
          responses: {
            "200": ok("Steps, ascending", {
              "application/json": {
                schema: {
                  type: "object",
                  properties: {
                    steps: {
                      type: "array",
                      items: {
                        type: "object",
                        properties: {
                          step: { type: "integer" },
                          attempt: { type: "integer" },
                          skill_count: { type: "integer" },
                          created_at: { type: "string", format: "date-time" },
                        },
                      },
                    },
                  },
                },
              },
            }),
            ...errors,
          },
        },
      },
      "/v1/jobs/{id}/trajectories": {
        get: {
          summary:
            "Without step: the steps that have trajectories. With step: that step's training rollouts and evaluation episodes (optionally of one split), each turn's image linked by URL",
          parameters: [jobId, ...queryParams(s.TrajectoriesQuery)],
          responses: {
            "200": ok("Steps (without step) or the step's trajectories (with step)", {
              "application/json": {
                schema: { oneOf: [ref("TrajectoryStepList"), ref("Trajectories")] },
              },
            }),
            ...errors,
            "404": problem("No such job for this tenant, or no trajectories at that step"),
            "502": problem("A stored object failed its SHA-256"),
          },
        },
      },
      "/v1/jobs/{id}/trajectories/{step}/images/{name}": {
        get: {
          summary: "One observation image (PNG) of a step's trajectories, SHA-256 checked",
          parameters: [
            jobId,
            step,
            { name: "name", in: "path", required: true, schema: { type: "string" } },
          ],
          responses: {
            "200": ok("The PNG", { "image/png": { schema: { type: "string", format: "binary" } } }),
            ...errors,
            "404": problem("No such job for this tenant, or no such image at that step"),
            "502": problem("The stored image failed its SHA-256"),
          },
        },
      },
      "/v1/envs": {
        get: {
          summary: "Environments the workers offer",
          responses: { "200": ok("Environments", json("EnvList")), "401": errors["401"] },
        },
      },
      "/v1/models": {
        post: {
          summary:
            "Upload a Hugging Face model folder as a tar stream (one leading folder in entry names is dropped); it is validated before it exists, and named in a JobSpec as model.base: model:<id>",
          parameters: [...queryParams(s.UploadModelQuery), {
            name: "Idempotency-Key",
            in: "header",
            required: false,
            schema: { type: "string", minLength: 1, maxLength: 255 },
          }],
          requestBody: {
            required: true,
            content: { "application/x-tar": { schema: { type: "string", format: "binary" } } },
          },
          responses: {
            "201": ok("Model created", json("ModelUpload")),
            "200": ok(
              "Same Idempotency-Key, archive and name: the model created before",
              json("ModelUpload"),
            ),
            "400": problem(
              "Empty body, not a tar archive, a body that did not arrive whole, duplicate file names, or a bad query/Idempotency-Key (errors[] holds the field)",
            ),
            "401": errors["401"],
            "409": problem("Idempotency-Key reused with a different archive or name"),
            "413": problem("Archive over the size limit"),
            "415": problem("Content-Type is not application/x-tar"),
            "422": problem(
              "The folder fails validation: errors[0].path is <file>:<field>, e.g. config.json:architectures",
            ),
            "501": problem("This server has no model check configured"),
          },
        },
        get: {
          summary: "The tenant's uploaded models, newest first",
          responses: { "200": ok("Models", json("ModelList")), "401": errors["401"] },
        },
      },
      "/v1/models/{id}": {
        get: {
          summary: "One uploaded model: architecture, parameter count, files with SHA-256, config",
          parameters: [modelId],
          responses: {
            "200": ok("The model", json("Model")),
            "401": errors["401"],
            "404": problem("No such model for this tenant"),
          },
        },
        delete: {
          summary:
            "Delete a model (its row and objects); refused while a queued or running job uses it",
          parameters: [modelId],
          responses: {
            "204": { description: "Deleted" },
            "401": errors["401"],
            "404": problem("No such model for this tenant"),
            "409": problem("A queued, running or cancelling job names it as model.base"),
          },
        },
      },
      "/v1/secrets": {
        get: {
          summary: "The tenant's secrets: names and dates, never values",
          responses: { "200": ok("Secrets by name", json("SecretList")), "401": errors["401"] },
        },
      },
      "/v1/secrets/{name}": {
        parameters: [{
          name: "name",
          in: "path",
          required: true,
          schema: { type: "string", pattern: "^[a-z][a-z0-9_-]{0,63}$" },
        }],
        put: {
          summary: "Stores a secret (encrypted at rest); a JobSpec names it, no answer returns it",
          requestBody: { required: true, content: json("PutSecret") },
          responses: {
            "201": ok("Stored (new)", json("Secret")),
            "200": ok("Replaced", json("Secret")),
            "400": problem("Bad name or value (errors[] names the field)"),
            "401": errors["401"],
          },
        },
        get: {
          summary: "One secret's name and dates",
          responses: {
            "200": ok("The secret, without its value", json("Secret")),
            ...errors,
            "404": problem("No such secret for this tenant"),
          },
        },
        delete: {
          summary: "Deletes a secret",
          responses: {
            "204": { description: "Deleted" },
            ...errors,
            "409": problem("A queued or running job names it"),
            "404": problem("No such secret for this tenant"),
          },
        },
      },
      "/healthz": {
        get: { security: [], summary: "Liveness", responses: { "200": ok("ok", {}) } },
      },
      "/readyz": {
        get: {
          security: [],
          summary: "Readiness: database and object store reachable",
          responses: { "200": ok("ready", {}), "503": problem("A dependency is unreachable") },
        },
      },
      "/metrics": {
        get: {
          summary:
            "Prometheus metrics: jobs by state, queue wait, active workers (over every tenant). " +
            "Needs the operator key SEED_METRICS_TOKEN as a bearer token; 404 when none is set",
          responses: {
            "200": ok("Prometheus text", { "text/plain": { schema: { type: "string" } } }),
            "401": problem("The operator key is missing or wrong"),
            "404": problem("No operator key is configured"),
          },
        },
      },
      "/openapi.json": {
        get: {
          security: [],
          summary: "This document",
          responses: { "200": ok("OpenAPI 3.1", {}) },
        },
      },
    },
  };
}

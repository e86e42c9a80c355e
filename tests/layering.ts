/**
 * The layering of the repository, written once: its parts, which parts each may import, and the
 * few single-file exceptions with their reasons. `tests/layering_test.ts` walks the import graph
 * of every `.ts`/`.js` file and fails naming the importing file when an import breaks it;
 * `deno task docs:layering` (tests/tools/layering_docs.ts) writes the map in README.md's
 * Architecture section from it.
 *
 * A file belongs to the part with the longest matching `paths` prefix. An import within one part
 * is always allowed; across parts it must be listed in `imports` or in {@link LAYER_EXCEPTIONS}.
 * `npm:`/`node:` packages and bare specifiers of deno.json's import map are not parts.
 */

/** One part of the repository. */
export interface Layer {
  /** Short name used in messages and in the README map. */
  name: string;
  /** Path prefixes (relative to the repository root) of the files in this part. */
  paths: string[];
  /** What the part holds, one line for the README map. */
  role: string;
  /** Names of the parts its files may import. */
  imports: string[];
  /** How the README map shows `paths`, where listing them would be long. */
  shown?: string;
}

/** The built-in environments: each folder imports only the shared part of workers/envs. */
const ENV_NAMES = ["sokoban", "household", "webshop", "ezpoints", "search"];

/** The parts of the product, from the outside in. */
export const PRODUCT_LAYERS: Layer[] = [
  {
    name: "api",
    paths: ["api/"],
    role: "HTTP server (Hono): routes, validation, auth, problem+json, SSE, dashboard",
    imports: ["jobs"],
  },
  {
    name: "api/client",
    paths: ["api/client/"],
    role: "SeedClient and the `deno task seed` CLI (wire types from api/)",
    imports: ["api", "jobs"],
  },
  {
    name: "api/demo",
    paths: ["api/demo/"],
    role: "`deno task demo`: runs API and worker as children, talks HTTP",
    imports: ["api/client", "jobs"],
  },
  {
    name: "api/tools",
    paths: ["api/tools/"],
    role: "key admin and the JobSpec reference generator",
    imports: ["api", "jobs"],
  },
  {
    name: "workers/main",
    paths: ["workers/main.ts"],
    role: "`deno task worker`: the worker process entry",
    imports: ["workers/seed/run", "workers/seed", "workers/worker", "workers/engine", "jobs"],
  },
  {
    name: "workers/serve",
    paths: ["workers/serve/"],
    role: "`deno task serve`: OpenAI-compatible inference over checkpoints",
    imports: [
      "workers/seed/run",
      "workers/skills",
      "workers/model",
      "workers/envs",
      "workers/envs/shared",
      "workers/engine",
      "workers/worker",
      "jobs",
    ],
  },
  {
    name: "workers/seed/run",
    paths: ["workers/seed/run/"],
    role: "the job plumbing of a run: handler, warm-up stages, checkpoints, dumps",
    imports: [
      "workers/seed",
      "workers/seed/errors",
      "workers/skills",
      "workers/model",
      "workers/envs",
      "workers/envs/shared",
      "workers/engine",
      "workers/worker",
      "jobs",
    ],
  },
  {
    name: "workers/worker",
    paths: ["workers/worker/"],
    role: "the worker loop: claim, lease + heartbeat, handlers, fenced writes, compute process",
    imports: ["workers/engine", "jobs"],
  },
  {
    name: "workers/seed",
    paths: ["workers/seed/"],
    role: "the algorithm: rollout, advantages, analyze step, objective, trainer, warm-up",
    imports: [
      "workers/seed/errors",
      "workers/skills",
      "workers/model",
      "workers/envs",
      "workers/envs/shared",
      "workers/engine",
      "jobs",
    ],
  },
  {
    name: "workers/skills",
    paths: ["workers/skills/"],
    role: "skill prompt, analysis parse and schema, analyzer generation settings, library, choice",
    imports: ["workers/seed/errors", "workers/model", "workers/envs/shared", "jobs"],
  },
  {
    name: "workers/seed/errors",
    paths: ["workers/seed/errors.ts"],
    role: "the error classes of the algorithm and the skills",
    imports: [],
  },
  {
    name: "workers/model",
    paths: ["workers/model/"],
    role: "decoders, tokenizers, generation, LoRA, constrained decoding, AdamW",
    imports: ["workers/engine"],
  },
  {
    name: "workers/envs",
    paths: [
      "workers/envs/mod.ts",
      "workers/envs/registry.ts",
      "workers/envs/catalog.ts",
      "workers/envs/server_main.ts",
      "workers/envs/write_catalog.ts",
    ],
    shown: "`workers/envs/{mod,registry,…}.ts`",
    role: "the environments' front door: registry, catalog, `deno task env-server`",
    imports: ["workers/envs/shared", ...ENV_NAMES.map((e) => `workers/envs/${e}`)],
  },
  ...ENV_NAMES.map((e): Layer => ({
    name: `workers/envs/${e}`,
    paths: [`workers/envs/${e}/`],
    shown: "`workers/envs/<id>/`",
    role: `the ${e} environment: tasks, episodes, expert, reference analyzer, judge`,
    imports: ["workers/envs/shared"],
  })),
  {
    name: "workers/envs/shared",
    paths: ["workers/envs/"],
    role: "the environment contract, shared prompt, errors and helpers, HTTP env server/client",
    imports: [],
  },
  {
    name: "workers/engine",
    paths: ["workers/engine/"],
    role: "ONNX graph builder, autodiff, onnxruntime sessions and providers",
    imports: [],
  },
  {
    name: "jobs",
    paths: ["jobs/"],
    role: "the job domain: JobSpec, schema, queue, events, artifact store, embedded servers",
    imports: [],
  },
];

const product = PRODUCT_LAYERS.map((l) => l.name);

/**
 * Every part: the product's, then the benchmarks and the tests. Benchmarks and tests may import
 * any part of the product and never each other: what both need (a throwaway Postgres cluster, a
 * saved job to serve, a model folder's tar) is product code (jobs/embedded/postgres_cluster.ts,
 * workers/seed/run/saved_job.ts, api/client/model_folder.ts). The tests of the benchmarks' own
 * statistics live in bench/tests/, inside bench.
 */
export const LAYERS: Layer[] = [
  ...PRODUCT_LAYERS,
  {
    name: "bench",
    paths: ["bench/"],
    role: "benchmarks (`bench/tools/`: developer tools; `bench/tests/`: tests of their statistics)",
    imports: product,
  },
  {
    name: "harness",
    paths: ["tests/_harness/"],
    role: "the suite's fixtures: test databases, S3 buckets, browser, processes",
    imports: product,
  },
  {
    name: "tests",
    paths: ["tests/"],
    role: "the test suite, mirroring the source tree",
    imports: ["harness", ...product],
  },
];

/** A single import allowed across parts that the table does not allow, with its reason. */
export interface LayerException {
  /** The importing file. */
  from: string;
  /** The imported file. */
  to: string;
  reason: string;
}

/** The exceptions: each one file to one file, each with its reason. */
export const LAYER_EXCEPTIONS: LayerException[] = [
  {
    from: "api/main.ts",
    to: "workers/model/upload_check.ts",
    reason: "the process entry injects the uploaded-model format check (pure parsing of " +
      "config.json, safetensors headers, tokenizer.json) as AppOptions.checkModel; " +
      "no route module imports it",
  },
  {
    from: "workers/envs/http/client.ts",
    to: "jobs/outbound_url.ts",
    reason: "the HTTP environment client applies the service's one set of outbound URL rules " +
      "(shared with the API and the annotator); the environments import no other folder",
  },
  {
    from: "workers/envs/server_main.ts",
    to: "jobs/settings.ts",
    reason: "`deno task env-server` reads `--port` with the service's one whole-number parser " +
      "and says what is wrong in its one start-up line, as the API's `PORT` and the inference " +
      "server's `SERVE_PORT` (jobs/settings.ts imports only zod)",
  },
];

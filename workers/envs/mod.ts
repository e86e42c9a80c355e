/**
 * Multi-turn environments: the public surface of workers/envs (workers/envs/README.md; adding
 * one: workers/envs/README.md, "Adding an environment"). It imports no other folder of the
 * repository, so an environment can also be served on its own over HTTP (`http/server.ts`,
 * `deno task env-server`).
 *
 * - Types: `Environment` (sync, built-in), `AsyncEnvironment` (what the pipeline uses), tasks,
 *   observations, trajectories (types.ts).
 * - Registry of built-ins: `getEnvironment(id)`, `listEnvironments()`.
 * - `resolveEnvironment(ref)`: a built-in id or an `http(s)://` URL → `AsyncEnvironment`.
 * - Shared prompt template and action parsing (prompt.ts), the `GET /v1/envs` payload
 *   (catalog.ts), the HTTP server and client (http/).
 * - Vision variants (`sokoban` with `render: "image"`, `ezpoints`): observations carry an RGB
 *   image; prompts show {@link IMAGE_PLACEHOLDER} where it goes; `encodePng` turns an image into
 *   a PNG file for people and the API.
 */
import { toAsyncEnvironment } from "./async.ts";
import { connectHttpEnvironment, type HttpEnvOptions } from "./http/client.ts";
import { getEnvironment } from "./registry.ts";
import type { AsyncEnvironment } from "./types.ts";

export * from "./types.ts";
export * from "./errors.ts";
export { environmentIds, getEnvironment, listEnvironments } from "./registry.ts";
export { toAsyncEnvironment } from "./async.ts";
export {
  buildCompactPrompt,
  buildTurnPrompt,
  type CompactPromptInput,
  IMAGE_PLACEHOLDER,
  parseActionText,
  TASK_LINE_PREFIX,
  TURN_LINE_PREFIX,
  type TurnPromptInput,
  vocabularyOf,
  withImagePlaceholder,
  wordsOf,
} from "./prompt.ts";
export { encodePng } from "./png.ts";
export { RasterError, type RgbImage } from "./raster.ts";
export { MAX_IMAGE_BYTES } from "./http/protocol.ts";
export { catalogEntryOf, type EnvCatalog, envCatalog, type EnvCatalogEntry } from "./catalog.ts";
export {
  checkEnvUrl,
  connectHttpEnvironment,
  EnvHttpError,
  EnvUrlNotAllowedError,
  type HttpEnvOptions,
} from "./http/client.ts";
export { createEnvApp, type EnvServer, serveEnvironments } from "./http/server.ts";

/**
 * The environment named by `ref`: a built-in id (`sokoban`) wrapped as async, or the base URL
 * of an HTTP environment (`http://127.0.0.1:8787/envs/sokoban`), checked against the allowlist
 * and deny list of `http` (see http/client.ts).
 * @throws UnknownEnvironmentError, EnvUrlNotAllowedError, EnvHttpError.
 */
export async function resolveEnvironment(
  ref: string,
  http: HttpEnvOptions = {},
): Promise<AsyncEnvironment> {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(ref)) return await connectHttpEnvironment(ref, http);
  return toAsyncEnvironment(getEnvironment(ref));
}

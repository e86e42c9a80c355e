/**
 * The API's clients in TypeScript: an HTTP client ({@link SeedClient}: bearer key, problem+json
 * errors as {@link ApiError}, an SSE reader that resumes with `Last-Event-ID`), the command-line
 * client `deno task seed` (`cli.ts`, its commands and their flags in one table in
 * `cli_commands.ts`, its output for a person in `cli_format.ts` and `events.ts`,
 * its `models` commands in `cli_models.ts`, `secrets` in
 * `cli_secrets.ts`), the progress bar it and the demo draw, the verified extraction of checkpoint
 * archives, and the tar stream of a model folder for `POST /v1/models` (`model_folder.ts`).
 *
 * Direction: this folder imports the server's wire types (`api/errors.ts`: the problem+json body)
 * and nothing else of `api/`; no server file imports it. Everything here speaks HTTP to a running
 * API, so it works against any deployment of it (see api/README.md, "Command-line client").
 */
export {
  ApiError,
  type ClientOptions,
  type ModelInfo,
  parseSse,
  SeedClient,
  type SseMessage,
  type UploadModelOptions,
} from "./client.ts";
export { cliMain } from "./cli.ts";
export type { CliIo } from "./cli_io.ts";
export { eventLine, percent } from "./events.ts";
export {
  ArchiveError,
  DestinationExistsError,
  DestinationKindError,
  type ExtractedFile,
  type ExtractOptions,
  extractVerified,
} from "./extract.ts";
export { type FolderFile, folderTar, listModelFolder, type ModelFolder } from "./model_folder.ts";
export {
  type BarState,
  cancelledInQueueText,
  type EtaAnchor,
  etaAnchor,
  etaLeft,
  formatBytes,
  formatDuration,
  PlainProgress,
  queuedAgainText,
  renderBar,
  type StageCount,
  stageCount,
  stageDetail,
} from "./progress.ts";

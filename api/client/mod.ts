/**
 * The API's clients in TypeScript: an HTTP client ({@link SeedClient}: bearer key, problem+json
 * errors as {@link ApiError}, an SSE reader that resumes with `Last-Event-ID`), the command-line
 * client `deno task seed` (`cli.ts`), the progress bar it and the demo draw, and the verified
 * extraction of checkpoint archives.
 *
 * Direction: this folder imports the server's wire types (`api/errors.ts`: the problem+json body)
 * and nothing else of `api/`; no server file imports it. Everything here speaks HTTP to a running
 * API, so it works against any deployment of it (see README.md, "Command-line client").
 */
export { ApiError, type ClientOptions, parseSse, SeedClient, type SseMessage } from "./client.ts";
export { type CliIo, cliMain } from "./cli.ts";
export { ArchiveError, type ExtractedFile, extractVerified } from "./extract.ts";
export { type BarState, formatDuration, PlainProgress, renderBar } from "./progress.ts";

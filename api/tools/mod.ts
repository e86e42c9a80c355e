/**
 * Operator and developer tools that run beside the server, not in it:
 *
 * - `keys.ts` (`deno task keys create|list|revoke`): API-key admin. It writes the database
 *   directly through the key store (`jobs/api_keys.ts`), since creating the first key
 *   cannot go through an API that needs one.
 * - `spec_docs.ts` (`deno task docs:spec [--check]`): regenerates jobs/SPEC.md, the JobSpec
 *   reference, from `JobSpecSchema` (jobs/spec.ts); tests/api/tools/spec_docs_test.ts fails while
 *   it is stale.
 *
 * Direction: these import the server's modules; no server file imports them.
 */
export { keysMain } from "./keys.ts";
export { generatedSpecDocument, renderSpecReference, SpecDocsError } from "./spec_docs.ts";

/**
 * API keys for the API and its commands: the key table's operations live in jobs/api_keys.ts,
 * shared with the inference server (workers/serve), which checks the same keys.
 */
export * from "../jobs/api_keys.ts";

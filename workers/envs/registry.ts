/**
 * The registry of built-in environments (id → Environment).
 */
import { UnknownEnvironmentError } from "./errors.ts";
import { ezpointsEnvironment } from "./ezpoints/mod.ts";
import { householdEnvironment } from "./household/mod.ts";
import { searchEnvironment } from "./search/mod.ts";
import { sokobanEnvironment } from "./sokoban/mod.ts";
import { webshopEnvironment } from "./webshop/mod.ts";
import type { Environment } from "./types.ts";

/** Built-in environments in a stable order (the order of `GET /v1/envs`). */
const BUILT_INS: readonly Environment[] = [
  sokobanEnvironment,
  householdEnvironment,
  webshopEnvironment,
  ezpointsEnvironment,
  searchEnvironment,
];

const BY_ID = new Map(BUILT_INS.map((env) => [env.id, env]));

/** Every built-in environment, in a stable order. */
export function listEnvironments(): Environment[] {
  return [...BUILT_INS];
}

/** The ids of the built-in environments. */
export function environmentIds(): string[] {
  return BUILT_INS.map((env) => env.id);
}

/**
 * The built-in environment `id`.
 * @throws UnknownEnvironmentError (listing the known ids) when there is none.
 */
export function getEnvironment(id: string): Environment {
  const env = BY_ID.get(id);
  if (env === undefined) throw new UnknownEnvironmentError(id, environmentIds());
  return env;
}

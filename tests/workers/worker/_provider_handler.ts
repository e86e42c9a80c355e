/**
 * A compute-process test handler (`createHandler`) that reports the execution provider its
 * context carries as a `provider_seen` event, so a test can check what reached the child.
 */
import type { JobHandler } from "../../../workers/worker/mod.ts";

/** The handler (see module doc). */
export function createHandler(): JobHandler {
  return async (ctx) => {
    await ctx.emit("provider_seen", { execution_provider: ctx.executionProvider ?? null });
  };
}

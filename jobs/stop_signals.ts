/**
 * Ctrl-C for the service's processes (`deno task api`, `worker`, `demo`): the first SIGINT or
 * SIGTERM stops gracefully, a later one stops at once. Ctrl-C in a terminal signals the whole
 * foreground process group, and a wrapper in that group (`deno task`, `npx`) forwards the signal
 * to its child once more, milliseconds later: signals within {@link SAME_PRESS_MS} of the first
 * are that same press, not a second one. A process started with `SEED_EXIT_WITH_PARENT=1` (the
 * demo's children) also stops gracefully when its parent exits (jobs/exit_with_parent.ts). Lives
 * in jobs/ because api/ and workers/ both use it (README.md, Architecture).
 */
import { onParentExit } from "./exit_with_parent.ts";

/**
 * Signals within this many ms of the first are one Ctrl-C delivered more than once; only a later
 * one means "stop now". A person pressing again on purpose takes longer; a forwarded signal
 * arrives within milliseconds.
 */
export const SAME_PRESS_MS = 1_000;

/** What {@link onStopSignals} calls. */
export interface StopSignalHandlers {
  /** The first signal: stop gracefully (drain, finish requests in flight). */
  first(): void;
  /** Every signal more than {@link SAME_PRESS_MS} after the first: stop at once. */
  again(): void;
}

/** Options of {@link onStopSignals}. */
export interface StopSignalOptions {
  /**
   * Also stop when the parent exits, by any means: the end of stdin counts as a first signal
   * (ignored once a signal came). Only where `exitWithParentFromEnv()` (jobs/exit_with_parent.ts)
   * said yes: stdin must be a pipe the parent holds open. Default false.
   */
  exitWithParent?: boolean;
}

/**
 * Listens for `signals` (default SIGINT and SIGTERM) with {@link StopSignalHandlers}' rule, and
 * for the parent's exit when `options.exitWithParent`; returns the function that removes the
 * listeners.
 */
export function onStopSignals(
  handlers: StopSignalHandlers,
  signals: readonly Deno.Signal[] = ["SIGINT", "SIGTERM"],
  options: StopSignalOptions = {},
): () => void {
  let firstAt: number | undefined;
  const listener = () => {
    const now = Date.now();
    if (firstAt === undefined) {
      firstAt = now;
      handlers.first();
    } else if (now - firstAt > SAME_PRESS_MS) {
      handlers.again();
    }
  };
  for (const signal of signals) Deno.addSignalListener(signal, listener);
  // After a signal the process is already stopping; the parent exiting changes nothing.
  const removeParent = options.exitWithParent
    ? onParentExit(() => firstAt === undefined && listener())
    : undefined;
  return () => {
    for (const signal of signals) Deno.removeSignalListener(signal, listener);
    removeParent?.();
  };
}

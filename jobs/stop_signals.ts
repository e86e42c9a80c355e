/**
 * Ctrl-C for the service's processes (`deno task api`, `worker`, `demo`): the first SIGINT or
 * SIGTERM stops gracefully, a later one stops at once. Ctrl-C in a terminal signals the whole
 * foreground process group, and a wrapper in that group (`deno task`, `npx`) forwards the signal
 * to its child once more, milliseconds later: signals within {@link SAME_PRESS_MS} of the first
 * are that same press, not a second one. Lives in jobs/ because api/ and workers/ both use it
 * (README.md, Architecture).
 */

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

/**
 * Listens for `signals` (default SIGINT and SIGTERM) with {@link StopSignalHandlers}' rule;
 * returns the function that removes the listeners.
 */
export function onStopSignals(
  handlers: StopSignalHandlers,
  signals: readonly Deno.Signal[] = ["SIGINT", "SIGTERM"],
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
  return () => {
    for (const signal of signals) Deno.removeSignalListener(signal, listener);
  };
}

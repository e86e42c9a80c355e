/**
 * Stopping with the parent: a process started by another one (the API and the worker under
 * `deno task demo`) must not outlive it, however it ends. A parent killed with SIGKILL cannot
 * stop its children, so the child watches a pipe instead: the parent holds the write end of the
 * child's stdin and never writes to it; the kernel closes that end when the parent exits, by any
 * means, and the child's read of stdin then reaches end of file. Opt-in with
 * `SEED_EXIT_WITH_PARENT=1`, since elsewhere (systemd, containers, a shell with `< /dev/null`)
 * stdin may read as end of file at once. Used by jobs/stop_signals.ts, where the end of the pipe
 * counts as a first stop signal. Lives in jobs/ because api/ and workers/ both use it.
 */

/** The variable that opts a process in: `1` on, unset, empty or `0` off. */
export const EXIT_WITH_PARENT_VAR = "SEED_EXIT_WITH_PARENT";

/**
 * Reads {@link EXIT_WITH_PARENT_VAR} and, when it is on, checks that stdin is a pipe or a socket
 * (what a parent's `stdin: "piped"` gives): a terminal, a file or `/dev/null` would read as end
 * of file at once or never.
 * @throws RangeError naming the variable when its value is not `1`, `0` or empty, or when it is
 * `1` and stdin is not a pipe.
 */
export function exitWithParentFromEnv(
  env: Record<string, string | undefined> = Deno.env.toObject(),
): boolean {
  const raw = env[EXIT_WITH_PARENT_VAR];
  if (raw === undefined || raw === "" || raw === "0") return false;
  if (raw !== "1") {
    throw new RangeError(
      `Cannot read ${EXIT_WITH_PARENT_VAR} as it must be 1, 0 or empty: current value is ${raw}`,
    );
  }
  const kind = stdinKind();
  if (kind !== "pipe" && kind !== "socket") {
    throw new RangeError(
      `Cannot exit with the parent as ${EXIT_WITH_PARENT_VAR}=1 needs stdin to be a pipe the parent holds open: it is ${kind}`,
    );
  }
  return true;
}

/** What stdin is, in words (`pipe`, `socket`, `a terminal or a device such as /dev/null`, …). */
function stdinKind(): string {
  let info: Deno.FileInfo;
  try {
    // Follows the link to the open file (/dev/stdin → /proc/self/fd/0 on Linux).
    info = Deno.statSync("/dev/stdin");
  } catch {
    return "closed";
  }
  if (info.isFifo) return "pipe";
  if (info.isSocket) return "socket";
  if (info.isCharDevice) return "a terminal or a device such as /dev/null";
  if (info.isFile) return "a file";
  return "neither a pipe nor a socket";
}

/**
 * Calls `onExit` once when stdin reaches end of file or fails (the parent has exited); what the
 * parent might write is read and dropped. Call it only after {@link exitWithParentFromEnv} said
 * yes. Returns a function after which `onExit` is no longer called.
 */
export function onParentExit(onExit: () => void): () => void {
  let removed = false;
  (async () => {
    try {
      for await (const _ of Deno.stdin.readable) { /* the parent never writes; drop it */ }
    } catch { /* a read error means the same: the other end is gone */ }
    if (!removed) onExit();
  })();
  return () => {
    removed = true;
  };
}

/**
 * Process facts from /proc for tests that check which processes a signal left alive (Linux only),
 * and a child's structured log.
 */

/** Fields of /proc/PID/stat after "(comm) ": the state letter and the parent pid. */
function stat(pid: number | string): { state: string; ppid: number } {
  const [state, ppid] = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return { state, ppid: Number(ppid) };
}

/** Pids of the live (not zombie) processes whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  const pids: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const s = stat(e.name);
      if (s.ppid === pid && s.state !== "Z") pids.push(Number(e.name));
    } catch { /* it exited while we read */ }
  }
  return pids;
}

/** True while process `pid` exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  try {
    return stat(pid).state !== "Z";
  } catch {
    return false;
  }
}

/** One structured log record: its message and whatever fields it carried. */
export type LogRecord = { msg: string } & Record<string, unknown>;

/**
 * A child's stderr read to its end, one JSON log record per line (a line that is not JSON becomes
 * `{ msg: line }`, e.g. a runtime's own warning).
 */
export async function logRecords(child: Deno.ChildProcess): Promise<LogRecord[]> {
  return (await new Response(child.stderr).text()).split("\n").filter(Boolean).map((l) => {
    try {
      return JSON.parse(l);
    } catch {
      return { msg: l };
    }
  });
}

/**
 * Process facts from /proc for tests that check which processes a signal left alive (Linux only).
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

/**
 * A compute process dies with its worker, however the worker dies. The socket alone cannot tell
 * it in time: a child busy in synchronous code (one long onnxruntime call, a step that never
 * yields) reads the closed socket only when that code returns, and until then it holds its CPU
 * and memory as an orphan. On Linux the kernel can kill it instead: `prctl(PR_SET_PDEATHSIG,
 * SIGKILL)` (man 2 prctl) asks for SIGKILL when the thread that started this process exits,
 * which for a worker is its main thread, so its process. Called through libc with Deno's FFI.
 */

/** `PR_SET_PDEATHSIG` from `<linux/prctl.h>`. */
const PR_SET_PDEATHSIG = 1;
/** `SIGKILL` on Linux. */
const SIGKILL = 9;

/**
 * Asks the kernel to SIGKILL this process when its parent exits (Linux, glibc's `libc.so.6`).
 * Answers whether the request took: false on another system or C library, or when the call
 * fails; the caller then relies on the socket alone. A parent that already exited before the
 * call is not caught here (the caller's connect to the parent's socket then fails).
 */
export function dieWithParent(): boolean {
  if (Deno.build.os !== "linux") return false;
  let lib;
  try {
    lib = Deno.dlopen("libc.so.6", {
      prctl: { parameters: ["i32", "u64", "u64", "u64", "u64"], result: "i32" },
    });
  } catch {
    return false;
  }
  try {
    return lib.symbols.prctl(PR_SET_PDEATHSIG, BigInt(SIGKILL), 0n, 0n, 0n) === 0;
  } finally {
    lib.close();
  }
}

/**
 * Inference servers for rollout-engine tests: `deno task serve` as child processes on the test's
 * database and store (real ports, real HTTP), and a forwarding front that can stand between the
 * trainer and one server to make it misbehave as a real deployment does (killed mid-step, left one
 * policy version behind).
 */

/** A `deno task serve` child process. */
export interface ServeProcess {
  url: string;
  pid: number;
  /** SIGKILL (a machine that disappears); resolves when the process has exited. */
  kill(): Promise<void>;
  /** SIGTERM and wait (what a test's cleanup does). */
  stop(): Promise<void>;
}

/**
 * Starts `workers/serve/main.ts` with `env` (`DATABASE_URL`, `S3_*`) on a free port; resolves
 * once its "serve listening" log line names the port.
 * @throws Error when the process exits before listening (its log in the message).
 */
export async function spawnServe(env: Record<string, string>): Promise<ServeProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-no-legacy-abort", "workers/serve/main.ts"],
    env: { ...env, SERVE_PORT: "0", SERVE_HOST: "127.0.0.1" },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const lines = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let log = "", port = 0;
  while (port === 0) {
    const { value, done } = await lines.read();
    if (done) {
      await child.status;
      throw new Error(`Cannot start serve as it must listen: it exited, log ${log.slice(-2000)}`);
    }
    log += value;
    const m = /"msg":"serve listening"[^\n]*"port":(\d+)/.exec(log);
    if (m) port = Number(m[1]);
  }
  // keep draining its log so the pipe never fills
  (async () => {
    while (!(await lines.read()).done) { /* drop */ }
  })().catch(() => {});
  let exited = false;
  const status = child.status.then(() => (exited = true));
  const end = async (signal: Deno.Signal) => {
    if (!exited) {
      try {
        child.kill(signal);
      } catch { /* already gone */ }
    }
    await status;
  };
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    kill: () => end("SIGKILL"),
    stop: () => end("SIGTERM"),
  };
}

/** What a front may do with one request before (or instead of) forwarding it. */
export type FrontRule = (
  path: string,
  body: Record<string, unknown>,
) =>
  | Promise<Response | Record<string, unknown> | undefined>
  | Response
  | Record<string, unknown>
  | undefined;

/** A forwarding front to `target`. */
export interface Front {
  url: string;
  close(): Promise<void>;
}

/**
 * An HTTP server that forwards every POST to `target` (same path, headers and JSON body), after
 * `rule`: a Response answers instead of forwarding; an object is forwarded as the body; undefined
 * forwards the body unchanged. `rewriteAnswer` may change a forwarded JSON answer (`asked`: the
 * body the client sent). When the server behind fails to answer, the front answers 502.
 */
export function startFront(
  target: () => string,
  rule: FrontRule,
  rewriteAnswer?: (
    path: string,
    answer: Record<string, unknown>,
    asked: Record<string, unknown>,
  ) => Record<string, unknown>,
): Front {
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: () => {},
    // the server behind went away (killed): answer as a gateway does
    onError: (e) => new Response(`upstream failed: ${(e as Error).message}`, { status: 502 }),
  }, async (req) => {
    const path = new URL(req.url).pathname;
    const body = await req.json() as Record<string, unknown>;
    const ruled = await rule(path, body);
    if (ruled instanceof Response) return ruled;
    const res = await fetch(target() + path, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: req.headers.get("authorization") ?? "",
      },
      body: JSON.stringify(ruled ?? body),
      signal: req.signal,
    });
    const text = await res.text();
    if (!rewriteAnswer || !res.ok || !res.headers.get("content-type")?.includes("json")) {
      return new Response(text, { status: res.status, headers: res.headers });
    }
    return Response.json(rewriteAnswer(path, JSON.parse(text), body), { status: res.status });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    close: () => server.shutdown(),
  };
}

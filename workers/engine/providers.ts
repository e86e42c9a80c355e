/**
 * Execution-provider probe: which onnxruntime provider this machine can really run.
 *
 * onnxruntime-node 1.30's Linux binary carries the `cpu` and `webgpu` providers (WebGPU through
 * Dawn, which needs a Vulkan loader `libvulkan.so.1` and a GPU driver that offers an adapter);
 * `cuda` is a separate library (`libonnxruntime_providers_cuda.so`, installed next to the binding
 * by `ONNXRUNTIME_NODE_INSTALL=cuda12`) that also needs CUDA 12 and cuDNN 9 on the library path.
 * A provider counts as available when a real session on it loads a small float32 graph (MatMul,
 * Softmax, Mul, ReduceSum: ops every model graph uses) and returns the right numbers.
 *
 * Each provider is checked in a short-lived child process (`probe_main.ts`): the native loaders
 * report why they failed on stderr (the exception only says "Failed to load shared library"), a
 * broken driver can crash or hang a process, and a GPU context opened by the probe would hold
 * device memory for the caller's whole life.
 */
import * as ort from "onnxruntime-node";
import { Graph } from "./graph.ts";
import type { ExecutionProvider } from "./session.ts";

/** Every provider, best first: the default order of {@link chooseExecutionProvider}. */
export const EXECUTION_PROVIDERS: readonly ExecutionProvider[] = ["cuda", "webgpu", "cpu"];

/** How one provider fared in the probe. */
export interface ProviderCheck {
  provider: ExecutionProvider;
  ok: boolean;
  /** Why it cannot be used (absent when `ok`): one line, the missing part first. */
  reason?: string;
  /** Wall time of the check, in seconds (includes the child process's start when isolated). */
  seconds: number;
}

/** The provider a process will use, and why each better one in its list was passed over. */
export interface ProviderChoice {
  provider: ExecutionProvider;
  skipped: { provider: ExecutionProvider; reason: string }[];
}

/** No provider of the list could be used (the list did not end in `cpu`, or cpu failed too). */
export class NoExecutionProviderError extends Error {
  override name = "NoExecutionProviderError";
  constructor(readonly checks: ProviderCheck[]) {
    super(
      `Cannot choose an execution provider as one of ${
        checks.map((c) => c.provider).join(", ")
      } must load: ${checks.map((c) => `${c.provider}: ${c.reason}`).join("; ")}`,
    );
  }
}

/** A (2, 3) × (3, 2) float32 check: softmax(a·b) ⊙ (a·b) summed over the last axis → (2,). */
const A = [0.5, -1, 2, 1.5, 0.25, -0.75];
const B = [1, -0.5, 0.25, 2, -1, 0.5];

/** The check's expected output, computed in float64 in JS. */
function expected(): number[] {
  const out: number[] = [];
  for (let i = 0; i < 2; i++) {
    const row = [0, 1].map((j) => [0, 1, 2].reduce((s, k) => s + A[i * 3 + k] * B[k * 2 + j], 0));
    const m = Math.max(...row);
    const e = row.map((x) => Math.exp(x - m));
    const z = e[0] + e[1];
    out.push(row.reduce((s, x, j) => s + (e[j] / z) * x, 0));
  }
  return out;
}

function checkModel(): Uint8Array {
  const g = new Graph("provider_check", "float32");
  const a = g.input("a", [2, 3]);
  const b = g.input("b", [3, 2]);
  const ab = g.matmul(a, b); // (2, 2)
  g.output(g.reduceSum(g.mul(g.softmax(ab, -1), ab), [1], false), "y"); // (2,)
  return g.toModel();
}

/**
 * Checks `provider` in this process: loads the check graph on it (no CPU fallback for a GPU
 * provider's failure: the session must be created with that provider) and compares the result
 * with the float64 reference to 1e-4. Never throws: a failure is `{ok: false, reason}`, the
 * reason from {@link explainProviderFailure} of the error message.
 */
export async function checkProvider(provider: ExecutionProvider): Promise<ProviderCheck> {
  const started = performance.now();
  const done = (reason?: string): ProviderCheck => ({
    provider,
    ok: reason === undefined,
    ...(reason === undefined ? {} : { reason }),
    seconds: (performance.now() - started) / 1000,
  });
  try {
    if (!ort.listSupportedBackends().some((b) => b.name === provider)) {
      return done(`not in this onnxruntime-node build`);
    }
    const session = await ort.InferenceSession.create(checkModel(), {
      executionProviders: [provider],
      graphOptimizationLevel: "all",
      intraOpNumThreads: 1,
      logSeverityLevel: 3,
    });
    try {
      const { y } = await session.run({
        a: new ort.Tensor("float32", Float32Array.from(A), [2, 3]),
        b: new ort.Tensor("float32", Float32Array.from(B), [3, 2]),
      });
      const got = Array.from(y.data as Float32Array);
      const want = expected();
      const err = Math.max(...want.map((w, i) => Math.abs(w - got[i])));
      if (!(err <= 1e-4)) {
        return done(`wrong result on the check graph: max |error| ${err} (want ≤ 1e-4)`);
      }
      return done();
    } finally {
      await session.release();
    }
  } catch (e) {
    return done(explainProviderFailure(provider, String((e as Error)?.message ?? e)));
  }
}

/**
 * One line saying why `provider` failed, from the error message and, when the check ran in a
 * child process, what the native loaders wrote to stderr (`log`). Known causes are named (the
 * CUDA provider library not installed, a CUDA/cuDNN library missing, no Vulkan loader, no WebGPU
 * adapter); otherwise the first line of the error.
 */
export function explainProviderFailure(
  provider: ExecutionProvider,
  message: string,
  log = "",
): string {
  const text = `${message}\n${log}`;
  const missing = [...text.matchAll(/(lib[\w.+-]+\.so[\w.]*): cannot open shared object file/g)]
    .map((m) => m[1]);
  const firstLine = message.split("\n").find((l) => l.trim())?.trim() ?? "unknown error";
  if (provider === "cuda") {
    const ours = missing.find((l) => l.startsWith("libonnxruntime_providers"));
    if (ours) {
      return `onnxruntime-node's CUDA provider is not installed (${ours} not found next to its ` +
        `binding): reinstall onnxruntime-node with ONNXRUNTIME_NODE_INSTALL=cuda12`;
    }
    if (missing.length) {
      return `a CUDA 12 / cuDNN 9 library could not load (${missing[0]} not found): install ` +
        `CUDA 12 and cuDNN 9 and put their lib folders on LD_LIBRARY_PATH`;
    }
    if (/no CUDA-capable device|CUDA driver version is insufficient|cudaError/i.test(text)) {
      const line = text.split("\n").find((l) => /CUDA-capable|insufficient|cudaError/i.test(l));
      return `CUDA failed to start: ${line?.trim()}`;
    }
    return firstLine;
  }
  if (provider === "webgpu") {
    if (/adapter/i.test(text)) {
      const why = missing.includes("libvulkan.so.1")
        ? "the Vulkan loader libvulkan.so.1 is not installed"
        : "no Vulkan driver offers a GPU (is the GPU's Vulkan ICD installed?)";
      return `no WebGPU adapter: ${why}`;
    }
    return firstLine;
  }
  return firstLine;
}

const ENTRY = new URL("./probe_main.ts", import.meta.url);
const CONFIG = new URL("../../deno.json", import.meta.url);

/** Marks the probe's result line on the child's stdout. */
export const PROBE_LINE_PREFIX = "provider-check ";

/**
 * Checks `provider` in a child process of its own (see module doc). A child that crashes, prints
 * no result or outlives `timeoutMs` (default 120 s) counts as a failure, with what it wrote to
 * stderr as the reason. Never throws.
 */
export async function probeProvider(
  provider: ExecutionProvider,
  opts: { timeoutMs?: number } = {},
): Promise<ProviderCheck> {
  const started = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--config", CONFIG.pathname, ENTRY.pathname, provider],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timeoutMs = opts.timeoutMs ?? 120_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch { /* already exited */ }
  }, timeoutMs);
  const out = await child.output().finally(() => clearTimeout(timer));
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr);
  const seconds = (performance.now() - started) / 1000;
  const line = stdout.split("\n").findLast((l) => l.startsWith(PROBE_LINE_PREFIX));
  if (line) {
    const check = JSON.parse(line.slice(PROBE_LINE_PREFIX.length)) as ProviderCheck;
    if (check.ok) return { ...check, seconds };
    // The child's reason came from the exception alone; the loaders' stderr says more.
    const reason = explainProviderFailure(provider, check.reason ?? "", stderr);
    return { provider, ok: false, reason, seconds };
  }
  const why = timedOut
    ? `the check did not finish within ${timeoutMs / 1000} s`
    : `the check process ended with code ${out.code}${out.signal ? ` (${out.signal})` : ""}`;
  const last = stderr.trim().split("\n").slice(-1)[0];
  return { provider, ok: false, reason: last ? `${why}: ${last}` : why, seconds };
}

/**
 * Probes `candidates` in order (default {@link EXECUTION_PROVIDERS}: cuda, webgpu, cpu) and
 * returns the first that works, with the reasons the ones before it were skipped. Providers after
 * the chosen one are not probed. `opts.probe` checks one provider (default {@link probeProvider},
 * in a child process with `opts.timeoutMs`; {@link checkProvider} checks in this process).
 * @throws NoExecutionProviderError when none works (e.g. `cuda,webgpu` on a machine without a GPU).
 */
export async function chooseExecutionProvider(
  candidates: readonly ExecutionProvider[] = EXECUTION_PROVIDERS,
  opts: { timeoutMs?: number; probe?: (p: ExecutionProvider) => Promise<ProviderCheck> } = {},
): Promise<ProviderChoice> {
  const probe = opts.probe ?? ((p: ExecutionProvider) => probeProvider(p, opts));
  const checks: ProviderCheck[] = [];
  for (const provider of candidates) {
    const check = await probe(provider);
    checks.push(check);
    if (check.ok) {
      return {
        provider,
        skipped: checks.filter((c) => !c.ok).map((c) => ({
          provider: c.provider,
          reason: c.reason ?? "",
        })),
      };
    }
  }
  throw new NoExecutionProviderError(checks);
}

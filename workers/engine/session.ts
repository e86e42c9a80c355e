/**
 * onnxruntime-node sessions: execution-provider selection, thread and optimisation settings,
 * and a cache keyed by (graph, shape bucket) so each graph is built and loaded once.
 *
 * `InferenceSession.run()` computes on onnxruntime's threads but blocks the JS event loop
 * until it is done (checked: a 5 ms interval does not fire during a 1 s run). Measured per call
 * on 2 shared cores (bench/engine.ts, load 2–8): tiny test models < 5 ms; a 0.9M-parameter train
 * call over 8×64 tokens ≈ 60–150 ms; a 23.5M train call ≈ 1.5–4 ms per token (Policy's default
 * budget of 10¹¹ FLOP per call is ~700 tokens there, ≈ 1–3 s); a batched decode step of the
 * 23.5M model at batch 64 ≈ 40–100 ms. Keep calls at that scale and call `yieldToEventLoop()`
 * between them so timers such as lease heartbeats still fire.
 */
import * as ort from "onnxruntime-node";

/** Where graphs run. `cpu` is the default and is always available. */
export type ExecutionProvider = "cpu" | "cuda" | "webgpu";

/** Session settings shared by every graph of an engine. */
export interface EngineOptions {
  /** Execution provider (default `cpu`). */
  ep?: ExecutionProvider;
  /** onnxruntime intra-op threads (default 2; one per core you may use). */
  threads?: number;
  /**
   * Let idle intra-op threads spin-wait for work (onnxruntime's default). Off by default: on
   * shared, oversubscribed cores spinning threads steal the time the working ones need (a train
   * step ran ~2× faster without it at load 6 on 2 cores); turn it on for a dedicated machine.
   */
  spinning?: boolean;
  /**
   * onnxruntime's per-session CPU memory arena (default off). With it each cached session keeps
   * memory as large as its biggest run for its whole life, so a worker's memory is the sum over
   * its cached sessions; without it memory goes back to the allocator after each run and the
   * peak is about one run's. See {@link DEFAULT_MAX_SESSIONS} for what was measured.
   */
  memArena?: boolean;
  /**
   * onnxruntime's memory pattern (default off): one block per run, planned for the run's shapes,
   * instead of allocating each tensor when it is made and freeing it when it is last read. With
   * the arena off that block is a fresh allocation on every run and larger than the live peak.
   */
  memPattern?: boolean;
}

/** An execution provider could not be loaded on this machine. */
export class ProviderUnavailableError extends Error {
  override name = "ProviderUnavailableError";
  constructor(readonly ep: ExecutionProvider, readonly missing: string, cause: unknown) {
    super(
      `Cannot create an onnxruntime session on execution provider "${ep}" as ${missing}: ` +
        `${String((cause as Error)?.message ?? cause).split("\n")[0]}`,
      { cause },
    );
  }
}

const MISSING: Record<ExecutionProvider, string> = {
  cpu: "the onnxruntime-node native binding must load (run with --allow-ffi)",
  cuda: "the CUDA provider libraries must be installed (workers/engine/README.md, GPU workers: " +
    "ONNXRUNTIME_NODE_INSTALL=cuda12 with onnxruntime-node's script/install.js; CUDA 12 and cuDNN 9)",
  webgpu: "a WebGPU adapter must be available (a GPU with a Vulkan driver)",
};

/**
 * onnxruntime session options for `opts`: graphOptimizationLevel "all", explicit threads, the
 * CPU arena and memory pattern off unless asked for.
 */
export function sessionOptions(opts: EngineOptions = {}): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [opts.ep ?? "cpu"],
    intraOpNumThreads: opts.threads ?? 2,
    interOpNumThreads: 1,
    graphOptimizationLevel: "all",
    logSeverityLevel: 3,
    enableCpuMemArena: opts.memArena ?? false,
    enableMemPattern: opts.memPattern ?? false,
    extra: { session: { intra_op: { allow_spinning: opts.spinning ? "1" : "0" } } },
  };
}

/**
 * Sessions a {@link SessionCache} keeps by default. With onnxruntime's CPU arena and memory
 * pattern off (`sessionOptions`) and Policy's small calls, a cached session holds little beyond its
 * graph (a demo-sized job peaks at ~0.6 GB, bench:memory), so the cache size is about build time
 * only. With the arena on, each session would keep an arena as large as its biggest run and memory
 * would grow with the cached sessions (bench/RESULTS.md).
 */
export const DEFAULT_MAX_SESSIONS = 8;

/**
 * Load a serialised ONNX model. Throws ProviderUnavailableError (saying what is missing) when
 * the execution provider cannot be loaded, and rethrows other load errors unchanged.
 */
export async function createSession(
  model: Uint8Array,
  opts: EngineOptions = {},
): Promise<ort.InferenceSession> {
  const ep = opts.ep ?? "cpu";
  if (ep !== "cpu") {
    const known = ort.listSupportedBackends().find((b) => b.name === ep);
    if (!known) {
      throw new ProviderUnavailableError(ep, MISSING[ep], "not in this onnxruntime build");
    }
  }
  try {
    return await ort.InferenceSession.create(model, sessionOptions(opts));
  } catch (e) {
    const msg = String((e as Error)?.message ?? e);
    if (ep !== "cpu" && /provider|cuda|webgpu|dawn|adapter|\.so|shared librar/i.test(msg)) {
      throw new ProviderUnavailableError(ep, MISSING[ep], e);
    }
    throw e;
  }
}

/**
 * Sessions by key. A key names a graph and its shape bucket (e.g. `train:<config>:b8:t64`);
 * `build` runs only on a miss. Least recently used sessions beyond `maxSessions` are released.
 */
export class SessionCache {
  private readonly sessions = new Map<string, Promise<ort.InferenceSession>>();

  constructor(readonly opts: EngineOptions & { maxSessions?: number } = {}) {}

  /** The session for `key`, building and loading its model on first use. */
  get(key: string, build: () => Uint8Array): Promise<ort.InferenceSession> {
    let s = this.sessions.get(key);
    if (s) {
      this.sessions.delete(key); // refresh LRU position
      this.sessions.set(key, s);
      return s;
    }
    s = createSession(build(), this.opts);
    s.catch(() => this.sessions.delete(key));
    this.sessions.set(key, s);
    this.evict();
    return s;
  }

  /** Number of cached sessions. */
  get size(): number {
    return this.sessions.size;
  }

  /** Release every cached session. */
  async release(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    for (const s of all) await (await s.catch(() => null))?.release();
  }

  private evict(): void {
    const max = this.opts.maxSessions ?? DEFAULT_MAX_SESSIONS;
    while (this.sessions.size > max) {
      const [oldKey, old] = this.sessions.entries().next().value!;
      this.sessions.delete(oldKey);
      old.then((s) => s.release()).catch(() => {});
    }
  }
}

/** An onnxruntime tensor (re-exported so callers need not import onnxruntime-node). */
export type Tensor = ort.Tensor;

/** Make an onnxruntime tensor of `dtype` over `data` with `dims`. */
export function tensor(
  dtype: "float32" | "float64" | "int64" | "bool",
  data: Float32Array | Float64Array | BigInt64Array | Uint8Array,
  dims: readonly number[],
): ort.Tensor {
  return new ort.Tensor(dtype, data, dims);
}

let lastYield = performance.now();

/**
 * Let timers and I/O run if the event loop has been blocked (by `run()` calls) for more than
 * `maxBusyMs` since the last yield; otherwise return at once.
 */
export async function yieldToEventLoop(maxBusyMs = 50): Promise<void> {
  if (performance.now() - lastYield < maxBusyMs) return;
  await new Promise((resolve) => setTimeout(resolve, 0));
  lastYield = performance.now();
}

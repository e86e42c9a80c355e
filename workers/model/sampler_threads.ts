/**
 * Token draws on more than one thread. With a vocabulary of 151,936 tokens a draw (`sampleToken`:
 * a float64 softmax over the whole row, then an inverse-CDF draw) costs ~2.5–3 ms of JavaScript,
 * most of it `Math.exp` — 60–80% of generating with a small model (bench/RESULTS.md, "The analyzer
 * warm-up with a 151,936-token vocabulary"), while onnxruntime's threads wait. A batch's rows are
 * independent (each has its own random stream), so they are split between this thread and
 * `threads − 1` workers running the same `sampleToken`: every row draws exactly the token, and
 * leaves its stream exactly where, one thread would.
 *
 * Only batches worth it go to workers (at least {@link MIN_PARALLEL_VOCAB} logits per row and
 * {@link MIN_PARALLEL_ROWS} rows): each step pays a message round trip and a copy of the rows sent.
 * Measured on a shared 2-core machine under load 3.5–6 (bench/RESULTS.md): split in two, 8 and 16
 * rows a step were 30% and 10% slower, 32 rows 9% and 64 rows 12% faster. Workers start on first
 * use and stop at {@link SamplerThreads.close}.
 */
import { Rng, type SampleOptions, sampleToken } from "./sampling.ts";
import type { SamplerAnswer, SamplerRequest } from "./_sampler_worker.ts";

/** Fewest logits per row that a worker is sent (smaller rows draw in microseconds). */
export const MIN_PARALLEL_VOCAB = 16_384;
/** Fewest rows of a batch that are split between threads. */
export const MIN_PARALLEL_ROWS = 32;

/** One row's draw: its logits (V,) and its random stream (advanced by the draw). */
export interface RowDraw {
  logits: Float32Array;
  rng: Rng;
}

/** Draws tokens for many rows on `threads` threads (this one and `threads − 1` workers). */
export class SamplerThreads {
  readonly #threads: number;
  #workers: Worker[] = [];

  /** @param threads threads to draw on (≥ 1; 1 draws on this thread only). */
  constructor(threads: number) {
    this.#threads = Math.max(1, Math.floor(threads));
  }

  /**
   * One token per row, in order, each drawn by `sampleToken(row.logits, options, row.rng)` (on
   * whichever thread); each `row.rng` is left as that call would leave it.
   */
  async draw(rows: readonly RowDraw[], options: SampleOptions): Promise<number[]> {
    const vocab = rows[0]?.logits.length ?? 0;
    const parallel = this.#threads > 1 && rows.length >= MIN_PARALLEL_ROWS &&
      vocab >= MIN_PARALLEL_VOCAB && !options.greedy && options.temperature > 0 &&
      rows.every((r) => r.logits.length === vocab);
    if (!parallel) return rows.map((r) => sampleToken(r.logits, options, r.rng));
    // contiguous shares, this thread's first: share k holds rows [starts[k], starts[k + 1])
    const n = this.#threads,
      starts = Array.from({ length: n + 1 }, (_, k) => Math.round(k * rows.length / n));
    const answers = Array.from({ length: n - 1 }, (_, w) => {
      const share = rows.slice(starts[w + 1], starts[w + 2]);
      const logits = new Float32Array(share.length * vocab);
      share.forEach((r, k) => logits.set(r.logits, k * vocab));
      return this.#ask(w, {
        logits,
        vocab,
        states: share.map((r) => r.rng.state()),
        options,
      }, logits.buffer);
    });
    const tokens = rows.slice(0, starts[1]).map((r) => sampleToken(r.logits, options, r.rng));
    for (const [w, answer] of (await Promise.all(answers)).entries()) {
      answer.tokens.forEach((token, k) => {
        const row = rows[starts[w + 1] + k];
        row.rng.restore(answer.states[k]);
        tokens.push(token);
      });
    }
    return tokens;
  }

  /** Workers running now (started by a `draw` that split its rows, stopped by `close`). */
  get workers(): number {
    return this.#workers.length;
  }

  /** Stops the workers (a later `draw` starts them again). */
  close(): void {
    for (const w of this.#workers) w.terminate();
    this.#workers = [];
  }

  #ask(w: number, request: SamplerRequest, transfer: ArrayBuffer): Promise<SamplerAnswer> {
    const worker = this.#workers[w] ??= new Worker(
      new URL("./_sampler_worker.ts", import.meta.url).href,
      { type: "module" },
    );
    return new Promise((resolve, reject) => {
      worker.onmessage = (e: MessageEvent<SamplerAnswer>) => resolve(e.data);
      worker.onerror = (e) => {
        e.preventDefault();
        reject(new Error(`Cannot draw tokens on a sampler thread: ${e.message}`));
      };
      worker.postMessage(request, [transfer]);
    });
  }
}

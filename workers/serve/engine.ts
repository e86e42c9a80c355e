/**
 * Continuous batching over the KV-cache decode graph (workers/model/llama.ts `buildDecodeGraph`,
 * workers/model/kv_cache.ts), after Orca (Yu et al., OSDI 2022: iteration-level scheduling).
 *
 * One loop serves every loaded model. Each iteration: requests whose client went away are
 * dropped; waiting requests join (first come, first served) while the sequences being decoded
 * stay within `maxBatch` — their prompts are prefilled together (left-padded, per model;
 * identical prompts once, a prefix common to all of them once, and a prefix kept from an earlier
 * admission copied rather than prefilled again) and their KV rows gathered into the model's
 * running cache; then every
 * model's running sequences sample one token each and, together, run one decode step (running
 * sequences also step between the prefill windows of a long prompt, which would stall them). A
 * sequence that ends (EOS, stop string, token limit) or whose client disconnected leaves
 * between steps, so its slot is free for the next waiting request at the next iteration. Admission
 * is bounded: at most `maxBatch + maxQueue` sequences are decoding or waiting, beyond that `submit`
 * throws {@link QueueFullError} (the HTTP layer answers 429 with `Retry-After`).
 *
 * Rows are left-padded, so a row's cached slots are some empty ones followed by its real tokens:
 * its attention mask is 0 on the first `used − real` slots and 1 on the rest, where `real` is
 * the number of tokens it has fed (its next position). When rows leave or join, the cache is
 * rebuilt with `KvCache.gather`, which also drops the oldest slots no row attends to.
 *
 * Sampling is that of the trainer's `generate` (workers/model/generate.ts): choice i of a request
 * with seed s draws from `choiceRng(s, firstChoice + i)` (workers/model/sampling.ts; `firstChoice`
 * 0 unless the request names its row), so its draws do not
 * depend on which other sequences share its batch (its logits may differ from a lone run in the
 * last float bits, as in any batched decode).
 */
import type * as ort from "onnxruntime-node";
import { setImmediate } from "node:timers";
import { tensor } from "../engine/mod.ts";
import {
  choiceRng,
  type DecoderConfig,
  KvCache,
  parameterCount,
  type Rng,
  type SampleOptions,
  sampleToken,
} from "../model/mod.ts";

/**
 * Most attention-score elements (rows × heads × new columns × keys) per prefill call: 2^20
 * floats, 4 MiB. Measured on the bench's prompt (172 tokens, 32 rows, 2 threads): a prefill in
 * 32-column calls took 0.4–0.5× the time of one 172-column call on builtin:tiny and on the 24M
 * config, 64-column calls 0.6–0.9×.
 */
const SCORE_ELEMENTS = 2 ** 20;

/**
 * Fewest common leading tokens of the prompts joining together that are prefilled once for all
 * of them (below it, the extra prefill call and the copy of its cache rows cost about what they
 * save).
 */
const MIN_SHARED_PREFIX = 16;

/**
 * Default bytes of prompt KV kept for later prompts that begin with the same tokens (see
 * {@link DecodeEngineOptions.prefixCacheBytes}; the server's `SERVE_PREFIX_CACHE_MB`).
 */
export const PREFIX_CACHE_BYTES = 256 * 2 ** 20;

/** Most kept prompts (each a cache row), bounding the per-prompt search. */
const KEPT_PROMPTS = 512;

/** A loaded model as the engine decodes with it. */
export interface DecodeModel {
  /** Unique per loaded checkpoint: requests with one key share a batch. */
  key: string;
  config: DecoderConfig;
  /** Session of `buildDecodeGraph(config, { lastOnly: true })`. */
  session: ort.InferenceSession;
  /** One tensor per decoder parameter, by HF name. */
  parameters: Record<string, ort.Tensor>;
  /** Frees `session` when the model owns it (absent when it is shared); never while decoding. */
  release?: () => Promise<void>;
}

/** Why a choice ended: OpenAI's `stop`/`length`, or ours. */
export type EngineFinish = "stop" | "length" | "cancelled" | "error";

/**
 * The log-probabilities of one sampled token under the distribution it was sampled from before
 * top-p: log-softmax(logits / T) at the request's temperature T (T = 1 for greedy requests), as
 * the trainer scores a rollout's tokens at the rollout temperature (`Policy.score` with
 * `temperature`); vLLM's `--logprobs-mode processed_logprobs` at `top_p` 1.
 */
export interface TokenLogprob {
  /** ln p(token). */
  logprob: number;
  /** The `DecodeRequest.topLogprobs` most likely tokens, most likely first: [id, ln p]. */
  top: [number, number][];
}

/** Where one choice's tokens go. */
export interface ChoiceSink {
  /**
   * A sampled token that is not an end-of-sequence token, with its log-probs when the request
   * asked for them (`topLogprobs`). Return true to end the choice here (a stop string appeared
   * in its text).
   */
  token(id: number, logprob?: TokenLogprob): boolean;
  /**
   * The choice ended, after `tokens` generated tokens (an ending EOS counted); `error` carries
   * the cause of an `error`. Called once.
   */
  finish(reason: EngineFinish, info: { tokens: number; error?: unknown }): void;
}

/** One request: a prompt and its `choices.length` continuations. */
export interface DecodeRequest {
  model: DecodeModel;
  /** Prompt token ids (non-empty; prompt + maxNewTokens within max_position_embeddings). */
  prompt: number[];
  /** New-token limit of each choice (≥ 1). */
  maxNewTokens: number;
  sampling: SampleOptions;
  /** Seed of the choices' sampling streams (see module doc). */
  seed: number;
  /**
   * Stream index of choice 0 (default 0): choice j draws from `choiceRng(seed, firstChoice + j)`.
   */
  firstChoice?: number;
  /** Token ids that end a choice (not passed to the sink). */
  eosTokenIds: readonly number[];
  /**
   * Report each token's log-prob and this many most likely alternatives (0–20) to the sinks;
   * undefined: none.
   */
  topLogprobs?: number;
  choices: ChoiceSink[];
  /** Aborted when the client goes away: the request's sequences leave at the next step. */
  signal?: AbortSignal;
}

/** Thrown by {@link DecodeEngine.submit} when the queue is full. */
export class QueueFullError extends Error {
  override name = "QueueFullError";
  constructor(message: string, readonly retryAfterS: number) {
    super(message);
  }
}

/** What a released request did (for tests and logs). */
export interface Release {
  /** `cancelled` if the client went away, else the first choice's reason. */
  reason: EngineFinish;
  /** Tokens generated over all its choices. */
  tokens: number;
}

/** Options of {@link DecodeEngine}. */
export interface DecodeEngineOptions {
  /** Most sequences decoded together, over all models (default 32). */
  maxBatch?: number;
  /** Most sequences waiting to join (default 64); more get a QueueFullError. */
  maxQueue?: number;
  /**
   * Most new tokens (rows × columns) per prefill call (default: a 3·10¹¹ FLOP forward call,
   * `3e11 / (6 · parameters)` within [256, 24576], as the trainer's Policy sizes them).
   */
  maxTokensPerCall?: number;
  /**
   * Fewest common leading tokens of distinct prompts joining together that are prefilled once
   * (default 16; tests lower it).
   */
  minSharedPrefix?: number;
  /**
   * Bytes of prompt KV kept after each admission, least recently used dropped first (default
   * 256 MiB; 0 keeps none): a later prompt that begins with a kept prompt's tokens (a group's
   * copies of one task arriving apart, the next turn's request over the same rules, a client
   * repeating its system prompt) copies those slots instead of prefilling them again, as vLLM's
   * automatic prefix caching does with blocks.
   */
  prefixCacheBytes?: number;
  /** Awaited before every iteration (tests hold the loop with it). */
  beforeStep?: () => Promise<void> | void;
  /** Called when a request has no sequence left. */
  onRelease?: (release: Release) => void;
}

/** A request in the engine. */
interface Pending {
  req: DecodeRequest;
  live: number;
  tokens: number;
  reason?: EngineFinish;
  cancelled: boolean;
}

/** One sequence being decoded. */
interface Row {
  p: Pending;
  choice: number;
  rng: Rng;
  /** Tokens generated. */
  count: number;
  last: number;
  /** Tokens fed (prompt + generated so far): its next position and its real cache slots. */
  real: number;
  /** Logits (V,) of its next token. */
  logits: Float32Array;
  done: boolean;
}

/** One model's running sequences and their cache. */
interface Batch {
  model: DecodeModel;
  cache: KvCache;
  rows: Row[];
}

/**
 * A prompt prefix kept for later admissions of its model: `tokens` are slots
 * [end − tokens.length, end) of row `row` of `cache` — the cache its admission prefilled, never
 * written there again (decode steps only append after `end`; leaving rows gather into a new
 * cache), so keeping a prompt copies nothing.
 */
interface KeptPrefix {
  key: string;
  tokens: number[];
  cache: KvCache;
  row: number;
  end: number;
}

/** The continuous-batching scheduler (see module doc). */
export class DecodeEngine {
  readonly maxBatch: number;
  readonly maxQueue: number;
  #waiting: Pending[] = [];
  /** Kept prompt prefixes, most recently used last. */
  #kept: KeptPrefix[] = [];
  #batches = new Map<string, Batch>();
  #loop: Promise<void> | null = null;
  /** Moving average of an iteration's duration (ms), for Retry-After. */
  #stepMs = 0;

  constructor(private readonly opts: DecodeEngineOptions = {}) {
    this.maxBatch = opts.maxBatch ?? 32;
    this.maxQueue = opts.maxQueue ?? 64;
  }

  /** Sequences being decoded now. */
  get active(): number {
    let n = 0;
    for (const b of this.#batches.values()) n += b.rows.filter((r) => !r.done).length;
    return n;
  }

  /** Sequences waiting to join. */
  get waiting(): number {
    return this.#waiting.reduce((n, p) => n + p.req.choices.length, 0);
  }

  /**
   * Bytes of prompt KV kept now for later prompts (each cache counted once however many kept
   * prefixes it holds); at most `prefixCacheBytes`.
   */
  get keptPrefixBytes(): number {
    return [...new Set(this.#kept.map((k) => k.cache))].reduce((n, c) => n + c.bytes, 0);
  }

  /**
   * Queues a request; its sinks hear of every token and of the end of each choice.
   * @throws {QueueFullError} when `maxBatch + maxQueue` sequences are already decoding or waiting.
   * @throws {RangeError} when it has more choices than `maxBatch`, no prompt or no token limit.
   */
  submit(req: DecodeRequest): void {
    const n = req.choices.length;
    if (n < 1 || n > this.maxBatch) {
      throw new RangeError(
        `Cannot decode a request as its choices must be in [1, ${this.maxBatch}]: current value is ${n}`,
      );
    }
    if (req.prompt.length === 0 || !(req.maxNewTokens >= 1)) {
      throw new RangeError(
        "Cannot decode a request as it must have a prompt and a token limit ≥ 1",
      );
    }
    if (this.active + this.waiting + n > this.maxBatch + this.maxQueue) {
      throw new QueueFullError(
        `Cannot accept the request as the decode queue is full: ${this.active} sequences decoding and ${this.waiting} waiting (limit ${
          this.maxBatch + this.maxQueue
        })`,
        this.#retryAfterS(),
      );
    }
    const p: Pending = { req, live: n, tokens: 0, cancelled: false };
    req.signal?.addEventListener("abort", () => (p.cancelled = true), { once: true });
    if (req.signal?.aborted) p.cancelled = true;
    this.#waiting.push(p);
    this.#loop ??= this.#run().finally(() => (this.#loop = null));
  }

  /** Resolves when nothing is decoding or waiting. */
  async idle(): Promise<void> {
    while (this.#loop) await this.#loop;
  }

  /**
   * Seconds until a slot is likely free: the fewest tokens any running sequence has left, times
   * the moving average of an iteration's duration; at least 1.
   */
  #retryAfterS(): number {
    let left = Infinity;
    for (const b of this.#batches.values()) {
      for (const r of b.rows) if (!r.done) left = Math.min(left, r.p.req.maxNewTokens - r.count);
    }
    if (!Number.isFinite(left)) return 1;
    return Math.max(1, Math.ceil((left * this.#stepMs) / 1000));
  }

  async #run(): Promise<void> {
    while (this.#waiting.length > 0 || this.#batches.size > 0) {
      try {
        await this.opts.beforeStep?.();
        const t0 = performance.now();
        this.#dropCancelled();
        await this.#admit();
        for (const batch of [...this.#batches.values()]) await this.#step(batch);
        this.#stepMs = 0.9 * this.#stepMs + 0.1 * (performance.now() - t0);
      } catch (e) {
        this.#failAll(e); // a bug, not a request's fault: end everything rather than hang
      }
      await new Promise((resolve) => setImmediate(resolve)); // HTTP I/O runs between steps
    }
  }

  #failAll(e: unknown): void {
    for (const p of this.#waiting.splice(0)) {
      p.req.choices.forEach((_, i) => this.#end(p, i, "error", 0, e));
    }
    for (const b of this.#batches.values()) {
      for (const r of b.rows) if (!r.done) this.#endRow(r, "error", e);
    }
    this.#batches.clear();
  }

  #dropCancelled(): void {
    this.#waiting = this.#waiting.filter((p) => {
      if (!p.cancelled) return true;
      p.req.choices.forEach((_, i) => this.#end(p, i, "cancelled", 0));
      return false;
    });
    for (const b of this.#batches.values()) {
      for (const r of b.rows) if (!r.done && r.p.cancelled) this.#endRow(r, "cancelled");
    }
  }

  /** Moves waiting requests into their model's batch while there is room (FIFO). */
  async #admit(): Promise<void> {
    let room = this.maxBatch - this.active;
    const joining = new Map<string, Pending[]>();
    while (this.#waiting.length > 0 && this.#waiting[0].req.choices.length <= room) {
      const p = this.#waiting.shift()!;
      room -= p.req.choices.length;
      const list = joining.get(p.req.model.key) ?? [];
      list.push(p);
      joining.set(p.req.model.key, list);
    }
    for (const list of joining.values()) {
      const model = list[0].req.model;
      let prefilled;
      try {
        prefilled = await this.#prefill(model, list);
      } catch (e) {
        for (const p of list) p.req.choices.forEach((_, i) => this.#end(p, i, "error", 0, e));
        continue;
      }
      const old = this.#batches.get(model.key);
      const kept = old ? old.rows.filter((r) => !r.done) : [];
      const parts = [{ cache: prefilled.cache, rows: prefilled.rows.map((r) => r.source) }];
      if (old && kept.length > 0) {
        parts.unshift({ cache: old.cache, rows: kept.map((r) => old.rows.indexOf(r)) });
      }
      const rows = [...kept, ...prefilled.rows.map((r) => r.row)];
      this.#batches.set(model.key, { model, rows, cache: gatherRows(parts, rows) });
    }
  }

  /**
   * Prefills the prompts of `list` (left-padded, in windows) → their rows and cache. Identical
   * prompts are prefilled once and their rows share that cache row (as the choices of one
   * request do): the same tokens give the same keys, values and logits. A prompt that begins
   * with a kept prefix (at least `minSharedPrefix` tokens of a prompt or common prefix prefilled
   * earlier, see {@link prefixCacheBytes}) starts from a copy of its keys and values and
   * prefills only its own suffix; distinct prompts that begin with the same tokens (an
   * environment's prompts share its chat template and rules) and have no longer kept prefix
   * prefill that common prefix once first (see {@link sharedPrefix}). Every prompt's keys and
   * values are then kept for later admissions.
   */
  async #prefill(model: DecodeModel, list: Pending[]) {
    const c = model.config;
    const prompts: number[][] = [], index = new Map<string, number>();
    const sourceOf = list.map((p) => {
      const key = p.req.prompt.join(",");
      let r = index.get(key);
      if (r === undefined) index.set(key, r = prompts.push(p.req.prompt) - 1);
      return r;
    });
    const starts = await this.#prefixes(model, prompts);
    const held = starts.map((x) => x.shared), most = Math.max(...held);
    let cache: KvCache, logits: Float32Array;
    if (most > 0) {
      const suffixes = prompts.map((p, i) => p.slice(held[i]));
      const width = Math.max(...suffixes.map((s) => s.length));
      // row i starts from its prefix's slots, aligned at the newest: [empty, prefix_i]; after
      // the fill [empty, prefix_i, empty, own suffix], shifted to [empty, prefix_i, own
      // suffix] (left-padded as a whole prompt)
      const parts = starts.map((x) => x.part ?? { cache: new KvCache(c, 1), rows: [0], end: 0 });
      cache = KvCache.gather(parts, Math.max(...parts.map((x) => x.end)) - most);
      logits = await this.#fill(model, cache, suffixes, held);
      cache.shiftOldest(suffixes.map((s) => width - s.length), most);
    } else {
      cache = new KvCache(c, prompts.length);
      logits = await this.#fill(model, cache, prompts, held);
    }
    prompts.forEach((tokens, i) => {
      // a kept prefix that already holds all but its last token serves it as well
      if (held[i] === tokens.length - 1) return;
      this.#keep({ key: model.key, tokens, cache, row: i, end: cache.used });
    });
    const v = c.vocab_size;
    const rows = list.flatMap((p, q) =>
      p.req.choices.map((_, i) => ({
        source: sourceOf[q],
        row: {
          p,
          choice: i,
          rng: choiceRng(p.req.seed, (p.req.firstChoice ?? 0) + i),
          count: 0,
          last: -1,
          real: p.req.prompt.length,
          logits: logits.subarray(sourceOf[q] * v, (sourceOf[q] + 1) * v),
          done: false,
        } satisfies Row,
      }))
    );
    return { cache, rows };
  }

  /**
   * Per prompt of `prompts`, the kept prefix it starts from (null and 0 when none is worth it):
   * the kept prefix of this model sharing the most leading tokens with it, at least
   * `minSharedPrefix` and short of its last token (whose logits it needs), as a part of
   * `KvCache.gather` that ends after its first `shared` slots. When the prompts have a longer
   * common prefix than some of them find kept, that common prefix is prefilled now (one row) and
   * kept first (requests over HTTP reach the engine a few at a time, between steps, so one
   * admission rarely holds them all).
   */
  async #prefixes(
    model: DecodeModel,
    prompts: number[][],
  ): Promise<{ part: { cache: KvCache; rows: number[]; end: number } | null; shared: number }[]> {
    const min = Math.max(1, this.opts.minSharedPrefix ?? MIN_SHARED_PREFIX);
    let best = prompts.map((p) => this.#longestKept(model.key, p, min));
    const own = sharedPrefix(prompts, min);
    if (own > 0 && best.some((b) => b.shared < own)) {
      const cache = new KvCache(model.config, 1);
      const tokens = prompts[0].slice(0, own);
      const common: KeptPrefix = { key: model.key, tokens, cache, row: 0, end: own };
      await this.#fill(model, cache, [common.tokens], [0]);
      best = best.map((b) => b.shared >= own ? b : { kept: common, shared: own });
      this.#keep(common);
    }
    for (const { kept } of best) {
      const at = kept ? this.#kept.indexOf(kept) : -1;
      if (at >= 0) this.#kept.push(...this.#kept.splice(at, 1)); // most recently used last
    }
    return best.map(({ kept, shared }) => ({
      part: kept && {
        cache: kept.cache,
        rows: [kept.row],
        end: kept.end - kept.tokens.length + shared,
      },
      shared,
    }));
  }

  /** The kept prefix of model `key` sharing the most leading tokens (≥ `min`) with `prompt`. */
  #longestKept(
    key: string,
    prompt: number[],
    min: number,
  ): { kept: KeptPrefix | null; shared: number } {
    let kept: KeptPrefix | null = null, shared = 0;
    const limit = prompt.length - 1;
    for (const k of this.#kept) {
      if (k.key !== key) continue;
      const n = Math.min(limit, k.tokens.length);
      let i = 0;
      while (i < n && prompt[i] === k.tokens[i]) i++;
      if (i >= min && i > shared) [kept, shared] = [k, i];
    }
    return { kept, shared };
  }

  /**
   * Keeps `entry` for later prompts of its model; a kept prefix of its tokens is dropped (this
   * one serves every prompt it served), then the least recently used while the caches the kept
   * prefixes hold exceed `prefixCacheBytes` (a cache counted once however many prefixes it holds).
   */
  #keep(entry: KeptPrefix): void {
    const { key, tokens, cache } = entry;
    const budget = this.opts.prefixCacheBytes ?? PREFIX_CACHE_BYTES;
    if (cache.bytes > budget) return;
    const covered = (k: KeptPrefix) =>
      k.key === key && k.tokens.length <= tokens.length &&
      k.tokens.every((t, i) => t === tokens[i]);
    this.#kept = this.#kept.filter((k) => !covered(k));
    this.#kept.push(entry);
    while (this.#kept.length > KEPT_PROMPTS || this.keptPrefixBytes > budget) this.#kept.shift();
  }

  /**
   * Feeds `tokens` (one list per cache row, left-padded to the longest, row r at positions
   * `held[r]`, `held[r]` + 1, …) into `cache`, in windows of columns; row r attends to the newest
   * `held[r]` slots the cache holds already (its prefix). → the logits (rows, V) of each row's
   * last token.
   */
  async #fill(
    model: DecodeModel,
    cache: KvCache,
    tokens: number[][],
    held: readonly number[],
  ): Promise<Float32Array> {
    const c = model.config, pad = c.pad_token_id ?? 0, b = tokens.length;
    // the cache grows as columns are appended: early windows attend over fewer slots
    const width = Math.max(...tokens.map((p) => p.length)), before = cache.used;
    const budget = this.opts.maxTokensPerCall ??
      Math.min(24576, Math.max(256, Math.round(3e11 / (6 * parameterCount(c)))));
    // columns per call: within the token budget, and with attention scores (rows, H, columns,
    // keys) of at most SCORE_ELEMENTS floats: past a few MiB the score tensors leave the CPU
    // caches and every elementwise op over them (scale, bias, softmax, split) slows down
    const scoreColumns = Math.floor(
      SCORE_ELEMENTS / (b * c.num_attention_heads * (before + width)),
    );
    const chunk = Math.max(1, Math.min(Math.floor(budget / b), scoreColumns));
    let logits: Float32Array = new Float32Array(0);
    for (let a = 0; a < width; a += chunk) {
      const t = Math.min(chunk, width - a);
      const ids = new BigInt64Array(b * t), pos = new BigInt64Array(b * t);
      const k = cache.capacity + t;
      const mask = new Float32Array(b * k);
      tokens.forEach((row, r) => {
        const padCount = width - row.length;
        mask.fill(1, r * k + before - held[r], r * k + before); // its prefix's slots
        mask.fill(1, r * k + before + padCount, r * k + cache.used); // own columns before a
        for (let j = 0; j < t; j++) {
          const col = a + j, real = col >= padCount;
          ids[r * t + j] = BigInt(real ? row[col - padCount] : pad);
          pos[r * t + j] = BigInt(real ? held[r] + col - padCount : 0);
          mask[r * k + cache.capacity + j] = real ? 1 : 0;
        }
      });
      const out = await model.session.run({
        ...model.parameters,
        ...cache.feeds(),
        input_ids: tensor("int64", ids, [b, t]),
        position_ids: tensor("int64", pos, [b, t]),
        attention_mask: tensor("float32", mask, [b, k]),
      });
      cache.append(out, t);
      logits = out.logits.data as Float32Array;
      if (a + chunk < width) await this.#interleave();
    }
    return logits;
  }

  /**
   * Between two prefill windows of an admission: one decode step of every running batch, then
   * the HTTP I/O. Without it a long prompt stalled every stream for its whole prefill (a
   * 34.5K-token prompt on a 40,960-context model: 25.5 s without a token); now for one window.
   * The batch of the admitting model steps too: the admission gathers its rows afterwards.
   */
  async #interleave(): Promise<void> {
    if (this.#batches.size === 0) return;
    this.#dropCancelled();
    for (const batch of [...this.#batches.values()]) await this.#step(batch);
    await new Promise((resolve) => setImmediate(resolve));
  }

  /** Samples one token for every running row of `batch`, then runs one decode step. */
  async #step(batch: Batch): Promise<void> {
    for (const r of batch.rows) {
      if (r.done) continue;
      const req = r.p.req;
      try {
        const token = sampleToken(r.logits, req.sampling, r.rng);
        r.count++;
        r.p.tokens++;
        r.last = token;
        if (req.eosTokenIds.includes(token)) this.#endRow(r, "stop");
        else if (
          req.choices[r.choice].token(
            token,
            req.topLogprobs === undefined
              ? undefined
              : tokenLogprob(r.logits, token, req.topLogprobs, temperatureOf(req.sampling)),
          )
        ) this.#endRow(r, "stop");
        else if (r.count >= req.maxNewTokens) this.#endRow(r, "length");
      } catch (e) {
        if (!r.done) this.#endRow(r, "error", e);
      }
    }
    const alive = batch.rows.filter((r) => !r.done);
    if (alive.length === 0) {
      this.#batches.delete(batch.model.key);
      return;
    }
    if (batch.rows.length - alive.length >= Math.max(1, batch.rows.length / 4)) {
      const source = alive.map((r) => batch.rows.indexOf(r));
      batch.cache = gatherRows([{ cache: batch.cache, rows: source }], alive);
      batch.rows = alive;
    }
    const { model, cache, rows } = batch;
    const b = rows.length, k = cache.capacity + 1, pad = model.config.pad_token_id ?? 0;
    const ids = new BigInt64Array(b), pos = new BigInt64Array(b);
    const mask = new Float32Array(b * k);
    rows.forEach((r, i) => {
      // a finished row left in the batch is fed padding that it does not attend to; unused
      ids[i] = BigInt(r.done ? pad : r.last);
      pos[i] = BigInt(r.done ? 0 : r.real);
      mask.fill(1, i * k + cache.used - r.real, i * k + cache.used);
      mask[i * k + cache.capacity] = r.done ? 0 : 1;
    });
    let out: ort.InferenceSession.ReturnType;
    try {
      out = await model.session.run({
        ...model.parameters,
        ...cache.feeds(),
        input_ids: tensor("int64", ids, [b, 1]),
        position_ids: tensor("int64", pos, [b, 1]),
        attention_mask: tensor("float32", mask, [b, k]),
      });
    } catch (e) {
      for (const r of rows) if (!r.done) this.#endRow(r, "error", e);
      this.#batches.delete(model.key);
      return;
    }
    cache.append(out, 1);
    const logits = out.logits.data as Float32Array, v = model.config.vocab_size;
    rows.forEach((r, i) => {
      r.real++;
      r.logits = logits.subarray(i * v, (i + 1) * v);
    });
  }

  #endRow(r: Row, reason: EngineFinish, error?: unknown): void {
    r.done = true;
    this.#end(r.p, r.choice, reason, r.count, error);
  }

  #end(p: Pending, choice: number, reason: EngineFinish, tokens: number, error?: unknown): void {
    p.reason ??= reason;
    try {
      p.req.choices[choice].finish(reason, { tokens, error });
    } catch {
      // a sink that fails on its end has nobody left to tell
    } finally {
      if (--p.live === 0) {
        this.opts.onRelease?.({ reason: p.cancelled ? "cancelled" : p.reason, tokens: p.tokens });
      }
    }
  }
}

/**
 * The cache of `rows` (taken from `parts` in order) with the oldest slots no row attends to
 * dropped: a row attends to its newest `real` slots. A single part whose rows are kept as they
 * are, with nothing to drop (a first admission of one choice per request), is returned without
 * a copy.
 */
function gatherRows(parts: { cache: KvCache; rows: number[] }[], rows: readonly Row[]): KvCache {
  const used = Math.max(...parts.map((p) => p.cache.used));
  const drop = Math.min(...rows.map((r) => used - r.real));
  const [only] = parts;
  if (
    parts.length === 1 && drop === 0 && only.rows.length === only.cache.rows &&
    only.rows.every((r, i) => r === i)
  ) return only.cache;
  return KvCache.gather(parts, drop);
}

/** The temperature a request's log-probs are given at: its own, 1 when greedy. */
function temperatureOf(s: SampleOptions): number {
  return s.greedy || !(s.temperature && s.temperature > 0) ? 1 : s.temperature;
}

/**
 * ln softmax(logits / T)[token] and the `k` largest entries of ln softmax(logits / T) ([id, ln p],
 * most likely first; ties by lower id), computed in float64 from the float32 logits (V,) at
 * temperature T (default 1, the raw distribution).
 */
export function tokenLogprob(
  logits: Float32Array,
  token: number,
  k: number,
  temperature = 1,
): TokenLogprob {
  const inv = 1 / temperature;
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp((logits[i] - max) * inv);
  const logZ = max * inv + Math.log(sum);
  const top: [number, number][] = [];
  if (k > 0) {
    // one pass keeping the k best in a sorted list (k ≤ 20)
    for (let i = 0; i < logits.length; i++) {
      const v = logits[i];
      if (top.length === k && v <= top[k - 1][1]) continue;
      let at = top.length;
      while (at > 0 && top[at - 1][1] < v) at--;
      top.splice(at, 0, [i, v]);
      if (top.length > k) top.pop();
    }
  }
  return {
    logprob: logits[token] * inv - logZ,
    top: top.map(([i, v]) => [i, v * inv - logZ]),
  };
}

/**
 * Tokens every prompt of `prompts` begins with, when that is worth a prefill of its own: at
 * least `min` tokens and more than one distinct prompt; else 0. Each prompt keeps at least one
 * token of its own, whose logits are its first token's.
 */
export function sharedPrefix(prompts: readonly number[][], min: number): number {
  if (prompts.length < 2) return 0;
  let n = Math.min(...prompts.map((p) => p.length)) - 1;
  for (const p of prompts) {
    let i = 0;
    while (i < n && p[i] === prompts[0][i]) i++;
    n = i;
  }
  return n >= Math.max(1, min) ? n : 0;
}

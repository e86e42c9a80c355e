/**
 * Rollouts on OpenAI-compatible inference endpoints (JobSpec `rollout.engine`; README.md, "Remote
 * rollout engines"): our own server (`deno task serve`), vLLM, or anything that speaks the same
 * request fields. It plugs into the rollout loop at the same place as the local decode: a
 * {@link BatchPolicy} per turn.
 *
 * Token-exact: each prompt goes out as token ids (`POST {base_url}/v1/completions` with
 * `prompt: number[]`, the trainer's own prompt ids) and the sampled tokens come back as ids with
 * their log-probs (`logprobs: 0`, `return_tokens_as_token_ids: true`, tokens `"token_id:<id>"`).
 * The response text is decoded from those ids and cut after the stop string exactly as the local
 * decode cuts it; the ids are what the trainer scores and trains on, never the text tokenized
 * again. Prompt i of a turn whose local seed is s is sent with `sampling_stream: {seed: s, row: i}`
 * (our server's extension: it draws from `choiceRng(s, i)`, the local decode's stream of row i,
 * so our servers sample exactly what the local decode samples) and with `seed: choiceSeed(s, i)`,
 * that stream's start, distinct per row, for engines that ignore the extension (vLLM, SGLang draw
 * from their own generators: same tasks, other texts).
 *
 * Spread and faults: a turn's requests form one queue; every live endpoint takes from it with at
 * most `maxInFlight` requests at once. A request that fails (connection error, timeout, 5xx, 404
 * for the version's model) or answers from another policy version (the response's `model` is not
 * the version's name: refused, counted in `stale_refused`) goes back to the queue and its endpoint
 * is dropped until the next sync; a 429 waits and goes back without dropping it. When every
 * endpoint is down, each is synced again, up to `allDownRetries` times with a doubling delay; then
 * the rollout fails with a {@link RemoteEngineError} naming the endpoints. The job's cancel
 * signal aborts every request in flight.
 *
 * Versions: version k is the policy after k updates, loaded on every endpoint as `<model>-v<k>`
 * (`sync`) before a step's rollouts: a full checkpoint through our server's
 * `POST /v1/load_checkpoint`, a LoRA adapter through vLLM's `POST /v1/load_lora_adapter`
 * (merged by our server onto the base loaded under `<model>`). The previous version is unloaded.
 */
import { checkAnnotatorUrl } from "../../jobs/mod.ts";
import type { BatchPolicy, PolicyResponses } from "./rollout.ts";
import type { TextPolicy } from "./text_policy.ts";
import { withoutImagePlaceholders } from "./text_policy.ts";
import { choiceSeed, stopStringHit } from "../model/mod.ts";

/** One endpoint as the worker uses it (JobSpec `rollout.engine.endpoints[i]`, key resolved). */
export interface RemoteEndpoint {
  baseUrl: string;
  model: string;
  /** Bearer token (the decrypted `api_key_secret`); null: none sent. */
  apiKey: string | null;
}

/** Where a published policy version lies, as endpoints read it. */
export interface PublishedPolicy {
  /** `checkpoint`: a Hugging Face folder; `lora`: a PEFT adapter folder. */
  kind: "checkpoint" | "lora";
  /** Folder URI, e.g. `s3://bucket/tenants/…/rollout-policy/v3/attempt-1/`. */
  path: string;
  /** LoRA: the base model's Hugging Face folder, loaded under `<model>` on first use. */
  basePath?: string;
}

/** Options of {@link RemoteRolloutEngine}. */
export interface RemoteEngineOptions {
  endpoints: RemoteEndpoint[];
  /** Requests in flight per endpoint (≥ 1). */
  maxInFlight: number;
  /** Per-request timeout (ms). */
  timeoutMs: number;
  /** Syncs of every endpoint when all are down, before the rollout fails (default 3). */
  allDownRetries?: number;
  /** First delay before such a retry (ms, doubling; default 1000). */
  retryDelayMs?: number;
  /** Internal hosts the endpoints may be on (default `SEED_ANNOTATOR_ALLOWED_HOSTS`). */
  allowedHosts?: readonly string[];
}

/** Thrown when no endpoint can serve the rollout (after the retries), naming each one. */
export class RemoteEngineError extends Error {
  override name = "RemoteEngineError";
  constructor(message: string, readonly endpoints: string[], options?: ErrorOptions) {
    super(message, options);
  }
}

/** Counters of one step's remote rollouts (metrics `rollout/…`). */
export interface RemoteStepStats {
  /** Completions answered and used. */
  requests: number;
  /** Requests re-run after a failure, a timeout or a stale answer. */
  reruns: number;
  /** Answers refused because they came from another policy version. */
  staleRefused: number;
  /** Endpoints dropped during the step. */
  endpointFailures: number;
}

/** A request of a turn that is not answered yet. */
interface Job {
  index: number;
  body: Record<string, unknown>;
}

/**
 * Parses `"token_id:<id>"` (vLLM's `return_tokens_as_token_ids`).
 * @throws RangeError when `token` is not in that form.
 */
export function parseTokenId(token: string): number {
  const m = /^token_id:(\d{1,10})$/.exec(token);
  if (!m) {
    throw new RangeError(
      `Cannot read a token id as the token must be "token_id:<id>": current value is ${
        JSON.stringify(String(token).slice(0, 40))
      }`,
    );
  }
  return Number(m[1]);
}

/** A failure of one request on one endpoint. */
class EndpointFailure extends Error {
  constructor(message: string, readonly kind: "down" | "stale" | "busy", readonly waitMs = 0) {
    super(message);
  }
}

/** Live state of an endpoint. */
interface EndpointState {
  endpoint: RemoteEndpoint;
  /** Version loaded there (null: none, or dropped). */
  version: number | null;
  lastError: string | null;
}

/** The remote engine of one job (see module doc). */
export class RemoteRolloutEngine {
  readonly #endpoints: EndpointState[];
  #published: PublishedPolicy | null = null;
  #version: number | null = null;
  /** Counters since the last {@link takeStats}. */
  #stats: RemoteStepStats = { requests: 0, reruns: 0, staleRefused: 0, endpointFailures: 0 };

  /** @throws OutboundUrlError naming `rollout.engine.endpoints[i].base_url`. */
  constructor(readonly opts: RemoteEngineOptions) {
    opts.endpoints.forEach((e, i) =>
      checkAnnotatorUrl(e.baseUrl, {
        field: `rollout.engine.endpoints[${i}].base_url`,
        allowedHosts: opts.allowedHosts,
      })
    );
    this.#endpoints = opts.endpoints.map((endpoint) => ({
      endpoint,
      version: null,
      lastError: null,
    }));
  }

  /** The version the endpoints were last told to load. */
  get version(): number | null {
    return this.#version;
  }

  /** Counters since the last call, reset. */
  takeStats(): RemoteStepStats {
    const s = this.#stats;
    this.#stats = { requests: 0, reruns: 0, staleRefused: 0, endpointFailures: 0 };
    return s;
  }

  /**
   * Tells every endpoint to load `policy` as version `version` (and to unload the previous one).
   * Endpoints that fail are left down until the next sync (or the all-down retry).
   * @throws RemoteEngineError when no endpoint loaded it.
   */
  async sync(version: number, policy: PublishedPolicy, signal?: AbortSignal): Promise<void> {
    this.#published = policy;
    this.#version = version;
    await Promise.all(this.#endpoints.map((e) => this.#load(e, signal)));
    if (!this.#endpoints.some((e) => e.version === version)) {
      throw this.#allDown(`load policy version ${version}`);
    }
  }

  /**
   * The batched policy of one turn: prompt i is sent as ids with the local decode's stream of row
   * i of a batch seeded `seedOfTurn()` (module doc);
   * the answer carries each response's engine log-probs and policy version.
   */
  policy(
    theta: TextPolicy,
    options: { maxNewTokens: number; temperature: number; stop: string[]; signal?: AbortSignal },
    seedOfTurn: () => number,
  ): BatchPolicy {
    return async (prompts, images): Promise<PolicyResponses> => {
      if (images.some((x) => x.length > 0)) {
        throw new RangeError("Cannot send images to a remote rollout engine: only text prompts");
      }
      const seed = seedOfTurn();
      const jobs: Job[] = prompts.map((p, i) => ({
        index: i,
        body: {
          prompt: theta.promptIds(p),
          max_tokens: options.maxNewTokens,
          temperature: options.temperature,
          top_p: 1,
          seed: choiceSeed(seed, i),
          sampling_stream: { seed, row: i },
          stop: options.stop,
          logprobs: 0,
          return_tokens_as_token_ids: true,
        },
      }));
      const answers = await this.#runAll(jobs, options.signal);
      const out: Required<PolicyResponses> = {
        texts: [],
        responseIds: [],
        logprobs: [],
        versions: [],
        tokens: 0,
      };
      for (const a of answers) {
        const r = this.#toResponse(theta, a.ids, a.finish, options.stop);
        out.texts.push(r.text);
        out.responseIds.push(r.ids);
        out.logprobs.push(a.logprobs.slice(0, r.compared));
        out.versions.push(a.version);
        out.tokens += a.ids.length;
      }
      return out;
    };
  }

  /**
   * Text and trained ids of sampled ids, as `TextPolicy.generate` makes them locally: the text is
   * the ids decoded (special tokens dropped) and cut after the stop string; the trained ids follow
   * `TextPolicy.trainedIds` (under a chat template the sampled ids, in the plain form of the
   * builtin models the text encoded again, as locally). `compared` is how many leading sampled
   * ids the trained ids keep, the tokens whose engine log-probs are compared with θ_old. An ending
   * EOS that an engine leaves out of its answer (our server does; vLLM returns it) is put back as
   * the end-of-turn token, as the local decode keeps the EOS it sampled.
   */
  #toResponse(theta: TextPolicy, raw: number[], finish: string, stop: string[]) {
    const eos = new Set([...theta.stopTokenIds, theta.tokenizer.eosTokenId ?? -1]);
    let n = raw.length;
    while (n > 0 && eos.has(raw[n - 1])) n--;
    const ids = raw.slice(0, n);
    let text = theta.tokenizer.decode(ids, { skipSpecialTokens: true });
    const hit = stopStringHit(text, stop);
    let stopped = false;
    if (hit >= 0) {
      const s = stop.filter((x) =>
        x && text.startsWith(x, hit)
      ).sort((a, b) => b.length - a.length)[0];
      text = text.slice(0, hit + s.length);
      stopped = true;
    }
    if (theta.policy.config.vision_config) text = withoutImagePlaceholders(text);
    text = text.trim();
    const endedByEos = n < raw.length || (finish === "stop" && !stopped);
    const sampled = n < raw.length
      ? raw.slice(0, n + 1)
      : endedByEos && theta.endOfTurnId !== null
      ? [...ids, theta.endOfTurnId]
      : ids;
    const trained = theta.trainedIds(sampled, text, stopped);
    let compared = 0;
    while (compared < n && trained[compared] === raw[compared]) compared++;
    return { text, ids: trained, compared };
  }

  /** Runs every job on the live endpoints (see module doc); answers in job order. */
  async #runAll(jobs: Job[], signal?: AbortSignal) {
    type Answer = { ids: number[]; logprobs: number[]; finish: string; version: number };
    const answers: Answer[] = new Array(jobs.length);
    const queue = [...jobs];
    let retries = 0, delay = this.opts.retryDelayMs ?? 1000;
    while (queue.length > 0) {
      signal?.throwIfAborted();
      const live = this.#endpoints.filter((e) => e.version === this.#version);
      if (live.length === 0) {
        if (retries >= (this.opts.allDownRetries ?? 3)) throw this.#allDown("run the rollout");
        retries++;
        await sleep(delay, signal);
        delay *= 2;
        await Promise.all(this.#endpoints.map((e) => this.#load(e, signal)));
        continue;
      }
      // Every live endpoint takes jobs from the one queue, maxInFlight at a time; a failing
      // endpoint puts its job back and stops taking more (the loop above re-checks).
      await Promise.all(
        live.flatMap((e) =>
          Array.from({ length: this.opts.maxInFlight }, async () => {
            while (e.version === this.#version && queue.length > 0) {
              const job = queue.shift()!;
              try {
                answers[job.index] = await this.#complete(e, job, signal);
                this.#stats.requests++;
              } catch (err) {
                if (signal?.aborted) throw signal.reason;
                queue.push(job);
                this.#stats.reruns++;
                if (err instanceof EndpointFailure && err.kind === "busy") {
                  await sleep(err.waitMs, signal);
                  continue;
                }
                if (err instanceof EndpointFailure && err.kind === "stale") {
                  this.#stats.staleRefused++;
                }
                if (e.version !== null) this.#stats.endpointFailures++;
                e.version = null;
                e.lastError = err instanceof Error ? err.message : String(err);
              }
            }
          })
        ),
      );
    }
    return answers;
  }

  /** One completion on endpoint `e`. @throws EndpointFailure. */
  async #complete(e: EndpointState, job: Job, signal?: AbortSignal) {
    const version = this.#version!;
    const name = `${e.endpoint.model}-v${version}`;
    const res = await this.#post(e, "/v1/completions", { model: name, ...job.body }, signal);
    if (res.status === 429) {
      const wait = Number(res.headers.get("retry-after") ?? "1");
      await res.body?.cancel();
      throw new EndpointFailure("busy (429)", "busy", Math.min(30, wait || 1) * 1000);
    }
    const text = await res.text();
    if (!res.ok) throw new EndpointFailure(`HTTP ${res.status}: ${text.slice(0, 300)}`, "down");
    let body: {
      model?: unknown;
      choices?: {
        finish_reason?: string;
        logprobs?: { tokens?: string[]; token_logprobs?: (number | null)[] };
      }[];
    };
    try {
      body = JSON.parse(text);
    } catch {
      throw new EndpointFailure(`an answer that is not JSON: ${text.slice(0, 200)}`, "down");
    }
    if (body.model !== name) {
      throw new EndpointFailure(
        `an answer from model ${JSON.stringify(body.model)}, not ${name}`,
        "stale",
      );
    }
    const choice = body.choices?.[0];
    const tokens = choice?.logprobs?.tokens, lps = choice?.logprobs?.token_logprobs;
    if (!Array.isArray(tokens) || !Array.isArray(lps) || tokens.length !== lps.length) {
      throw new EndpointFailure(
        "an answer without logprobs.tokens and logprobs.token_logprobs of one length (does it take logprobs and return_tokens_as_token_ids?)",
        "down",
      );
    }
    try {
      return {
        ids: tokens.map(parseTokenId),
        logprobs: lps.map((x) => (typeof x === "number" ? x : NaN)),
        finish: choice?.finish_reason ?? "stop",
        version,
      };
    } catch (err) {
      throw new EndpointFailure((err as Error).message, "down");
    }
  }

  /** Loads the published version on `e` (unloading the one before); failures leave it down. */
  async #load(e: EndpointState, signal?: AbortSignal): Promise<void> {
    const policy = this.#published, version = this.#version;
    if (!policy || version === null || e.version === version) return;
    const name = `${e.endpoint.model}-v${version}`;
    const previous = e.version;
    e.version = null;
    try {
      if (policy.kind === "checkpoint") {
        await this.#admin(e, "/v1/load_checkpoint", {
          model_name: name,
          checkpoint_path: policy.path,
        }, signal);
      } else {
        if (policy.basePath) {
          // our server merges adapters onto a base loaded by name; vLLM serves its base itself
          // and answers 404 here, which is fine
          await this.#admin(
            e,
            "/v1/load_checkpoint",
            {
              model_name: e.endpoint.model,
              checkpoint_path: policy.basePath,
            },
            signal,
            { allow404: true },
          );
        }
        await this.#admin(e, "/v1/load_lora_adapter", {
          lora_name: name,
          lora_path: policy.path,
          base_model_name: e.endpoint.model,
        }, signal);
      }
      e.version = version;
      e.lastError = null;
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      e.lastError = err instanceof Error ? err.message : String(err);
      return;
    }
    if (previous !== null && previous !== version) {
      await this.#admin(
        e,
        "/v1/unload_lora_adapter",
        {
          lora_name: `${e.endpoint.model}-v${previous}`,
        },
        signal,
        { allow404: true },
      ).catch(() => {});
    }
  }

  async #admin(
    e: EndpointState,
    path: string,
    body: Record<string, unknown>,
    signal?: AbortSignal,
    opts: { allow404?: boolean } = {},
  ): Promise<void> {
    const res = await this.#post(e, path, body, signal);
    const text = await res.text();
    if (res.ok || (opts.allow404 && res.status === 404)) return;
    throw new Error(`${path} answered HTTP ${res.status}: ${text.slice(0, 300)}`);
  }

  /** POSTs JSON with the endpoint's key, the request timeout and the job's cancel signal. */
  async #post(e: EndpointState, path: string, body: unknown, signal?: AbortSignal) {
    const url = e.endpoint.baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "") + path;
    const timeout = AbortSignal.timeout(this.opts.timeoutMs);
    try {
      return await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(e.endpoint.apiKey ? { authorization: `Bearer ${e.endpoint.apiKey}` } : {}),
        },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw new EndpointFailure(
        timeout.aborted
          ? `no answer within ${this.opts.timeoutMs} ms`
          : `cannot connect: ${(err as Error).message}`,
        "down",
      );
    }
  }

  #allDown(what: string): RemoteEngineError {
    const urls = this.#endpoints.map((e) => e.endpoint.baseUrl);
    const why = this.#endpoints.map((e) => `${e.endpoint.baseUrl} (${e.lastError ?? "down"})`);
    return new RemoteEngineError(
      `Cannot ${what} as some rollout.engine endpoint must answer: none did, ${why.join("; ")}`,
      urls,
    );
  }
}

/** Waits `ms`, or rejects with the signal's reason when it aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Per-step gap between an engine's sampling log-probs and the trainer's θ_old log-probs. */
export interface LogprobGap {
  /** Tokens compared. */
  tokens: number;
  /** mean |ℓ_engine − ℓ_old| over the tokens (nats). */
  absMean: number;
  /** max |ℓ_engine − ℓ_old| (nats). */
  absMax: number;
  /**
   * KL(π_engine ‖ π_old) estimated on the sampled tokens with Schulman's k3 estimator
   * ("Approximating KL Divergence", 2020): mean of e^d − 1 − d, d = ℓ_old − ℓ_engine (≥ 0 per
   * token, unbiased when the tokens are drawn from π_engine, i.e. at temperature 1).
   */
  kl: number;
}

/**
 * The training/inference mismatch of a step: over every token where both are known,
 * `engine[i][k]` against `trainer[i][k]` (pairs of (T_i,) log-prob rows; a shorter engine row
 * compares its own tokens only; a null row is skipped). Null when no token was compared.
 */
export function logprobGap(
  engine: readonly (readonly number[] | null | undefined)[],
  trainer: readonly ArrayLike<number>[],
): LogprobGap | null {
  let n = 0, abs = 0, max = 0, kl = 0;
  engine.forEach((row, i) => {
    if (!row) return;
    const old = trainer[i];
    for (let k = 0; k < Math.min(row.length, old.length); k++) {
      if (!Number.isFinite(row[k])) continue;
      const d = old[k] - row[k];
      n++;
      abs += Math.abs(d);
      if (Math.abs(d) > max) max = Math.abs(d);
      kl += Math.expm1(d) - d;
    }
  });
  return n === 0 ? null : { tokens: n, absMean: abs / n, absMax: max, kl: kl / n };
}

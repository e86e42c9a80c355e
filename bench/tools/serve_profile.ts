/**
 * `deno run -A bench/tools/serve_profile.ts [--streams 1,32] [--tokens 64] [--models tiny,24m]
 * [--distinct | --boards] [--per-step N]` — where the inference server's decode loop spends its
 * time, without HTTP: the engine (workers/serve/engine.ts) decodes `streams` requests of the
 * bench's sokoban prompt at once (`--distinct`: each with a line of its own first; `--boards`: each
 * the first turn of its own task; neither repeats a prompt over the repeats; `--per-step N`: N
 * requests join before each iteration of the loop, as requests over HTTP arrive, instead of all at
 * once), each choice's text built as the server builds it (ChoiceText over the tokenizer) and each
 * token turned into an SSE chunk string, and the time goes to phases: onnxruntime `run` of
 * prefills and of decode steps, the sinks (text and chunk), and the rest (sampling, cache
 * gather and append, feeds). Not a test: numbers depend on the machine.
 */
import { cpuUsage } from "node:process";
import { benchArgs } from "../_args.ts";
import { SessionCache } from "../../workers/engine/mod.ts";
import { resolveEnvironment } from "../../workers/envs/mod.ts";
import { createBuiltinTiny, KvCache, Tokenizer } from "../../workers/model/mod.ts";
import { boardPrompts, model24m } from "../_serve_model.ts";
import { builtinVocabulary, probeFirstTurn } from "../../workers/seed/run/model_source.ts";
import { DecodeEngine } from "../../workers/serve/engine.ts";
import { decodeModel } from "../../workers/serve/models.ts";
import { ChoiceText } from "../../workers/serve/text.ts";

/** What `--help` prints. */
const USAGE = `Where the inference server's decode loop spends its time, without HTTP.

Usage: deno run -A bench/tools/serve_profile.ts [--streams 1,32] [--tokens 64] [--models tiny,24m]
  [--threads 2] [--repeat 2] [--prefill-tokens N] [--distinct | --boards] [--per-step N]

Flags:
  --streams A,B        concurrent requests per measurement (default 1,32)
  --tokens N           tokens generated per request (default 64)
  --models A,B         models: tiny, 24m (default tiny,24m)
  --threads N          onnxruntime's intra-op threads (default 2)
  --repeat N           measurements per row (default 2)
  --prefill-tokens N   most prompt tokens per engine call (default: the engine's)
  --distinct           each request with a line of its own first
  --boards             each request the first turn of its own sokoban task
  --per-step N         N requests join before each iteration of the loop`;

const args = benchArgs({
  name: "bench/tools/serve_profile.ts",
  usage: USAGE,
  options: {
    streams: { type: "string", default: "1,32" },
    tokens: { type: "string", default: "64" },
    models: { type: "string", default: "tiny,24m" },
    threads: { type: "string", default: "2" },
    repeat: { type: "string", default: "2" },
    "prefill-tokens": { type: "string" },
    distinct: { type: "boolean", default: false },
    boards: { type: "boolean", default: false },
    "per-step": { type: "string" },
  },
});

/** Time spent in KvCache copies (append and its growth, shifts, gather), ms. */
const copies = { ms: 0, gather: 0 };
// deno-lint-ignore no-explicit-any
const kv = KvCache as any;
for (
  const [obj, name] of [
    [kv.prototype, "append"],
    [kv.prototype, "shiftOldest"],
    [kv, "gather"],
  ] as const
) {
  const original = obj[name];
  obj[name] = function (this: unknown, ...a: unknown[]) {
    const t0 = performance.now();
    try {
      return original.apply(this, a);
    } finally {
      copies.ms += performance.now() - t0;
      if (name === "gather") copies.gather += performance.now() - t0;
    }
  };
}

const sokoban = await resolveEnvironment("sokoban");
const prompt = (await probeFirstTurn(sokoban, {})).prompt + "\n";
const boards = (await boardPrompts(sokoban, 512)).map((p) => p + "\n");
/** Requests submitted so far: `--distinct` and `--boards` never repeat a prompt. */
let sent = 0;
const sessions = new SessionCache({ threads: Number(args.threads) });
for (const name of args.models!.split(",")) {
  const hf = name === "tiny"
    ? createBuiltinTiny({ vocabulary: await builtinVocabulary(sokoban), seed: 1 })
    : model24m(await builtinVocabulary(sokoban));
  const tok = new Tokenizer(hf.tokenizer);
  const ids = tok.encode(prompt);
  const model = await decodeModel(name, hf.config, hf.parameters, sessions);
  const phase = { prefill: 0, decode: 0, sinks: 0, total: 0, steps: 0 };
  const run = model.session.run.bind(model.session);
  model.session.run = (async (feeds: Record<string, { dims: readonly number[] }>) => {
    const t0 = performance.now();
    const out = await run(feeds as never);
    const dt = performance.now() - t0;
    if (feeds.input_ids.dims[1] === 1) {
      phase.decode += dt;
      phase.steps++;
    } else phase.prefill += dt;
    return out;
  }) as never;
  for (const streams of args.streams!.split(",").map(Number)) {
    for (let rep = 0; rep < Number(args.repeat); rep++) {
      Object.assign(phase, { prefill: 0, decode: 0, sinks: 0, total: 0, steps: 0 });
      copies.ms = 0;
      copies.gather = 0;
      // --per-step N: N requests join before each iteration of the loop, as requests over HTTP
      // reach it a few per step; default all at once
      const later: (() => void)[] = [];
      const perStep = Number(args["per-step"] ?? Infinity);
      const engine = new DecodeEngine({
        maxBatch: streams,
        maxTokensPerCall: args["prefill-tokens"] ? Number(args["prefill-tokens"]) : undefined,
        beforeStep: () => later.splice(0, perStep).forEach((submit) => submit()),
      });
      let tokens = 0;
      const t0 = performance.now(), c0 = cpuUsage();
      for (let i = 0; i < streams; i++) {
        const n = sent++;
        const text = new ChoiceText(
          (x) => tok.decode(x, { skipSpecialTokens: true }),
          [],
        );
        const submit = () =>
          engine.submit({
            model,
            prompt: args.boards
              ? tok.encode(boards[n % boards.length])
              : args.distinct
              ? tok.encode(`#${n}\n${prompt}`)
              : ids,
            maxNewTokens: Number(args.tokens),
            sampling: { greedy: false, temperature: 1, topP: 1 },
            seed: i,
            eosTokenIds: [],
            choices: [{
              token(id) {
                const s0 = performance.now();
                const step = text.push(id);
                if (step.delta) {
                  new TextEncoder().encode(
                    `data: ${
                      JSON.stringify({
                        id: "x",
                        choices: [{ index: 0, delta: { content: step.delta } }],
                      })
                    }\n\n`,
                  );
                }
                tokens++;
                phase.sinks += performance.now() - s0;
                return step.stopped;
              },
              finish() {},
            }],
          });
        if (i === 0 || perStep === Infinity) submit();
        else later.push(submit);
      }
      await engine.idle();
      phase.total = performance.now() - t0;
      const c1 = cpuUsage(c0), cpuMs = (c1.user + c1.system) / 1000;
      const rest = phase.total - phase.prefill - phase.decode - phase.sinks;
      const f = (x: number) => x.toFixed(0);
      console.log(
        `${name} streams ${streams}: ${tokens} tokens in ${f(phase.total)} ms = ${
          (tokens / phase.total * 1000).toFixed(0)
        } tok/s, CPU ${f(cpuMs)} ms = ${(tokens / cpuMs * 1000).toFixed(0)} tok/CPU-s | prefill ${
          f(phase.prefill)
        } | decode ${f(phase.decode)} (${phase.steps} steps, ${
          (phase.decode / phase.steps).toFixed(2)
        } ms/step) | sinks ${f(phase.sinks)} | cache copies ${f(copies.ms)} (gather ${
          f(copies.gather)
        }) | rest ${f(rest - copies.ms)} ms`,
      );
    }
  }
}
await sessions.release();

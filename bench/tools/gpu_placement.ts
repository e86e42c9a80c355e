/**
 * `deno run -A bench/tools/gpu_placement.ts --ep webgpu|cuda|cpu`: which nodes of the model's
 * graphs onnxruntime runs on the provider and which it leaves to the CPU (a node without a kernel
 * for the provider, its opset version or its dtype falls back to the CPU, with copies between
 * devices).
 *
 * For the train (SEED objective), score and decode graphs of a small Llama-style config, a child
 * process loads the graph on the provider with onnxruntime's verbose log, and this process counts
 * the "Node placements" and the "kernel not found" lines by op type. Prints one block per graph.
 * Used by bench/tools/gpu_check.sh; the log format is onnxruntime 1.30's, so an unparsed log prints
 * its placement lines raw.
 */
import { benchArgs } from "../_args.ts";
import * as ort from "onnxruntime-node";
import type { DecoderConfig } from "../../workers/model/config.ts";
import { buildDecodeGraph, buildScoreGraph, buildTrainGraph } from "../../workers/model/llama.ts";
import { SEED_OBJECTIVE } from "../../workers/seed/objective.ts";

/** What `--help` prints. */
const USAGE = `Which nodes of the model's graphs onnxruntime runs on a provider.

Usage: deno run -A bench/tools/gpu_placement.ts [--ep webgpu|cuda|cpu] [--graph NAME]

Flags:
  --ep NAME      the execution provider (default webgpu)
  --graph NAME   load one graph (train, score, decode) with the verbose log and exit: what
                 the tool runs in each child process`;

const args = benchArgs({
  name: "bench/tools/gpu_placement.ts",
  usage: USAGE,
  options: { ep: { type: "string", default: "webgpu" }, graph: { type: "string" } },
});
const ep = args.ep!;

const config: DecoderConfig = {
  architecture: "LlamaForCausalLM",
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 2048,
  tie_word_embeddings: true,
  attention_bias: false,
  bos_token_id: 1,
  eos_token_id: 2,
  pad_token_id: 0,
  vocab_size: 512,
  hidden_size: 128,
  intermediate_size: 352,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 32,
};
const bucket = { batch: 4, length: 32, tokens: 64 };
const GRAPHS: Record<string, () => Uint8Array> = {
  train: () => buildTrainGraph(config, bucket, { objective: SEED_OBJECTIVE }).toModel(),
  score: () => buildScoreGraph(config, bucket).toModel(),
  decode: () => buildDecodeGraph(config, { lastOnly: true }).toModel(),
};

if (args.graph) {
  // Child: load one graph with the verbose log on stderr, then exit.
  ort.env.logLevel = "verbose";
  const session = await ort.InferenceSession.create(GRAPHS[args.graph](), {
    executionProviders: [ep],
    graphOptimizationLevel: "all",
    logSeverityLevel: 0,
    logVerbosityLevel: 0,
  });
  await session.release();
  Deno.exit(0);
}

for (const name of Object.keys(GRAPHS)) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, "--ep", ep, "--graph", name],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const log = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  console.log(`## ${name} graph on ${ep} (child exit code ${out.code})`);
  // "webgpu kernel not found in registries for Op type: And node name: n12"
  const missing = new Map<string, number>();
  for (const m of log.matchAll(/kernel not found in registries for Op type: (\w+)/g)) {
    missing.set(m[1], (missing.get(m[1]) ?? 0) + 1);
  }
  console.log(
    `ops without a ${ep} kernel (nodes): ${
      [...missing].map(([op, n]) => `${op} ${n}`).join(", ") || "none reported"
    }`,
  );
  // After "Node placements": " Node(s) placed on [X]. Number of nodes: N", then (for a split
  // placement) one "  OpType (node name)" line per node; "All nodes placed on [X]" when not split.
  let current = "";
  const ops = new Map<string, Map<string, number>>();
  for (const line of log.split("\n")) {
    const placed = line.match(/placed on \[(\w+)\]\. Number of nodes: (\d+)/);
    if (placed) {
      current = placed[1];
      console.log(
        `  ${line.includes("All nodes") ? "all" : "some"} nodes on ${current}: ${placed[2]}`,
      );
      ops.set(current, new Map());
      continue;
    }
    const node = line.match(/VerifyEachNodeIsAssignedToAnEp\]\s+(\w+) \([^)]*\)\s*$/);
    if (node && current) ops.get(current)!.set(node[1], (ops.get(current)!.get(node[1]) ?? 0) + 1);
  }
  for (const [provider, counts] of ops) {
    if (counts.size === 0) continue;
    const list = [...counts].sort((a, b) => b[1] - a[1]).map(([op, n]) => `${op} ${n}`);
    console.log(`    ${provider} by op: ${list.join(", ")}`);
  }
  if (out.code !== 0) console.log(log.trim().split("\n").slice(-5).join("\n"));
}

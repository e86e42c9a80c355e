/**
 * `deno task serve:example`: one episode of a built-in environment played by a served checkpoint,
 * the way a user's own harness would do it — the official `openai` npm client against the
 * inference server (`deno task serve`) for the policy, and plain HTTP against an environment
 * server (`deno task env-server`, protocol in workers/envs/http/protocol.ts) for the world. It
 * imports nothing of this repository's code.
 *
 * ```sh
 * SEED_API_KEY=seed_… deno task serve:example --model job:<id> \
 *   [--serve http://127.0.0.1:8788/v1] [--env-url http://127.0.0.1:8790] \
 *   [--split test_seen] [--seed 0] [--options '{"prompt":"compact"}'] [--temperature 0] \
 *   [--max-turns 10] [--history 0] [--skills]
 * ```
 *
 * Each turn: the environment renders its prompt (`POST /v1/prompt`, the same turn prompt the
 * trainer builds), the model answers one user message holding it (stop at `</action>`), the
 * environment parses the action (`POST /v1/parse`) and steps (`POST /v1/episodes/{id}/step`).
 * `--options` must be the job's `env.options` and `--history` its `env.history` (the demo's Sokoban
 * job trains with 0, the default) so the prompts are the ones it was trained on.
 */
import { parseArgs } from "node:util";
import OpenAI from "openai";

const USAGE = `usage: SEED_API_KEY=seed_… deno task serve:example --model job:<id>
  [--serve http://127.0.0.1:8788/v1] [--env-url http://127.0.0.1:8790] [--split test_seen]
  [--seed 0] [--options '{"prompt":"compact"}'] [--temperature 0] [--max-turns 10]
  [--history 0] [--skills]`;
/** Parses the command line; a bad option prints its reason and the usage, and exits with 2. */
function parseCommandLine() {
  try {
    return parseArgs({
      args: Deno.args,
      options: {
        model: { type: "string" },
        serve: { type: "string", default: "http://127.0.0.1:8788/v1" },
        "env-url": { type: "string", default: "http://127.0.0.1:8790" },
        split: { type: "string", default: "test_seen" },
        seed: { type: "string", default: "0" },
        options: { type: "string", default: "{}" },
        temperature: { type: "string", default: "0" },
        "max-turns": { type: "string", default: "10" },
        history: { type: "string", default: "0" },
        skills: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    Deno.exit(2);
  }
}
const { values } = parseCommandLine();
if (values.help) {
  console.log(USAGE);
  Deno.exit(0);
}
/** Prints `reason` and the usage, and exits with 2. */
function usageError(reason: string): never {
  console.error(`${reason}\n${USAGE}`);
  Deno.exit(2);
}
const apiKey = Deno.env.get("SEED_API_KEY");
if (!values.model) usageError("Option '--model job:<id>' is required");
if (!apiKey) usageError("SEED_API_KEY is not set: a key of the job API (seed_…)");
/** The value of a numeric option, or a usage error naming it. */
function numberOption(name: "seed" | "temperature" | "max-turns" | "history", integer: boolean) {
  const x = Number(values[name]);
  if (
    values[name]!.trim() === "" || !Number.isFinite(x) || x < 0 || (integer && !Number.isInteger(x))
  ) {
    usageError(
      `Option '--${name}' must be a ${
        integer ? "non-negative integer" : "non-negative number"
      }: got '${values[name]}'`,
    );
  }
  return x;
}
const [seed, temperature, maxTurns, historyLength] = [
  numberOption("seed", true),
  numberOption("temperature", false),
  numberOption("max-turns", true),
  numberOption("history", true),
];
let options: unknown;
try {
  options = JSON.parse(values.options!);
} catch (e) {
  usageError(`Option '--options' must be a JSON object: ${(e as Error).message}`);
}
if (typeof options !== "object" || options === null || Array.isArray(options)) {
  usageError(`Option '--options' must be a JSON object: got '${values.options}'`);
}

const env = values["env-url"]!.replace(/\/$/, "");
/** POSTs JSON to the environment server and returns its JSON answer. */
// deno-lint-ignore no-explicit-any
async function envCall(path: string, body: unknown, method = "POST"): Promise<any> {
  const res = await fetch(`${env}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: method === "DELETE" ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.status === 204 ? null : await res.json();
}

const client = new OpenAI({ apiKey, baseURL: values.serve });
const { tasks: [task] } = await envCall("/v1/tasks", {
  split: values.split,
  count: 1,
  seed,
  options,
});
console.log(`task ${task.id}: ${task.instruction}`);
const episode = await envCall("/v1/episodes", { task });
let observation = episode.observation;
const history: unknown[] = [];
let won = false, score = 0, tokens = 0;
try {
  for (let turn = 1; turn <= maxTurns; turn++) {
    const { prompt } = await envCall("/v1/prompt", {
      input: { task, history, observation, historyLength, turn },
    });
    const completion = await client.chat.completions.create({
      model: values.model,
      messages: [{ role: "user", content: prompt }],
      temperature,
      max_tokens: 32,
      stop: ["</action>"],
      ...(values.skills ? { skills: "library" } : {}), // our extension: the job's best skill
    } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    const choice = completion.choices[0];
    tokens += completion.usage?.completion_tokens ?? 0;
    // the server drops the stop string (OpenAI's rule); the trainer's responses keep it
    const response = (choice.message.content ?? "") +
      (choice.finish_reason === "stop" ? "</action>" : "");
    const { action } = await envCall("/v1/parse", { response });
    const step = await envCall(`/v1/episodes/${episode.episode_id}/step`, {
      action: action ?? response,
      seq: turn - 1,
    });
    const skill = (completion as unknown as { skill?: { text: string } }).skill;
    console.log(
      `turn ${turn}: ${JSON.stringify(response)} → action ${JSON.stringify(action)} ` +
        `(valid ${step.valid}, reward ${step.reward})${skill ? ` with skill "${skill.text}"` : ""}`,
    );
    history.push({
      observation: observation.text,
      response,
      action: action ?? "",
      valid: step.valid,
      reward: step.reward,
    });
    observation = step.observation;
    score += step.reward;
    if (step.done) {
      won = step.won;
      break;
    }
  }
} finally {
  await envCall(`/v1/episodes/${episode.episode_id}`, null, "DELETE");
}
const outcome = won ? "won" : "not won";
console.log(
  `episode over: ${outcome}, reward ${score.toFixed(2)}, ${history.length} turns, ` +
    `${tokens} tokens generated by ${values.model}`,
);

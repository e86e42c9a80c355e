/**
 * `deno task gen:tokenizer-probe`: writes the texts an uploaded model's tokenizer must spell to
 * train here (workers/model/tokenizer_probe.json): per built-in environment the first turn's
 * prompt (default options) and an analyzer prompt over it; the analysis object the analyzer
 * decodes under its schema; and the skill block of teacher prompts. The upload check
 * (workers/model/upload_check.ts) encodes each and refuses a tokenizer that loses a character.
 * The API never imports workers/envs or workers/seed, so the texts cross that boundary as this
 * generated file; tests/workers/seed/tokenizer_probe_test.ts fails when it is stale.
 */
import { environmentIds, resolveEnvironment, type Trajectory } from "../../envs/mod.ts";
import { probeFirstTurn } from "./model_source.ts";
import { analysisTarget, buildAnalyzerPrompt, skillBlock } from "../../skills/mod.ts";

/** Path of the generated file, relative to the repository root. */
export const TOKENIZER_PROBE_PATH = new URL("../../model/tokenizer_probe.json", import.meta.url);

/** One text to spell and where it comes from. */
export interface ProbeText {
  source: string;
  text: string;
}

/** The probe texts (see module doc), in a fixed order. */
export async function tokenizerProbeTexts(): Promise<ProbeText[]> {
  const out: ProbeText[] = [];
  for (const id of environmentIds()) {
    const env = await resolveEnvironment(id);
    const turn = await probeFirstTurn(env, {});
    out.push({ source: `${id}: first turn prompt`, text: turn.prompt });
    const [task] = await env.sampleTasks("train", 1, 0, {});
    const trajectory: Trajectory = {
      task,
      steps: [{
        observation: turn.prompt,
        response: "",
        action: "",
        valid: true,
        reward: 0,
        feedback: "",
      }],
      won: true,
      score: 1,
    };
    out.push({ source: `${id}: analyzer prompt`, text: buildAnalyzerPrompt(trajectory) });
  }
  out.push({
    source: "analysis schema: the analyzer's JSON object",
    text: analysisTarget({ episode_skill: "Push the box.", episode_summary: "It worked." }),
  });
  out.push({ source: "teacher prompt: skill block", text: skillBlock("Push the box.") });
  return out;
}

/** The file's text: the probe texts as 2-space-indented JSON with a final newline. */
export async function tokenizerProbeText(): Promise<string> {
  return JSON.stringify({ texts: await tokenizerProbeTexts() }, null, 2) + "\n";
}

if (import.meta.main) {
  await Deno.writeTextFile(TOKENIZER_PROBE_PATH, await tokenizerProbeText());
  console.log(`wrote ${TOKENIZER_PROBE_PATH.pathname}`);
}

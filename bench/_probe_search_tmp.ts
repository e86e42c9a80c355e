import { searchEnvironment as env, searchQuestion } from "../workers/envs/search/mod.ts";
import { runActions } from "../tests/workers/envs/household_helpers.ts";
import { buildByteLevelTokenizer, Tokenizer } from "../workers/model/tokenizer.ts";
import { buildAnalyzerPrompt } from "../workers/seed/skills.ts";
const tok = new Tokenizer(buildByteLevelTokenizer(env.vocabulary()));
let max = 0, maxC = 0;
for (const task of env.sampleTasks("train", 100, 4)) {
  const q = searchQuestion(task).question;
  const tr = runActions(env, task, [q.text, ...q.hops.map((h) => h.query), "x"].map((a) => `<action><search>${a}</search></action>`.slice(8, -9)));
  tr.steps.forEach((s) => s.response = `<action>${s.action}</action>`);
  max = Math.max(max, tok.encode(buildAnalyzerPrompt(tr, { maxSteps: 4 })).length);
  maxC = Math.max(maxC, tok.encode(buildAnalyzerPrompt(tr, { maxSteps: 4, maxFieldChars: 400 })).length);
}
console.log("4-search analyzer prompt max", max, "with 400 chars", maxC);

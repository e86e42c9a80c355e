import { searchEnvironment as env, searchQuestion, searchPassages } from "../workers/envs/search/mod.ts";
import { SPLITS } from "../workers/envs/types.ts";
for (const split of SPLITS) {
  const fam: Record<string, [number, number, number]> = {};
  for (const task of env.sampleTasks(split, 600, 99)) {
    const { question: q } = searchQuestion(task);
    const shown = searchPassages(q.text, 3);
    const f = fam[q.family] ??= [0, 0, 0];
    f[0]++;
    if (shown.includes(q.hops[0].fact.passage)) f[1]++;
    if (q.hops.every((h) => shown.includes(h.fact.passage))) f[2]++;
  }
  console.log(split, JSON.stringify(fam));
}

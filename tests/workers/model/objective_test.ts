import assert from "node:assert/strict";
import { createSession, Graph, tensor } from "../../../workers/engine/mod.ts";
import { buildTrainGraph, DecoderConfigError } from "../../../workers/model/llama.ts";
import { stepMeans, TOKEN_NLL, type TrainObjective } from "../../../workers/model/objective.ts";
import { TINY_LLAMA } from "./_tiny.ts";

Deno.test("token NLL is the negative sum of masked log-probs over the step's response tokens", async () => {
  const g = new Graph("nll", "float64");
  const lp = g.input("lp", [4]), m = g.input("m", [4]), n = g.input("n", []);
  const out = TOKEN_NLL.build(g, { logp: lp, entropy: lp, mask: m }, { response_tokens: n });
  g.output(out.loss, "loss");
  const s = await createSession(g.toModel());
  const run = async (count: number) =>
    Number(
      (await s.run({
        lp: tensor("float64", Float64Array.from([-1, -2, -3, -4]), [4]),
        m: tensor("float64", Float64Array.from([1, 0, 1, 1]), [4]),
        n: tensor("float64", Float64Array.of(count), []),
      })).loss.data[0],
    );
  assert.ok(Math.abs((await run(3)) - 8 / 3) < 1e-12, "the mean over this call's 3 tokens");
  // In a step of 8 tokens split over calls, this call contributes its share 8/8.
  assert.ok(Math.abs((await run(8)) - 1) < 1e-12);
  await s.release();
});

Deno.test("an objective whose input name is a train-graph input is refused at build time", () => {
  const bad: TrainObjective<"targets", never, "n", never> = {
    name: "bad",
    tokenInputs: ["targets"],
    scalarInputs: [],
    counts: { n: null },
    outputs: { loss: { over: "n", kind: "loss" } },
    build: (g, t) => ({ loss: g.neg(t.logp) }),
  };
  assert.throws(
    () => buildTrainGraph(TINY_LLAMA, { batch: 1, length: 4, tokens: 4 }, { objective: bad }),
    (e: Error) => e instanceof DecoderConfigError && /targets is taken/.test(e.message),
  );
});

Deno.test("step means divide by the step's count; over no tokens a declared loss is 0 and a statistic is left out", () => {
  const outputs = {
    loss: { over: "all", kind: "loss" },
    aux_term: { over: "some", kind: "loss" },
    share: { over: "all", kind: "statistic" },
    some_mean: { over: "some", kind: "statistic" },
  } as const;
  // Two calls of 3 and 5 tokens: sums are Σ output·count, as the trainer accumulates them.
  const sums = { loss: 0.5 * 3 + 0.1 * 5, share: 0.25 * 3 + 0.75 * 5 };
  assert.deepEqual(stepMeans(outputs, sums, { all: 8, some: 0 }), {
    loss: 2 / 8,
    aux_term: 0,
    share: 4.5 / 8,
  });
  // The name says nothing: a loss term is what the objective declares one.
  assert.deepEqual(
    stepMeans({ entropy_loss: { over: "all", kind: "statistic" } }, {}, { all: 0 }),
    {},
  );
  assert.deepEqual(stepMeans({ figure: { over: "all", kind: "loss" } }, {}, {}), { figure: 0 });
});

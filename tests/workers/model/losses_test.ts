import assert from "node:assert/strict";
import { createSession, gradients, Graph, tensor } from "../../../workers/engine/mod.ts";
import { seedLoss, tokenNll } from "../../../workers/model/losses.ts";

// Six tokens covering: A>0 clipped above (t0), A>0 unclipped below (t1), A<0 clipped below (t2),
// A<0 dual-clipped (t3), inside the trust region (t4), and a masked-out token (t5).
const TOK = {
  logp: [-1.0, -2.0, -2.0, 0.0, -1.4, -9],
  old: [-1.5, -1.5, -1.5, -1.5, -1.5, 0],
  adv: [1, 1, -1, -1, -0.5, 5],
  teacher: [-0.5, -2.5, -1.0, -0.2, -3.0, 0],
  opdMask: [1, 1, 0, 1, 1, 1],
  ref: [-1.2, -1.9, -2.5, -0.3, -1.0, 0],
  entropy: [0.7, 1.1, 0.3, 0.9, 1.5, 4],
  mask: [1, 1, 1, 1, 1, 0],
};
const COEF = {
  clipEps: 0.2,
  dualClip: 3,
  gateBeta: 5,
  opdCoef: 0.01,
  klCoef: 0.02,
  entropyCoef: 0.001,
};

/** The SEED terms computed by hand in plain TypeScript (DESIGN.md §8 step 5). */
function byHand(c = COEF) {
  const sig = (x: number) => 1 / (1 + Math.exp(-x));
  let n = 0, pg = 0, opd = 0, kl = 0, ent = 0, clip = 0, dual = 0, nT = 0, gate = 0, delta = 0;
  for (let i = 0; i < 6; i++) {
    if (!TOK.mask[i]) continue;
    const a = TOK.adv[i], r = Math.exp(TOK.logp[i] - TOK.old[i]);
    const rc = Math.min(Math.max(r, 1 - c.clipEps), 1 + c.clipEps);
    const p1 = -a * r, p2 = -a * rc;
    let p = Math.max(p1, p2);
    if (a < 0 && p > -c.dualClip * a) (p = -c.dualClip * a), dual++;
    if (p2 > p1) clip++;
    const d = TOK.teacher[i] - TOK.logp[i], g = sig(c.gateBeta * d);
    const x = TOK.ref[i] - TOK.logp[i];
    const xc = Math.min(Math.max(x, -20), 20);
    n++, (pg += p), (kl += Math.min(Math.exp(xc) - xc - 1, 10)), (ent += TOK.entropy[i]);
    if (TOK.opdMask[i]) (opd += g * d), nT++, (gate += g), (delta += d);
  }
  const t = {
    pg: pg / n,
    opd: opd / n,
    kl: kl / n,
    entropy: ent / n,
    clipFrac: clip / n,
    dualClipFrac: dual / n,
    gateMean: gate / nT,
    deltaMean: delta / nT,
  };
  return { ...t, loss: t.pg - c.entropyCoef * t.entropy + c.opdCoef * t.opd + c.klCoef * t.kl };
}

/** Run seedLoss on TOK in float64; returns every term and d loss / d ℓθ. */
async function byGraph(c = COEF) {
  const g = new Graph("seed", "float64");
  const shape = [1, 6];
  const logp = g.input("logp", shape, { requiresGrad: true });
  const inp = (n: string) => g.input(n, shape);
  const coef = (n: string) => g.input(n, []);
  const t = seedLoss(g, {
    logp,
    entropy: inp("entropy"),
    mask: inp("mask"),
    advantages: inp("adv"),
    oldLogp: inp("old"),
    teacherLogp: inp("teacher"),
    refLogp: inp("ref"),
    opdMask: inp("opdMask"),
  }, {
    clipEps: coef("clipEps"),
    dualClip: coef("dualClip"),
    gateBeta: coef("gateBeta"),
    opdCoef: coef("opdCoef"),
    klCoef: coef("klCoef"),
    entropyCoef: coef("entropyCoef"),
  });
  for (const [k, v] of Object.entries(t)) g.output(v, `out.${k}`);
  g.output(gradients(g, t.loss, [logp])[0], "dlogp");
  const s = await createSession(g.toModel());
  const feeds = Object.fromEntries([
    ...Object.entries(TOK).map(([k, v]) => [k, tensor("float64", Float64Array.from(v), shape)]),
    ...Object.entries(c).map(([k, v]) => [k, tensor("float64", Float64Array.of(v), [])]),
  ]);
  const r = await s.run(feeds);
  await s.release();
  const out: Record<string, number> = {};
  for (const k of Object.keys(t)) out[k] = Number(r[`out.${k}`].data[0]);
  return { terms: out, dlogp: Array.from(r.dlogp.data as Float64Array) };
}

Deno.test("SEED loss terms equal hand-computed values across both clip branches, the dual clip and the gate", async () => {
  const want = byHand();
  const { terms } = await byGraph();
  assert.equal(want.clipFrac, 2 / 5, "t0 and t2 take the clipped branch");
  assert.equal(want.dualClipFrac, 1 / 5, "t3 is capped by the dual clip");
  for (const [k, v] of Object.entries(want)) {
    assert.ok(Math.abs(terms[k] - v) < 1e-12, `${k}: graph ${terms[k]} vs hand ${v}`);
  }
});

Deno.test("GRPO is the SEED graph with λ_opd = 0: the loss drops exactly the λ·L_opd term", async () => {
  const grpo = { ...COEF, opdCoef: 0 };
  const { terms } = await byGraph(grpo);
  const want = byHand(grpo);
  assert.ok(Math.abs(terms.loss - want.loss) < 1e-12);
  assert.ok(Math.abs(terms.loss - (byHand().loss - COEF.opdCoef * byHand().opd)) < 1e-12);
});

Deno.test("the distillation term pushes ℓθ up toward ℓT with gradient −λ·g/N per token", async () => {
  // Only the OPD term: A = 0 removes pg, kl and entropy coefficients are 0.
  const c = { ...COEF, klCoef: 0, entropyCoef: 0, opdCoef: 0.5 };
  const saved = TOK.adv;
  TOK.adv = [0, 0, 0, 0, 0, 0];
  try {
    const { dlogp } = await byGraph(c);
    const n = 5;
    for (let i = 0; i < 6; i++) {
      const g = 1 / (1 + Math.exp(-c.gateBeta * (TOK.teacher[i] - TOK.logp[i])));
      const want = TOK.mask[i] && TOK.opdMask[i] ? -c.opdCoef * g / n : 0;
      assert.ok(Math.abs(dlogp[i] - want) < 1e-12, `token ${i}: ${dlogp[i]} vs ${want}`);
      if (want !== 0) assert.ok(dlogp[i] < 0, "descent raises ℓθ");
    }
  } finally {
    TOK.adv = saved;
  }
});

Deno.test("a token far below the reference adds k3 = 10 and no KL gradient (verl low_var_kl bounds)", async () => {
  // Only the KL term; token t1's ℓθ is 30 nats below ℓref: unbounded, exp(30) ≈ 1e13.
  const c = { ...COEF, entropyCoef: 0, opdCoef: 0, klCoef: 1 };
  const saved = { adv: TOK.adv, ref: TOK.ref };
  TOK.adv = [0, 0, 0, 0, 0, 0];
  TOK.ref = [...TOK.ref];
  TOK.ref[1] = TOK.logp[1] + 30;
  try {
    const { terms, dlogp } = await byGraph(c);
    const want = byHand(c);
    assert.ok(Math.abs(terms.kl - want.kl) < 1e-12, `${terms.kl} vs ${want.kl}`);
    assert.ok(terms.kl < 10, "the mean stays bounded");
    assert.equal(dlogp[1], 0);
    // An in-range token keeps the k3 gradient −(exp(x) − 1)/N, x = ℓref − ℓθ.
    const x0 = TOK.ref[0] - TOK.logp[0];
    assert.ok(Math.abs(dlogp[0] - -(Math.exp(x0) - 1) / 5) < 1e-12);
  } finally {
    Object.assign(TOK, saved);
  }
});

Deno.test("token NLL is the negative mean log-prob over masked tokens", async () => {
  const g = new Graph("nll", "float64");
  const lp = g.input("lp", [2, 2]), m = g.input("m", [2, 2]);
  g.output(tokenNll(g, lp, m), "loss");
  const s = await createSession(g.toModel());
  const r = await s.run({
    lp: tensor("float64", Float64Array.from([-1, -2, -3, -4]), [2, 2]),
    m: tensor("float64", Float64Array.from([1, 0, 1, 1]), [2, 2]),
  });
  assert.ok(Math.abs(Number(r.loss.data[0]) - 8 / 3) < 1e-12);
  await s.release();
});

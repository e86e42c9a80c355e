/// <reference lib="dom" />
/**
 * A running job's evaluations on its page, in real headless Chromium against the real API over
 * HTTP (real Postgres and S3 server, as tests/api/dashboard_test.ts). Evaluations run every
 * `eval_every` updates: the evaluation table names the step of each rate it shows, with rates,
 * intervals and changes in one format (format.js `percent`, `percentPoints`), and the success
 * chart's legend shows no evaluation value at a step where none ran.
 */
import assert from "node:assert/strict";
import { fenceOf, recordMetrics, setProgress } from "../../jobs/mod.ts";
import { launchChromium, signedInPage } from "../_harness/chromium.ts";
import { runningJob, startApiFixture } from "./_fixture.ts";

Deno.test({
  name:
    "a running job's page shows each evaluation with its step and no evaluation value at steps without one",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const fx = await startApiFixture();
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      fx.app.fetch,
    );
    const origin = `http://127.0.0.1:${server.addr.port}`;
    const browser = await launchChromium();
    try {
      // 32 episodes per split; evaluated at steps 0 and 2 (eval_every 2), not at 1 and 3.
      const job = await runningJob(fx, fx.keyA, {
        env: { id: "sokoban" },
        steps: 8,
        eval_every: 2,
        eval: { episodes: 32 },
      });
      const fence = fenceOf(job);
      const evals: Record<number, number> = { 0: 0.5, 2: 0.40625 };
      for (const step of [0, 1, 2, 3]) {
        await recordMetrics(fx.db, fence, step, {
          success_rate: 0.25,
          ...(step in evals
            ? { "eval/test_seen/success_rate": evals[step], "eval/test_seen/score": evals[step] }
            : {}),
        });
      }
      await setProgress(fx.db, fence, { stage: "rollout", step: 3, totalSteps: 8 });
      const { page, problems } = await signedInPage(browser, origin, fx.keyA);
      await page.waitForSelector(`tr[data-job="${job.id}"]`);
      await page.goto(`${origin}/#/jobs/${job.id}`);
      await page.waitForSelector("#eval-table tr[data-split]");
      const row = await page.$$eval(
        "#eval-table tr[data-split=test_seen] td",
        (tds) => tds.map((td) => td.textContent),
      );
      // ±: 1.96·√(p(1−p)/32) in percentage points; the change 40.6 − 50.0.
      assert.deepEqual(row, [
        "test_seen",
        "50.0% ±17.3 (step 0)",
        "40.6% ±17.0 (step 2)",
        "-9.4 pts",
        "0.5",
        "0.406",
      ]);
      // The success chart's legend with the pointer on each step: train, eval, its band.
      const legendAt = (step: number) =>
        page.evaluate((i) => {
          const fig = document.querySelector("figure[data-chart=success]")!;
          // deno-lint-ignore no-explicit-any -- the uPlot instance charts.js keeps on its figure
          const u = (fig as any).uplot;
          u.setCursor({ left: u.valToPos(i, "x"), top: 10 });
          return [...fig.querySelectorAll(".u-legend .u-value")].map((td) => td.textContent);
        }, step);
      assert.deepEqual(await legendAt(0), ["0", "0.25", "0.5", "0.673", "0.327"]);
      assert.deepEqual(await legendAt(1), ["1", "0.25", "—", "—", "—"]);
      assert.deepEqual(await legendAt(2), ["2", "0.25", "0.406", "0.576", "0.236"]);
      assert.deepEqual(await legendAt(3), ["3", "0.25", "—", "—", "—"]);
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      await server.shutdown();
      await fx.close();
    }
  },
});

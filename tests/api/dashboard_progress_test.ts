/// <reference lib="dom" />
/**
 * The progress bar of a job in its warm-up, in real headless Chromium against the real API over
 * HTTP (real Postgres and S3 server, as tests/api/dashboard_test.ts): the list and the job page
 * fill the bar by the warm-up stage's own count (its SFT steps) and say it, rather than sitting at
 * the updates' 0 of N for the warm-up's whole time; a job that failed in its warm-up says where it
 * stopped, as `seed status` and `seed list` do.
 */
import assert from "node:assert/strict";
import { failJob, fenceOf, reapExpiredLeases, setProgress } from "../../jobs/mod.ts";
import { launchChromium, signedInPage } from "../_harness/chromium.ts";
import { runningJob, startApiFixture } from "./_fixture.ts";

type Page = Awaited<ReturnType<Awaited<ReturnType<typeof launchChromium>>["newPage"]>>;

/**
 * Runs `body` against the dashboard of a fresh API fixture served on a free port, with a browser
 * whose `signIn` opens a page signed in as tenant A (its page errors collected in `problems`);
 * closes the browser, the server and the fixture after.
 */
async function withDashboard(
  body: (d: {
    fx: Awaited<ReturnType<typeof startApiFixture>>;
    origin: string;
    signIn: () => Promise<{ page: Page; problems: string[] }>;
  }) => Promise<void>,
): Promise<void> {
  const fx = await startApiFixture();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, fx.app.fetch);
  const origin = `http://127.0.0.1:${server.addr.port}`;
  const browser = await launchChromium();
  try {
    await body({
      fx,
      origin,
      signIn: () => signedInPage(browser, origin, fx.keyA),
    });
  } finally {
    await browser.close();
    await server.shutdown();
    await fx.close();
  }
}

/** The progress bar in `scope`: its fill width, its title and the scope's text. */
function barIn(page: Page, scope: string) {
  return page.$eval(scope, (el) => ({
    width: (el.querySelector(".bar .fill") as HTMLElement).style.width,
    title: (el.querySelector(".bar") as HTMLElement).title,
    text: el.textContent ?? "",
  }));
}

Deno.test({
  name: "a job in its warm-up fills its bar by the stage's SFT steps in the list and on its page",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await withDashboard(async ({ fx, origin, signIn }) => {
      const job = await runningJob(fx, fx.keyA);
      // As the worker writes it (workers/seed/run/warmup_stage.ts stageReporter): 336 of 1120.
      await setProgress(fx.db, fenceOf(job), {
        stage: "warmup_policy",
        step: 0,
        totalSteps: 10,
        phase: "sft",
        unit: "steps",
        done: 336,
        total: 1120,
        loss: 0.41234,
      });
      const { page, problems } = await signIn();
      const row = `tr[data-job="${job.id}"]`;
      await page.waitForSelector(row);
      const look = (scope: string) => barIn(page, scope);
      const listed = await look(`${row} td.progress`);
      assert.equal(listed.width, "30%");
      assert.equal(listed.title, "30%");
      assert.equal(listed.text.trim(), "warmup_policy · SFT step 336/1120, loss 0.412");

      await page.goto(`${origin}/#/jobs/${job.id}`);
      await page.waitForSelector("#job-progress .bar");
      const shown = await look("#job-progress");
      assert.equal(shown.width, "30%");
      assert.match(shown.text, /^\s*warmup_policy · SFT step 336\/1120, loss 0\.412/);
      assert.doesNotMatch(shown.text, /0\/10/);
      assert.deepEqual(problems, []);
    });
  },
});

Deno.test({
  name:
    "a job that failed in its warm-up shows the stage's count where it stopped in the list and on its page",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await withDashboard(async ({ fx, origin, signIn }) => {
      const job = await runningJob(fx, fx.keyA);
      await setProgress(fx.db, fenceOf(job), {
        stage: "warmup_policy",
        step: 0,
        totalSteps: 10,
        phase: "sft",
        unit: "steps",
        done: 140,
        total: 560,
        loss: 1.5,
      });
      await failJob(fx.db, fenceOf(job), "Cannot train: the environment went away");
      const { page, problems } = await signIn();
      const row = `tr[data-job="${job.id}"]`;
      await page.waitForSelector(`${row} [data-status="failed"]`);
      const look = (scope: string) =>
        page.$eval(scope, (el) => ({
          width: (el.querySelector(".bar .fill") as HTMLElement).style.width,
          text: el.textContent ?? "",
        }));
      // seed list: warm-up 140/560; seed status: [######---…] SFT step 140/560  failed  …
      const listed = await look(`${row} td.progress`);
      assert.equal(listed.text.trim(), "warmup_policy · SFT step 140/560, loss 1.500");
      assert.equal(listed.width, "25%");

      await page.goto(`${origin}/#/jobs/${job.id}`);
      await page.waitForSelector("#job-progress .bar");
      const shown = await look("#job-progress");
      assert.match(shown.text, /^\s*warmup_policy · SFT step 140\/560, loss 1\.500/);
      assert.equal(shown.width, "25%");
      assert.deepEqual(problems, []);
    });
  },
});

Deno.test({
  name:
    "a job queued again after its worker was lost says so in the list and on its page, without the last run's bar or ETA",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await withDashboard(async ({ fx, origin, signIn }) => {
      const job = await runningJob(fx, fx.keyA);
      await setProgress(fx.db, fenceOf(job), {
        stage: "rollout",
        step: 3,
        totalSteps: 8,
        etaS: 120,
      });
      // The worker stops heartbeating; the reaper (on the database's clock, an hour on) requeues
      // the job for its second run, its progress still the first run's.
      const [reaped] = await reapExpiredLeases(fx.db, { now: new Date(Date.now() + 3_600_000) });
      assert.equal(reaped.id, job.id);
      assert.equal(reaped.status, "queued");
      assert.equal(reaped.attempt, 1);
      assert.equal(reaped.progress?.step, 3);
      const { page, problems } = await signIn();
      const row = `tr[data-job="${job.id}"]`;
      await page.waitForSelector(`${row} [data-status="queued"]`);
      const look = (scope: string) =>
        page.$eval(scope, (el) => ({
          width: (el.querySelector(".bar .fill") as HTMLElement).style.width,
          text: el.textContent ?? "",
        }));
      const listed = await look(`${row} td.progress`);
      assert.equal(listed.text.trim(), "queued again: run 2 of at most 3");
      assert.equal(listed.width, "0%");
      const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => td.textContent ?? ""));
      assert.ok(!cells.some((t) => /2m00s|3\/8/.test(t)), JSON.stringify(cells));

      await page.goto(`${origin}/#/jobs/${job.id}`);
      await page.waitForSelector("#job-progress .bar");
      const shown = await look("#job-progress");
      assert.equal(shown.text.trim(), "queued again: run 2 of at most 3");
      assert.equal(shown.width, "0%");
      assert.deepEqual(problems, []);
    });
  },
});

Deno.test({
  name:
    "a running job's ETA counts down between progress writes in the list and on its page, without a new event",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await withDashboard(async ({ fx, origin, signIn }) => {
      const job = await runningJob(fx, fx.keyA);
      // The worker's one write for this stage; the next comes with the next stage, tens of s on.
      await setProgress(fx.db, fenceOf(job), {
        stage: "rollout",
        step: 3,
        totalSteps: 8,
        etaS: 58,
      });
      const { page, problems } = await signIn();
      const seconds = (text: string) => Number(/^(\d+)s$/.exec(text)?.[1] ?? NaN);
      // In the page: the ETA shown for job `id` in the list (its ETA column), or on the job page
      // (`id` null); null while it is missing or still reads `was`.
      const etaIn = ({ id, was }: { id: string | null; was?: string }) => {
        let text: string | undefined;
        if (id === null) {
          const progress = document.querySelector("#job-progress")?.textContent ?? "";
          text = /ETA (\S+)/.exec(progress)?.[1];
        } else {
          const heads = [...document.querySelectorAll("table.jobs thead th")]
            .map((th) => th.textContent);
          const row = document.querySelector(`tr[data-job="${id}"]`);
          text = row?.children[heads.indexOf("ETA")]?.textContent?.trim();
        }
        return text && text !== was ? text : null;
      };
      // The ETA at first, and once it reads otherwise (waited for on the page, at most 5 s).
      const countsDown = async (id: string | null) => {
        const first = String(await (await page.waitForFunction(etaIn, { id })).jsonValue());
        const later = await page.waitForFunction(etaIn, { id, was: first }, { timeout: 5000 });
        return { first: seconds(first), later: seconds(String(await later.jsonValue())) };
      };
      const listed = await countsDown(job.id);
      assert.ok(listed.first <= 58, JSON.stringify(listed));
      assert.ok(listed.later < listed.first, JSON.stringify(listed));

      await page.goto(`${origin}/#/jobs/${job.id}`);
      const shown = await countsDown(null);
      assert.ok(shown.first <= 58, JSON.stringify(shown));
      assert.ok(shown.later < shown.first, JSON.stringify(shown));
      assert.match(
        await page.$eval("#job-progress", (el) => el.textContent ?? ""),
        /^\s*rollout 3\/8\s+ETA \d+s$/,
      );
      assert.deepEqual(problems, []);
    });
  },
});

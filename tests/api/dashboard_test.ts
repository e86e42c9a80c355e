/// <reference lib="dom" />
/**
 * The web dashboard in real headless Chromium (Debian's `chromium` through playwright-core)
 * against the real API over HTTP, on real Postgres and an S3 server: a tiny SEED job run by the
 * real worker (curves, checkpoints, events), a job of two real trainer steps with fixed analyzer
 * answers (_skills_job.ts: skills, trajectories with per-token Δ), a job whose skill and response
 * are an XSS attempt (written through the job domain's own functions, as a worker writes them), and
 * live jobs submitted and cancelled while the page watches, and a failed LoRA job whose charts
 * cross zero (_charts_job.ts).
 *
 * Every page is looked at as a person sees it in a 1,280 px window: a full-page screenshot (into
 * `DASHBOARD_SCREENSHOTS=DIR`, else a fresh temporary folder, named on stderr), no horizontal
 * overflow, and every chart with its axis titles.
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import {
  claimJob,
  fenceOf,
  getJob,
  saveSkillLibrary,
  saveTrajectoryDump,
  submitJob,
  succeedJob,
} from "../../jobs/mod.ts";
import { parseJobSpec } from "../../jobs/mod.ts";
import { SkillLibrary } from "../../workers/skills/mod.ts";
import { rolloutDump } from "../../workers/seed/run/trajectory_dump.ts";
import { launchChromium } from "../_harness/chromium.ts";
import { imageTrajectories } from "../workers/seed/run/_image_trajectories.ts";
import { runOne, testWorker, tinySpec, trainerRegistry } from "../workers/seed/_jobs.ts";
import { type ApiFixture, req, startApiFixture } from "./_fixture.ts";
import { CHART_GAPS, chartsJob, FAILURE, LORA_FILES, SMALL_GAP } from "./_charts_job.ts";
import { skillsJob, STEP_SKILLS } from "./_skills_job.ts";

const XSS = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`;

// deno-lint-ignore no-explicit-any -- API answers read loosely, field by field
async function json<T = any>(fx: ApiFixture, path: string): Promise<T> {
  const res = await req(fx.app, "GET", path, { key: fx.keyA });
  assert.equal(res.status, 200, `${path}: ${res.status}`);
  return await res.json();
}

/** A succeeded job whose skill library and rollout dump hold model and env text that is HTML. */
async function xssJob(fx: ApiFixture): Promise<string> {
  const { job } = await submitJob(fx.db, {
    tenantId: fx.tenantA.id,
    spec: parseJobSpec({ env: { id: "sokoban" } }),
  });
  const claimed = await claimJob(fx.db, { workerId: "w-xss", device: "cpu", leaseMs: 60_000 });
  assert.equal(claimed?.id, job.id);
  const writer = { fence: fenceOf(claimed!), tenantId: fx.tenantA.id };
  const played = imageTrajectories(1, { actions: ["up"] });
  const trajectory = {
    ...played[0],
    id: "step-1/b0g0",
    steps: [{ ...played[0].steps[0], response: XSS, feedback: XSS }],
  };
  const library = new SkillLibrary(job.id);
  library.add(XSS, {
    step: 1,
    taskId: trajectory.task.id,
    trajectoryId: trajectory.id,
    success: false,
    meanTeacherGap: 0.5,
  }, XSS);
  await saveSkillLibrary(fx.db, fx.store, writer, {
    step: 1,
    json: library.toJSON(1),
    skillCount: library.size,
  });
  const dump = rolloutDump(job.id, 1, [trajectory], undefined, {
    analyses: new Map([[trajectory.id, { episode_summary: XSS, episode_skill: XSS }]]),
    tokenGaps: [],
    decode: () => "",
  });
  await saveTrajectoryDump(fx.db, fx.store, writer, dump);
  await succeedJob(fx.db, writer.fence);
  return job.id;
}

/** Saturated (series-coloured, not grey) opaque pixels of a chart's canvas. */
function seriesPixels(page: Page, chart: string): Promise<number> {
  return page.evaluate((id) => {
    const canvas = document.querySelector(`figure[data-chart="${id}"] canvas`) as HTMLCanvasElement;
    const ctx = canvas.getContext("2d")!;
    const { data } = ctx.getImageData(0, 0, canvas.width, canvas.height);
    let n = 0;
    for (let i = 0; i < data.length; i += 4) {
      const [r, g, b] = [data[i], data[i + 1], data[i + 2]];
      if (data[i + 3] > 200 && Math.max(r, g, b) - Math.min(r, g, b) > 80) n++;
    }
    return n;
  }, chart);
}

/** What a person sees of the page's width and charts (read in the page). */
function pageLook(page: Page) {
  return page.evaluate(() => {
    const charts = [...document.querySelectorAll("figure.chart")].map((fig) => {
      // deno-lint-ignore no-explicit-any -- the uPlot instance charts.js keeps on its figure
      const u = (fig as any).uplot ?? { axes: [{}, { font: ["12px sans-serif"], ticks: {} }] };
      const y = u.axes[1];
      const ticks: string[] = JSON.parse((fig as HTMLElement).dataset.yTicks ?? "[]");
      // Room left of the tick marks for the labels (uPlot right-aligns them against the marks).
      const ctx = document.createElement("canvas").getContext("2d")!;
      ctx.font = y.font[0];
      const widest = Math.max(0, ...ticks.map((t) => ctx.measureText(t).width)) / devicePixelRatio;
      ctx.font = y.labelFont?.[0] ?? y.font[0];
      const titleLength = ctx.measureText(y.label ?? "").width / devicePixelRatio;
      return {
        id: (fig as HTMLElement).dataset.chart!,
        xTitle: u.axes[0].label ?? "",
        yTitle: y.label ?? "",
        yTitleDrawn: y.label ? y.labelSize : 0,
        // The title runs along the plot's height.
        yTitleFits: titleLength <= (u.bbox?.height ?? 0) / devicePixelRatio,
        ticks,
        tickRoom: y._size - y.ticks.size - y.gap,
        widest,
        legend: [...fig.querySelectorAll(".u-legend .u-value")].map((td) => td.textContent ?? ""),
      };
    });
    return {
      scrollWidth: document.documentElement.scrollWidth,
      innerWidth,
      charts,
    };
  });
}

Deno.test({
  name: "the dashboard shows jobs, curves, skills and trajectories in a real browser",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const fx = await startApiFixture({ sse: { pollMs: 100 } });
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      fx.app.fetch,
    );
    const origin = `http://127.0.0.1:${server.addr.port}`;
    const shots = Deno.env.get("DASHBOARD_SCREENSHOTS") ??
      await Deno.makeTempDir({ prefix: "dashboard-shots-" });
    console.error(`dashboard screenshots: ${shots}`);
    const browser = await launchChromium();
    try {
      // A finished SEED job: 2 updates of 2 tasks × 2 copies, evaluated at steps 0, 1, 2.
      const submitted = await req(fx.app, "POST", "/v1/jobs", {
        key: fx.keyA,
        json: tinySpec({ method: "seed" }),
      });
      const jobId = (await submitted.json()).id;
      const outcome = await runOne(testWorker(fx.db, fx.store, trainerRegistry()));
      assert.equal(
        outcome,
        "succeeded",
        (await getJob(fx.db, { tenantId: fx.tenantA.id, jobId }))?.error ?? "",
      );
      const xssId = await xssJob(fx);
      const skillsId = await skillsJob(fx);
      const chartsId = await chartsJob(fx);

      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
      // Every file the page asks for is found.
      page.on("response", (r) => {
        if (r.status() === 404 && !new URL(r.url()).pathname.startsWith("/v1/")) {
          problems.push(`404: ${r.url()}`);
        }
      });
      page.on("console", (m) => {
        // Answers of 4xx the tests ask for (a wrong key, a bad spec) are logged as load failures.
        if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) {
          problems.push(`console: ${m.text()}`);
        }
      });
      /**
       * A full-page screenshot at 1,280 px, then what a person would see wrong: a page wider than
       * the window, a chart without axis titles, a tick label with no room, a `-0`, a legend of
       * `--`.
       */
      const shot = async (name: string) => {
        await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
        const look = await pageLook(page);
        assert.equal(look.innerWidth, 1280);
        assert.ok(
          look.scrollWidth <= look.innerWidth,
          `${name}: the page is ${look.scrollWidth} px wide in a ${look.innerWidth} px window`,
        );
        for (const c of look.charts) {
          assert.equal(c.xTitle, "step", `${name}/${c.id}: x axis title`);
          assert.match(c.yTitle, /\S/, `${name}/${c.id}: y axis title`);
          assert.ok(c.yTitleDrawn > 0, `${name}/${c.id}: the y axis title has room`);
          assert.ok(c.yTitleFits, `${name}/${c.id}: the y axis title is longer than the axis`);
          assert.ok(c.ticks.length > 0, `${name}/${c.id}: y ticks drawn`);
          assert.ok(
            c.widest <= c.tickRoom,
            `${name}/${c.id}: tick labels ${c.widest.toFixed(1)} px wide in ${c.tickRoom} px`,
          );
          for (const t of c.ticks) assert.doesNotMatch(t, /^-0(\.0*)?$/, `${name}/${c.id}: ${t}`);
          for (const v of c.legend) assert.notEqual(v, "--", `${name}/${c.id}: legend value`);
        }
        return look;
      };

      await t.step("the page forbids inline script and holds no key", async () => {
        const res = await fetch(`${origin}/`);
        const html = await res.text();
        const csp = res.headers.get("content-security-policy") ?? "";
        assert.match(csp, /script-src 'self'(;|$)/);
        assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
        assert.doesNotMatch(html, /seed_[A-Za-z0-9]/);
        assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, "every script has a src");
        await page.goto(`${origin}/`);
        // An injected inline script does not run under the page's CSP.
        const ran = await page.evaluate(() => {
          const s = document.createElement("script");
          s.textContent = "window.__inline = 1";
          document.body.appendChild(s);
          return (window as unknown as { __inline?: number }).__inline;
        });
        assert.equal(ran, undefined);
        problems.length = 0; // the CSP report of that script is expected
      });

      await t.step(
        "sign-in keeps the key in sessionStorage only; a wrong key is refused",
        async () => {
          await page.waitForSelector("#api-key");
          assert.match(page.url(), /#\/signin$/);
          await page.fill("#api-key", "seed_wrongwrongwrongwrongwrongwrong");
          await page.click("#sign-in");
          await page.waitForSelector(".signin .error:not(:empty)");
          await page.fill("#api-key", fx.keyA);
          await page.click("#sign-in");
          await page.waitForSelector(`tr[data-job="${jobId}"]`);
          const stored = await page.evaluate(() => ({
            session: sessionStorage.getItem("seed.apiKey"),
            local: localStorage.length,
            cookie: document.cookie,
          }));
          assert.deepEqual(stored, { session: fx.keyA, local: 0, cookie: "" });
          assert.ok(!page.url().includes(fx.keyA));
          const status = await page.textContent(`tr[data-job="${jobId}"] .status`);
          assert.equal(status, "succeeded");
          await shot("jobs");
        },
      );

      await t.step(
        "the list shows each job's model, result and failure reason, and pages by the API's cursor",
        async () => {
          const listed = (await json(fx, "/v1/jobs?limit=100")).jobs;
          const done = listed.find((j: { id: string }) => j.id === jobId);
          const evals = Object.entries(done.latest_metrics as Record<string, number>)
            .map(([k, v]) => [k.match(/^eval\/([^/]+)\/success_rate$/)?.[1], v] as const)
            .filter(([split]) => split !== undefined)
            .map(([split, v]) => `${split} ${(v * 100).toFixed(1)}%`);
          assert.ok(evals.length > 0, "the finished job's latest metrics hold its evaluation");
          await page.goto(`${origin}/#/jobs`);
          await page.waitForSelector(`tr[data-job="${chartsId}"]`);
          const cells = async (id: string) =>
            await page.$eval(`tr[data-job="${id}"]`, (tr) => ({
              model: tr.querySelector("td.model")!.textContent,
              result: tr.querySelector("td.result")!.textContent,
              reason: tr.querySelector("td.reason")!.textContent,
              reasonTitle: tr.querySelector("td.reason")!.getAttribute("title"),
            }));
          assert.deepEqual(await cells(jobId), {
            model: done.spec.model.base,
            result: evals.join(" · "),
            reason: "",
            reasonTitle: null,
          });
          const failed = await cells(chartsId);
          assert.equal(failed.model, "builtin:tiny");
          assert.equal(failed.result, "");
          assert.equal(failed.reasonTitle, FAILURE);
          assert.equal(failed.reason, FAILURE.length > 200 ? `${FAILURE.slice(0, 200)}…` : FAILURE);
          await shot("jobs-columns");

          // Two to a page: each page is the API's page at the cursor it was given.
          const rowsShown = () =>
            page.$$eval(
              "#jobs-body tr[data-job]",
              (trs) => trs.map((tr) => (tr as HTMLElement).dataset.job),
            );
          const first = await json(fx, "/v1/jobs?limit=2");
          const second = await json(fx, `/v1/jobs?limit=2&cursor=${first.next_cursor}`);
          assert.ok(first.next_cursor && second.jobs.length === 2);
          const ids = (p: { jobs: { id: string }[] }) => p.jobs.map((j) => j.id);
          await page.goto(`${origin}/#/jobs?limit=2`);
          await page.waitForSelector(`tr[data-job="${first.jobs[0].id}"]`);
          assert.deepEqual(await rowsShown(), ids(first));
          assert.ok(await page.isDisabled("#page-newer"));
          await page.click("#page-older");
          await page.waitForSelector(`tr[data-job="${second.jobs[0].id}"]`);
          assert.deepEqual(await rowsShown(), ids(second));
          assert.equal(await page.textContent("#page-info"), "page 2");
          await shot("jobs-page-2");
          await page.click("#page-newer");
          await page.waitForSelector(`tr[data-job="${first.jobs[0].id}"]`);
          assert.deepEqual(await rowsShown(), ids(first));
        },
      );

      await t.step("the job page draws each curve with one point per recorded step", async () => {
        const metrics = await json(fx, `/v1/jobs/${jobId}/metrics`);
        const count = (name: string) =>
          metrics.points.filter((p: { values: Record<string, number> }) =>
            typeof p.values[name] === "number"
          ).length;
        await page.goto(`${origin}/#/jobs/${jobId}`);
        await page.waitForSelector('figure[data-chart="phases"] canvas');
        const points = async (chart: string) =>
          JSON.parse(
            (await page.getAttribute(`figure[data-chart="${chart}"]`, "data-points")) ?? "{}",
          );
        const success = await points("success");
        assert.equal(count("eval/test_seen/success_rate"), 3); // steps 0, 1, 2
        assert.equal(success["eval test_seen"], 3);
        assert.equal(success["eval test_unseen"], 3);
        assert.equal(success["train rollouts"], count("success_rate"));
        assert.equal((await points("reward"))["mean reward"], count("mean_reward"));
        assert.equal(count("mean_reward"), 2);
        const losses = await points("losses");
        assert.deepEqual(losses, { pg: 2, opd: 2, kl: 2 });
        assert.equal((await points("teacher-gap"))["Δ mean (all re-scored tokens)"], 2);
        assert.equal((await points("analyzer"))["parse rate"], 2);
        assert.equal((await points("phases")).rollout, count("seconds_rollout"));
        await shot("job");
        // It ran once: attempt 0 in the API.
        const run = await page.$eval(
          "#job-header dl.facts dt:text-is('run') + dd",
          (dd) => dd.textContent,
        );
        assert.equal(run, "1 of at most 3");
        for (const chart of ["success", "reward", "losses", "teacher-gap", "phases"]) {
          assert.ok(await seriesPixels(page, chart) > 20, `${chart}: the series are drawn`);
        }
        // Evaluation table: both splits, before (step 0) and after (step 2).
        const rows = await page.$$eval(
          "#eval-table tbody tr",
          (trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)),
        );
        assert.deepEqual(rows.map((r) => r[0]), ["test_seen", "test_unseen"]);
        assert.match(rows[0][1]!, /\(step 0\)$/);
        assert.match(rows[0][2]!, /\(step 2\)$/);
        // Event log and checkpoints.
        const events = await json(fx, `/v1/jobs/${jobId}/events?limit=1000`);
        await page.waitForFunction(
          (n) => document.querySelectorAll("#event-log tr").length === n,
          events.events.length,
        );
        const steps = await page.$$eval(
          "#checkpoints tr[data-step]",
          (trs) => trs.map((tr) => Number((tr as HTMLElement).dataset.step)),
        );
        assert.deepEqual(steps, [0, 1, 2]);
        assert.ok(await page.isVisible('#checkpoints tr[data-step="2"] a.archive'));
        assert.ok(
          await page.isVisible('#checkpoints tr[data-step="2"] a.file >> text=config.json'),
        );
        await shot("job");
      });

      await t.step("the checkpoint links download the archive and a single file", async () => {
        const [archive] = await Promise.all([
          page.waitForEvent("download"),
          page.click('#checkpoints tr[data-step="2"] a.archive'),
        ]);
        assert.equal(archive.suggestedFilename(), `job-${jobId}-step-2.tar`);
        const tar = await Deno.readFile((await archive.path())!);
        assert.ok(new TextDecoder().decode(tar.slice(0, 2000)).includes("step-2/"));
        const [file] = await Promise.all([
          page.waitForEvent("download"),
          page.click('#checkpoints tr[data-step="2"] a.file >> text=config.json'),
        ]);
        assert.equal(file.suggestedFilename(), "config.json");
        const config = JSON.parse(await Deno.readTextFile((await file.path())!));
        assert.equal(typeof config.hidden_size, "number");
      });

      await t.step(
        "a chart crossing zero shows negative tick labels, axis titles with units and legend values",
        async () => {
          await page.goto(`${origin}/#/jobs/${chartsId}`);
          await page.waitForSelector('figure[data-chart="teacher-gap"] canvas');
          await page.waitForSelector(`#checkpoints tr[data-step="3"] a.file`);
          const look = await shot("job-lora-failed");
          const gap = look.charts.find((c) => c.id === "teacher-gap")!;
          assert.equal(gap.yTitle, "Δ (nats/token)");
          assert.ok(gap.ticks.some((t) => /^-0\.00\d*[1-9]/.test(t)), `ticks: ${gap.ticks}`);
          assert.ok(gap.ticks.some((t) => /^0\.00\d*[1-9]/.test(t)), `ticks: ${gap.ticks}`);
          assert.equal(
            new Set(gap.ticks).size,
            gap.ticks.length,
            `no two ticks print alike: ${gap.ticks}`,
          );
          // Without a pointer on the chart, the legend shows each series' last value.
          assert.deepEqual(gap.legend, ["3", String(CHART_GAPS[3])]);
          const losses = look.charts.find((c) => c.id === "losses")!;
          assert.ok(losses.ticks.some((t) => t.startsWith("-")), `ticks: ${losses.ticks}`);
          assert.deepEqual(losses.legend, ["3", "-0.008"]);
          // The adapter's many file links wrap inside their cell.
          const files = await page.$$eval(
            '#checkpoints tr[data-step="3"] a.file',
            (as) => as.map((a) => a.textContent),
          );
          assert.deepEqual(files, LORA_FILES);
          assert.match(await page.textContent("#job-header .error") ?? "", /ConstraintError/);
        },
      );

      await t.step("a skill's small mean Δ shows its significant digits", async () => {
        await page.goto(`${origin}/#/jobs/${chartsId}/skills`);
        await page.waitForSelector("#skills-body tr.skill");
        const cells = await page.$$eval(
          "#skills-body tr.skill td",
          (tds) => tds.map((td) => td.textContent),
        );
        assert.ok(cells.includes(String(SMALL_GAP)), `cells: ${cells}`);
        await shot("skills-small-gap");
      });

      await t.step("selected jobs' curves share one chart, one line per job", async () => {
        await page.goto(`${origin}/#/jobs`);
        await page.waitForSelector(`tr[data-job="${chartsId}"]`);
        assert.ok(await page.isDisabled("#compare-jobs"));
        await page.check(`tr[data-job="${jobId}"] input.pick`);
        await page.check(`tr[data-job="${chartsId}"] input.pick`);
        await page.click("#compare-jobs");
        await page.waitForSelector('figure[data-chart="compare"] canvas');
        const hash = new URL(page.url()).hash;
        assert.match(hash, /^#\/compare\?jobs=/);
        assert.deepEqual(
          new Set(new URLSearchParams(hash.split("?")[1]).get("jobs")!.split(",")),
          new Set([jobId, chartsId]),
        );
        const expected = async (metric: string) => {
          const out: Record<string, number> = {};
          for (const id of [jobId, chartsId]) {
            const m = await json(fx, `/v1/jobs/${id}/metrics`);
            out[id.slice(0, 8)] = new Set(
              m.points.filter((p: { values: Record<string, number> }) =>
                typeof p.values[metric] === "number"
              ).map((p: { step: number }) => p.step),
            ).size;
          }
          return out;
        };
        const points = async () =>
          JSON.parse(
            (await page.getAttribute('figure[data-chart="compare"]', "data-points")) ?? "{}",
          );
        assert.equal(await page.inputValue("#compare-metric"), "eval/test_seen/success_rate");
        assert.deepEqual(await points(), await expected("eval/test_seen/success_rate"));
        assert.ok(await seriesPixels(page, "compare") > 20, "the lines are drawn");
        const rates = await shot("compare");
        // A rate keeps its 0–1 scale even when every value is 0.
        assert.equal(rates.charts[0].yTitle, "fraction (0–1)");
        assert.equal(Number(rates.charts[0].ticks.at(-1)), 1);
        await page.selectOption("#compare-metric", "mean_reward");
        await page.waitForFunction(() =>
          document.querySelector("figure[data-chart=compare] figcaption")?.textContent ===
            "mean_reward"
        );
        const want = await expected("mean_reward");
        assert.deepEqual(await points(), want);
        assert.ok(Object.values(want).every((n) => n > 0));
        const look = await shot("compare-reward");
        assert.equal(look.charts[0].yTitle, "reward (env units)");
        const legend = await page.$$eval(
          "figure[data-chart=compare] .u-legend .u-series .u-label",
          (els) => els.map((el) => el.textContent),
        );
        assert.deepEqual(legend, ["step", ...Object.keys(want)]);
      });

      let library: {
        skills: {
          text: string;
          mean_teacher_gap: number | null;
          provenance: { step: number; trajectory_id: string }[];
        }[];
      };
      await t.step("the skill library lists, searches, sorts and compares skills", async () => {
        library = (await json(fx, `/v1/jobs/${skillsId}/skills`)).library;
        assert.equal(library.skills.length, new Set(STEP_SKILLS.flat()).size);
        await page.goto(`${origin}/#/jobs/${skillsId}`);
        await page.click("text=Skill library");
        await page.waitForSelector("#skills-body tr.skill");
        assert.equal(await page.locator("#skills-body tr.skill").count(), library.skills.length);
        await page.selectOption("#skill-sort", "mean_teacher_gap");
        const best = [...library.skills].sort((a, b) =>
          (b.mean_teacher_gap ?? -Infinity) - (a.mean_teacher_gap ?? -Infinity)
        )[0];
        const firstText = await page.locator("#skills-body tr.skill td.skill-text").first()
          .evaluate((td) =>
            td.firstChild?.textContent
          );
        assert.equal(firstText, best.text);
        await page.fill("#skill-search", best.text);
        const shown = await page.locator("#skills-body tr.skill").count();
        assert.equal(shown, library.skills.filter((s) => s.text.includes(best.text)).length);
        await page.fill("#skill-search", "");
        await page.selectOption("#compare-from", "1");
        await page.selectOption("#compare-to", "2");
        await page.click("#compare");
        await page.waitForSelector("#skill-diff h3");
        const added = await page.locator("#skill-diff ul.added li").allTextContents();
        assert.deepEqual(added, ["never push a box into a corner"]);
        assert.equal(await page.locator("#skill-diff ul.dropped li").count(), 0);
        await shot("skills");
      });

      await t.step("a skill links to its trajectory, whose tokens are coloured by Δ", async () => {
        await page.selectOption("#skill-sort", "times_seen");
        const link = page.locator("#skills-body tr.skill a.source").first();
        const trajectoryId = await link.textContent();
        const skill = library.skills.find((s) =>
          s.provenance.some((p) => p.trajectory_id === trajectoryId)
        )!;
        const step = skill.provenance.find((p) => p.trajectory_id === trajectoryId)!.step;
        await link.click();
        await page.waitForSelector("#trajectory h2");
        assert.equal(await page.textContent("#trajectory h2"), trajectoryId);
        const dump = await json(fx, `/v1/jobs/${skillsId}/trajectories?step=${step}`);
        const traj = dump.trajectories.find((x: { id: string; source: string }) =>
          x.id === trajectoryId && x.source === "rollout"
        );
        assert.ok(traj.analysis.skill, "the trajectory has its analysis");
        assert.equal(await page.textContent("#trajectory-skill"), traj.analysis.skill);
        const turns = traj.steps.filter((s: { teacher_gaps?: number[] }) => s.teacher_gaps);
        assert.ok(turns.length > 0, "re-scored turns carry teacher gaps");
        for (const turn of turns) {
          const spans = page.locator(`article[data-turn="${turn.turn}"] .tok`);
          const got = await spans.evaluateAll((els) =>
            els.map((el) => ({
              text: el.textContent,
              gap: Number((el as HTMLElement).dataset.gap),
              bg: getComputedStyle(el).backgroundColor,
            }))
          );
          assert.deepEqual(got.map((g) => g.text), turn.response_tokens);
          assert.deepEqual(got.map((g) => g.gap), turn.teacher_gaps);
          for (const g of got) {
            const [r, gr] = g.bg.match(/[\d.]+/g)!.map(Number);
            if (g.gap > 0.01) assert.ok(gr > r, `Δ ${g.gap} is green: ${g.bg}`);
            if (g.gap < -0.01) assert.ok(r > gr, `Δ ${g.gap} is red: ${g.bg}`);
          }
        }
        await shot("trajectory");
      });

      await t.step("a bad spec shows the API's field error beside the field", async () => {
        const before = (await json(fx, "/v1/jobs?limit=100")).jobs.length;
        await page.goto(`${origin}/#/jobs/new`);
        await page.waitForSelector("#spec-editor");
        assert.match(await page.inputValue("#spec-editor"), /"sokoban"/);
        await page.fill(
          "#spec-editor",
          JSON.stringify({ env: { id: "sokoban" }, rollout: { group_size: 0 } }, null, 2),
        );
        await page.click("#submit-job");
        const error = page.locator('.field-error[data-path="rollout.group_size"]');
        await error.waitFor();
        const line = await error.evaluate((el) =>
          el.parentElement!.querySelector("code")!.textContent
        );
        assert.equal(line!.trim(), '"group_size": 0');
        assert.match(
          (await error.textContent())!,
          /rollout\.group_size: .*>=\s*1|at least 1|too small/i,
        );
        assert.equal((await json(fx, "/v1/jobs?limit=100")).jobs.length, before);
        await shot("submit-error");
      });

      await t.step("the list shows a submitted job live and cancels it while it runs", async () => {
        await page.goto(`${origin}/#/jobs?status=queued,running,cancelling`);
        await page.waitForSelector("#live-state >> text=live");
        const res = await req(fx.app, "POST", "/v1/jobs", {
          key: fx.keyA,
          json: { env: { id: "sokoban" } },
        });
        const id = (await res.json()).id;
        await page.waitForSelector(`tr[data-job="${id}"] .status >> text=queued`);
        const claimed = await claimJob(fx.db, {
          workerId: "w-live",
          device: "cpu",
          leaseMs: 60_000,
        });
        assert.equal(claimed?.id, id);
        await page.waitForSelector(`tr[data-job="${id}"] .status >> text=running`);
        await page.click(`tr[data-job="${id}"] button.cancel`);
        await page.waitForSelector(`tr[data-job="${id}"] .status >> text=cancelling`);
        assert.equal(
          (await getJob(fx.db, { tenantId: fx.tenantA.id, jobId: id }))?.status,
          "cancelling",
        );
        assert.equal(await page.locator(`tr[data-job="${jobId}"]`).count(), 0, "filtered out");
      });

      await t.step("the job page shows its full spec and submits an edited copy", async () => {
        const original = await json(fx, `/v1/jobs/${jobId}`);
        await page.goto(`${origin}/#/jobs/${jobId}`);
        await page.waitForSelector("#job-spec");
        assert.deepEqual(JSON.parse((await page.textContent("#job-spec"))!), original.spec);
        await page.click("#edit-copy");
        await page.waitForSelector("#copy-editor");
        // The copy starts from the spec as submitted (defaults filled afresh at its submit).
        assert.deepEqual(
          JSON.parse(await page.inputValue("#copy-editor")),
          original.submitted_spec,
        );
        const before = (await json(fx, "/v1/jobs?limit=100")).jobs.length;
        // A bad copy: the API's field message on the field's line, nothing stored.
        const bad = structuredClone(original.spec);
        bad.rollout.group_size = 0;
        await page.fill("#copy-editor", JSON.stringify(bad, null, 2));
        await page.click("#submit-copy");
        const error = page.locator('#copy-checked .field-error[data-path="rollout.group_size"]');
        await error.waitFor();
        assert.match((await error.textContent())!, /^rollout\.group_size: /);
        assert.match(await page.textContent("#copy-message") ?? "", /\S/);
        assert.equal((await json(fx, "/v1/jobs?limit=100")).jobs.length, before);
        await shot("job-copy-error");
        // A good copy: a new job with the edit, the rest as the original's.
        const edited = { ...structuredClone(original.submitted_spec), steps: 1 };
        await page.fill("#copy-editor", JSON.stringify(edited, null, 2));
        await page.click("#submit-copy");
        await page.waitForURL((url) =>
          /^#\/jobs\/[0-9a-f-]{36}$/.test(url.hash) &&
          !url.hash.endsWith(jobId)
        );
        const copyId = new URL(page.url()).hash.slice("#/jobs/".length);
        const copy = await json(fx, `/v1/jobs/${copyId}`);
        assert.equal(copy.status, "queued");
        assert.deepEqual(copy.spec, { ...original.spec, steps: 1 });
        await page.waitForSelector("#job-spec");
        assert.deepEqual(JSON.parse((await page.textContent("#job-spec"))!), copy.spec);
        await req(fx.app, "POST", `/v1/jobs/${copyId}/cancel`, { key: fx.keyA });
      });

      // Two labelled jobs, submitted as any client does (name and metadata beside the spec).
      const labelled = async (name: string, metadata?: Record<string, string>) => {
        const res = await req(fx.app, "POST", "/v1/jobs", {
          key: fx.keyA,
          json: { name, ...(metadata ? { metadata } : {}), env: { id: "sokoban" }, steps: 1 },
        });
        assert.equal(res.status, 201);
        return (await res.json()).id as string;
      };
      const NAME = "sokoban-baseline <1>";
      const METADATA = { team: "rl", run: "7" };
      const namedId = await labelled(NAME, METADATA);
      const otherId = await labelled("other-run");
      const listedIds = () =>
        page.$$eval(
          "#jobs-body tr[data-job]",
          (trs) => trs.map((tr) => (tr as HTMLElement).dataset.job!),
        );
      const apiIds = async (query: string) =>
        (await json(fx, `/v1/jobs?limit=100&${query}`)).jobs.map((j: { id: string }) => j.id);

      await t.step("a job's name and metadata show in the list and on its page", async () => {
        await page.goto(`${origin}/#/jobs`);
        await page.waitForSelector(`tr[data-job="${namedId}"]`);
        const row = await page.$eval(`tr[data-job="${namedId}"] td.job-name`, (td) => ({
          link: td.querySelector("a")!.textContent,
          tags: [...td.querySelectorAll(".tag")].map((el) => el.textContent),
        }));
        // In the API's order of the keys (Postgres jsonb orders them).
        const stored = (await json(fx, `/v1/jobs/${namedId}`)).metadata;
        assert.deepEqual(stored, METADATA);
        assert.deepEqual(row, {
          link: NAME,
          tags: Object.entries(stored).map(([k, v]) => `${k}=${v}`),
        });
        await page.click(`tr[data-job="${namedId}"] td.job-name a`);
        await page.waitForSelector("#job-title");
        assert.equal(await page.textContent("#job-title"), NAME);
        const facts = Object.fromEntries(
          await page.$$eval(
            "#job-header dl.facts dt",
            (dts) => dts.map((dt) => [dt.textContent, dt.nextElementSibling!.textContent]),
          ),
        );
        assert.equal(facts.name, NAME);
        assert.equal(facts["metadata team"], "rl");
        assert.equal(facts["metadata run"], "7");
        assert.equal(facts.run, "not started (at most 3 runs)");
        // Queued: it can be cancelled, not deleted.
        assert.equal(await page.locator("#delete-job").count(), 0);
        assert.equal(await page.locator("#cancel-job").count(), 1);
        await shot("job-labelled");
      });

      await t.step(
        "the name filter finds jobs by the start of their name, as does metadata",
        async () => {
          await page.goto(`${origin}/#/jobs`);
          await page.waitForSelector(`tr[data-job="${otherId}"]`);
          await page.fill("#name-filter", "sokoban-base");
          await page.press("#name-filter", "Enter");
          await page.waitForFunction(
            (other) => !document.querySelector(`tr[data-job="${other}"]`),
            otherId,
          );
          await page.waitForSelector(`tr[data-job="${namedId}"]`);
          assert.deepEqual(await listedIds(), [namedId]);
          assert.deepEqual(await apiIds("name_prefix=sokoban-base"), [namedId]);
          assert.equal(
            new URLSearchParams(new URL(page.url()).hash.split("?")[1]).get("name"),
            "sokoban-base",
          );
          await shot("jobs-name-filter");
          // A name's middle is no prefix.
          await page.fill("#name-filter", "baseline");
          await page.press("#name-filter", "Enter");
          await page.waitForSelector("#jobs-body >> text=No jobs.");
          // Metadata alone: key=value.
          await page.fill("#name-filter", "");
          await page.press("#name-filter", "Enter");
          await page.waitForSelector(`tr[data-job="${otherId}"]`);
          await page.fill("#metadata-filter", "team=rl");
          await page.press("#metadata-filter", "Enter");
          await page.waitForFunction(
            (other) => !document.querySelector(`tr[data-job="${other}"]`),
            otherId,
          );
          await page.waitForSelector(`tr[data-job="${namedId}"]`);
          assert.deepEqual(await listedIds(), await apiIds("metadata[team]=rl"));
          assert.ok((await listedIds()).includes(namedId));
          // Text that is no pair: a message naming the form, the list unchanged.
          await page.fill("#metadata-filter", "team");
          await page.press("#metadata-filter", "Enter");
          await page.waitForSelector("p.error >> text=must read key=value");
          assert.ok((await listedIds()).includes(namedId));
        },
      );

      let copyId = "";
      await t.step("an edited copy keeps the job's metadata and names itself a copy", async () => {
        await page.goto(`${origin}/#/jobs/${namedId}`);
        await page.waitForSelector("#edit-copy");
        await page.click("#edit-copy");
        await page.waitForSelector("#copy-editor");
        const original = await json(fx, `/v1/jobs/${namedId}`);
        const body = JSON.parse(await page.inputValue("#copy-editor"));
        assert.deepEqual(body, {
          name: `${NAME} (copy)`,
          metadata: METADATA,
          ...original.submitted_spec,
        });
        await page.fill(
          "#copy-editor",
          JSON.stringify({ ...body, metadata: { ...METADATA, run: "8" } }, null, 2),
        );
        await page.click("#submit-copy");
        await page.waitForURL((url) =>
          /^#\/jobs\/[0-9a-f-]{36}$/.test(url.hash) && !url.hash.endsWith(namedId)
        );
        copyId = new URL(page.url()).hash.slice("#/jobs/".length);
        const copy = await json(fx, `/v1/jobs/${copyId}`);
        assert.equal(copy.name, `${NAME} (copy)`);
        assert.deepEqual(copy.metadata, { team: "rl", run: "8" });
        assert.deepEqual(copy.spec, original.spec);
        await page.waitForSelector("#job-title");
        assert.equal(await page.textContent("#job-title"), `${NAME} (copy)`);
        // The prefix filter finds the original and its copy.
        await page.goto(`${origin}/#/jobs?name=${encodeURIComponent(NAME)}`);
        await page.waitForSelector(`tr[data-job="${copyId}"]`);
        assert.deepEqual(new Set(await listedIds()), new Set([namedId, copyId]));
      });

      await t.step("delete asks first, shows the API's 409, and removes a final job", async () => {
        for (const id of [namedId, otherId, copyId]) {
          await req(fx.app, "POST", `/v1/jobs/${id}/cancel`, { key: fx.keyA });
        }
        // A 409: a queued job trains from the finished job's checkpoint.
        const user = await req(fx.app, "POST", "/v1/jobs", {
          key: fx.keyA,
          json: { env: { id: "sokoban" }, model: { base: `job:${jobId}` } },
        });
        assert.equal(user.status, 201);
        const userId = (await user.json()).id;
        await page.goto(`${origin}/#/jobs/${jobId}`);
        await page.waitForSelector("#delete-job");
        assert.equal(await page.locator("#cancel-job").count(), 0);
        const dialogs: string[] = [];
        page.once("dialog", (d) => (dialogs.push(d.message()), d.accept()));
        await page.click("#delete-job");
        await page.waitForSelector(`[role=alert] >> text=uses it as model.base`);
        assert.match(
          await page.textContent("#view > p.error") ?? "",
          /^Cannot delete job .* job [0-9a-f-]{36} uses it as model\.base/,
        );
        assert.match(dialogs[0], new RegExp(`^Delete job ${jobId} `));
        assert.equal((await req(fx.app, "GET", `/v1/jobs/${jobId}`, { key: fx.keyA })).status, 200);
        await shot("job-delete-conflict");
        await req(fx.app, "POST", `/v1/jobs/${userId}/cancel`, { key: fx.keyA });

        // Dismissed: nothing happens.
        await page.goto(`${origin}/#/jobs/${namedId}`);
        await page.waitForSelector("#delete-job");
        page.once("dialog", (d) => (dialogs.push(d.message()), d.dismiss()));
        await page.click("#delete-job");
        assert.match(dialogs[1], new RegExp(`^Delete job "${NAME}" \\(${namedId}\\)`));
        assert.equal(
          (await req(fx.app, "GET", `/v1/jobs/${namedId}`, { key: fx.keyA })).status,
          200,
        );
        assert.match(new URL(page.url()).hash, new RegExp(`^#/jobs/${namedId}$`));
        // Accepted: gone from the API, back to the list, which no longer shows it.
        page.once("dialog", (d) => d.accept());
        await page.click("#delete-job");
        await page.waitForURL((url) => url.hash === "#/jobs");
        await page.waitForSelector(`tr[data-job="${otherId}"]`);
        assert.equal(await page.locator(`tr[data-job="${namedId}"]`).count(), 0);
        assert.equal(
          (await req(fx.app, "GET", `/v1/jobs/${namedId}`, { key: fx.keyA })).status,
          404,
        );
        assert.ok(!(await apiIds("")).includes(namedId));
      });

      await t.step("a skill and a response written as HTML show their characters", async () => {
        await page.goto(`${origin}/#/jobs/${xssId}/skills`);
        await page.waitForSelector("#skills-body tr.skill");
        const cell = page.locator("#skills-body td.skill-text").first();
        assert.equal(await cell.evaluate((td) => td.firstChild?.textContent), XSS);
        assert.equal(await page.locator("#skills-body img, #skills-body script").count(), 0);
        await shot("xss-skills");
        await page.click("#skills-body a.source");
        await page.waitForSelector("#trajectory h2");
        assert.equal(await page.textContent("#trajectory-skill"), XSS);
        assert.equal(await page.textContent('article[data-turn="1"] pre.response'), XSS);
        // The environment's feedback (an HTTP environment writes it) is text too.
        assert.equal(
          await page.textContent('article[data-turn="1"] .feedback'),
          `Effect: ${XSS}`,
        );
        assert.equal(
          await page.locator("#trajectory img:not(.obs-image), #trajectory script").count(),
          0,
        );
        assert.equal(
          await page.evaluate(() => (window as unknown as { __xss?: number }).__xss),
          undefined,
        );
        await shot("xss-trajectory");
      });

      await t.step("a deep link survives sign-in; a link elsewhere is refused", async () => {
        const fresh = await browser.newContext({ viewport: { width: 1280, height: 900 } });
        try {
          const tab = await fresh.newPage();
          tab.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
          const signIn = async () => {
            await tab.waitForSelector("#api-key");
            await tab.fill("#api-key", fx.keyA);
            await tab.click("#sign-in");
          };
          await tab.goto(`${origin}/#/jobs/${jobId}`);
          await tab.waitForSelector("#api-key");
          assert.equal(
            new URL(tab.url()).hash,
            `#/signin?next=${encodeURIComponent(`#/jobs/${jobId}`)}`,
          );
          await signIn();
          await tab.waitForSelector("#job-spec");
          assert.equal(tab.url(), `${origin}/#/jobs/${jobId}`);
          for (
            const next of [
              "https://evil.example/",
              "//evil.example/x",
              "javascript:alert(1)",
              "/#/jobs",
              "#/signin?next=https://evil.example/",
            ]
          ) {
            await tab.evaluate(() => sessionStorage.clear());
            await tab.goto(`${origin}/#/signin?next=${encodeURIComponent(next)}`);
            await signIn();
            await tab.waitForURL(`${origin}/#/jobs`);
            assert.equal(new URL(tab.url()).origin, origin, next);
          }
        } finally {
          await fresh.close();
        }
      });

      await t.step("sign-out forgets the key", async () => {
        await page.click("#sign-out");
        await page.waitForSelector("#api-key");
        assert.equal(await page.evaluate(() => sessionStorage.getItem("seed.apiKey")), null);
      });

      assert.deepEqual(problems, [], "no script errors in the page");
    } finally {
      await browser.close();
      await server.shutdown();
      await fx.close();
    }
  },
});

/// <reference lib="dom" />
/**
 * The job page's "Submit an edited copy…" in real headless Chromium against the real API over
 * HTTP (real Postgres and S3 server, as tests/api/dashboard_test.ts): the editor starts from the
 * spec as it was submitted, so the copy's defaults that depend on other fields are filled afresh
 * from what the copy says; a job without a kept submission starts from its stored spec.
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { launchChromium } from "../_harness/chromium.ts";
import { req, startApiFixture } from "./_fixture.ts";

Deno.test({
  name:
    "an edited copy starts from the spec as submitted, so its dependent defaults follow the edit",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const fx = await startApiFixture();
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      fx.app.fetch,
    );
    const origin = `http://127.0.0.1:${server.addr.port}`;
    const browser = await launchChromium();
    // deno-lint-ignore no-explicit-any -- API answers read loosely, field by field
    const json = async (path: string): Promise<any> => {
      const res = await req(fx.app, "GET", path, { key: fx.keyA });
      assert.equal(res.status, 200, `${path}: ${res.status}`);
      return await res.json();
    };
    /** Opens the job's page and its copy editor; returns the editor's body. */
    const openCopy = async (page: Page, jobId: string) => {
      await page.goto(`${origin}/#/jobs/${jobId}`);
      await page.waitForSelector("#edit-copy");
      await page.click("#edit-copy");
      await page.waitForSelector("#copy-editor");
      return JSON.parse(await page.inputValue("#copy-editor"));
    };
    /** Submits `body` from the open copy editor; returns the new job as the API shows it. */
    const submitCopy = async (page: Page, from: string, body: unknown) => {
      await page.fill("#copy-editor", JSON.stringify(body, null, 2));
      await page.click("#submit-copy");
      await page.waitForURL((url) =>
        /^#\/jobs\/[0-9a-f-]{36}$/.test(url.hash) && !url.hash.endsWith(from)
      );
      return await json(`/v1/jobs/${new URL(page.url()).hash.slice("#/jobs/".length)}`);
    };
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
      // A household job on the policy's own skills: its stored spec says max_step_skills 0
      // (jobs/spec.ts stepSkillDefault) and the advantage of method seed (armDefaults).
      const posted = { env: { id: "household" }, steps: 2 };
      const res = await req(fx.app, "POST", "/v1/jobs", {
        key: fx.keyA,
        json: { name: "household-policy", ...posted },
      });
      assert.equal(res.status, 201, await res.clone().text());
      const original = await res.json();
      assert.equal(original.spec.seed.max_step_skills, 0);
      assert.equal(original.spec.advantage.estimator, "grpo");

      await page.goto(`${origin}/`);
      await page.waitForSelector("#api-key");
      await page.fill("#api-key", fx.keyA);
      await page.click("#sign-in");
      await page.waitForSelector(`tr[data-job="${original.id}"]`);

      await t.step("the editor holds the submitted fields, no default", async () => {
        const body = await openCopy(page, original.id);
        assert.deepEqual(body, { name: "household-policy (copy)", ...posted });
        assert.match(
          (await page.textContent("#spec-copy p.muted"))!,
          /as this job was submitted: the fields left out take their defaults afresh/,
        );
        // The stored spec is still shown whole above it.
        assert.deepEqual(JSON.parse((await page.textContent("#job-spec"))!), original.spec);
      });

      await t.step(
        "switched to the reference analyzer, the copy gets its step skills",
        async () => {
          const body = await openCopy(page, original.id);
          // As a person edits it: the one field changed where the copy has it.
          const copy = await submitCopy(page, original.id, {
            ...body,
            seed: { ...body.seed, skill_source: "reference" },
          });
          assert.equal(copy.spec.seed.skill_source, "reference");
          assert.equal(copy.spec.seed.max_step_skills, 5);
          assert.deepEqual(copy.submitted_spec, { ...posted, seed: { skill_source: "reference" } });
        },
      );

      await t.step("switched to gigpo, the copy gets gigpo's advantage", async () => {
        const body = await openCopy(page, original.id);
        const copy = await submitCopy(page, original.id, { ...body, method: "gigpo" });
        assert.equal(copy.spec.advantage.estimator, "gigpo");
        assert.equal(copy.spec.seed.max_step_skills, 0);
      });

      await t.step(
        "a job without a kept submission starts its copy from the stored spec",
        async () => {
          await fx.db.query("update jobs set submitted_spec = null where id = $1::uuid", [
            original.id,
          ]);
          const body = await openCopy(page, original.id);
          assert.deepEqual(body, { name: "household-policy (copy)", ...original.spec });
          assert.match(
            (await page.textContent("#spec-copy p.muted"))!,
            /with every default this job ran with filled in/,
          );
        },
      );

      assert.deepEqual(problems, [], "no script errors in the page");
    } finally {
      await browser.close();
      await server.shutdown();
      await fx.close();
    }
  },
});

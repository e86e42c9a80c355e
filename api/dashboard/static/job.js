/**
 * A job's page: live status and progress (the job's SSE event stream triggers re-reads), the
 * learning curves (charts.js), the evaluation table before and after training, checkpoints with
 * downloads (one tar archive, or a single file through a presigned URL), the job's full spec as
 * JSON text with an editor that submits an edited copy (name, metadata and the spec's fields as
 * submitted) as a new job, the event log, and for a final job a Delete button.
 */
import { api, download, follow, request } from "./api.js";
import { chartSpecs, drawChart } from "./charts.js";
import { h, replace } from "./dom.js";
import { countEtasDown, etaCell, etaClock } from "./eta.js";
import {
  ACTIVE_STATUSES,
  bytes,
  num,
  percent,
  percentPoints,
  successHalfWidth,
  time,
} from "./format.js";
import {
  cancel,
  copyBody,
  labelsOf,
  progressBar,
  progressText,
  runText,
  statusBadge,
} from "./jobs.js";
import { specEditor } from "./submit.js";

/**
 * Evaluation rows: per split, the first and last evaluated step's success rate and score.
 * @param {{names: string[], points: {step: number, values: Record<string, number>}[]}} metrics
 */
export function evalRows(metrics) {
  const splits = metrics.names
    .map((n) => n.match(/^eval\/([^/]+)\/success_rate$/)?.[1])
    .filter((s) => s !== undefined);
  return splits.map((split) => {
    const at = metrics.points.filter((p) =>
      typeof p.values[`eval/${split}/success_rate`] === "number"
    );
    const first = at[0];
    const last = at[at.length - 1];
    const pick = (/** @type {any} */ p) =>
      p && {
        step: p.step,
        rate: p.values[`eval/${split}/success_rate`],
        score: p.values[`eval/${split}/score`],
      };
    return { split, before: pick(first), after: at.length > 1 ? pick(last) : undefined };
  });
}

/**
 * @param {HTMLElement} root
 * @param {{id: string, signal: AbortSignal}} ctx
 */
export async function jobView(root, { id, signal }) {
  const base = `/v1/jobs/${id}`;
  const header = h("section", { class: "card", id: "job-header" });
  const charts = h("section", { class: "charts", id: "charts" });
  const evals = h("section", { class: "card", id: "eval-table" });
  const checkpoints = h("section", { class: "card", id: "checkpoints" });
  const specCard = h("section", { class: "card", id: "spec" });
  const log = h("tbody", { id: "event-log" });
  const message = h("p", { class: "error", role: "alert" });
  replace(
    root,
    message,
    header,
    h("h2", null, "Learning curves"),
    charts,
    h("h2", null, "Evaluation"),
    evals,
    h("h2", null, "Spec"),
    specCard,
    h("h2", null, "Checkpoints"),
    checkpoints,
    h("h2", null, "Events"),
    h(
      "div",
      { class: "log" },
      h(
        "table",
        null,
        h("thead", null, h("tr", null, ["#", "time", "type", "data"].map((t) => h("th", null, t)))),
        log,
      ),
    ),
  );

  // The ETA counts down from when this progress was first seen, across the 5 s re-reads below.
  const etaReadAt = etaClock();
  countEtasDown(header, signal);
  const renderHeader = (/** @type {any} */ job) => {
    const eta = etaCell(job, etaReadAt(job, Date.now()));
    const { name, metadata } = labelsOf(job);
    replace(
      header,
      h(
        "div",
        { class: "toolbar" },
        h("h1", { id: "job-title" }, name ?? `Job ${job.id.slice(0, 8)}`),
        statusBadge(job.status),
        ACTIVE_STATUSES.includes(job.status) && job.status !== "cancelling"
          ? h("button", {
            type: "button",
            id: "cancel-job",
            onclick: async () => {
              try {
                renderHeader(await cancel(job.id));
              } catch (error) {
                replace(message, String(error.message));
              }
            },
          }, "Cancel job")
          : null,
        ACTIVE_STATUSES.includes(job.status) ? null : h("button", {
          type: "button",
          id: "delete-job",
          onclick: () => deleteJob(job),
        }, "Delete job"),
        h("a", { href: `#/jobs/${job.id}/skills` }, "Skill library"),
        h("a", { href: `#/jobs/${job.id}/trajectories` }, "Trajectories"),
        h("button", {
          type: "button",
          class: "link",
          onclick: () => download(`${base}/metrics?format=csv`, `job-${job.id}-metrics.csv`),
        }, "Metrics CSV"),
      ),
      h(
        "dl",
        { class: "facts" },
        [
          ["id", job.id],
          ["name", name ?? "—"],
          ["method", job.method],
          ["environment", String(job.spec?.env?.id ?? "")],
          ["model", String(job.spec?.model?.base ?? "")],
          ["run", runText(job)],
          ["created", time(job.created_at)],
          ["started", time(job.started_at)],
          ["finished", time(job.finished_at)],
          ...Object.entries(metadata).map(([k, v]) => [`metadata ${k}`, String(v)]),
        ].map(([k, v]) => [h("dt", null, k), h("dd", null, v)]),
      ),
      h(
        "p",
        { class: "progress", id: "job-progress" },
        progressBar(job),
        " ",
        progressText(job),
        eta ? ["  ETA ", eta] : "",
      ),
      job.error ? h("p", { class: "error" }, job.error) : null,
    );
  };

  /**
   * After the person confirms: `DELETE /v1/jobs/{id}`, then the job list; an answer such as a 409
   * (another job trains from this one's checkpoint) is shown above the header.
   */
  const deleteJob = async (/** @type {any} */ job) => {
    const { name } = labelsOf(job);
    const what = name ? `"${name}" (${job.id})` : job.id;
    if (
      !confirm(`Delete job ${what} with its checkpoints, metrics and logs? This cannot be undone.`)
    ) {
      return;
    }
    replace(message);
    try {
      await request(base, { method: "DELETE" });
      location.hash = "#/jobs";
    } catch (error) {
      replace(message, String(error.message));
    }
  };

  const renderEvals = (/** @type {any} */ metrics, /** @type {number | undefined} */ episodes) => {
    const rows = evalRows(metrics);
    if (rows.length === 0) return replace(evals, h("p", { class: "muted" }, "No evaluation yet."));
    const cell = (/** @type {any} */ x) =>
      x
        ? `${percent(x.rate)}${
          episodes ? ` ±${percentPoints(successHalfWidth(x.rate, episodes))}` : ""
        } (step ${x.step})`
        : "—";
    replace(
      evals,
      h(
        "table",
        { class: "evals" },
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            ["split", "before", "after", "change", "score before", "score after"].map((t) =>
              h("th", null, t)
            ),
          ),
        ),
        h(
          "tbody",
          null,
          rows.map((r) =>
            h(
              "tr",
              { dataset: { split: r.split } },
              h("td", null, r.split),
              h("td", null, cell(r.before)),
              h("td", null, cell(r.after)),
              h(
                "td",
                null,
                r.after ? `${percentPoints(r.after.rate - r.before.rate)} pts` : "—",
              ),
              h("td", null, num(r.before?.score)),
              h("td", null, num(r.after?.score)),
            )
          ),
        ),
      ),
      episodes
        ? h(
          "p",
          { class: "muted" },
          `${episodes} episodes per split; ± is the 95% interval (percentage points).`,
        )
        : null,
    );
  };

  const renderCheckpoints = (/** @type {any[]} */ list) => {
    if (list.length === 0) {
      return replace(checkpoints, h("p", { class: "muted" }, "No checkpoint yet."));
    }
    replace(
      checkpoints,
      h(
        "table",
        null,
        h(
          "thead",
          null,
          h("tr", null, ["step", "size", "created", "download"].map((t) => h("th", null, t))),
        ),
        h(
          "tbody",
          null,
          list.map((c) =>
            h(
              "tr",
              { dataset: { step: c.step } },
              h("td", null, c.step),
              h("td", null, bytes(c.bytes)),
              h("td", null, time(c.created_at)),
              h(
                "td",
                { class: "files" },
                h("a", {
                  href: `${base}/checkpoints/${c.step}/archive`,
                  class: "archive",
                  onclick: (/** @type {Event} */ e) => {
                    e.preventDefault();
                    download(
                      `${base}/checkpoints/${c.step}/archive`,
                      `job-${id}-step-${c.step}.tar`,
                    )
                      .catch((error) => replace(message, String(error.message)));
                  },
                }, "archive (.tar)"),
                c.files.map((/** @type {any} */ f) =>
                  h("a", {
                    href: `${base}/checkpoints/${c.step}/files/${encodeURIComponent(f.name)}`,
                    class: "file",
                    title: `${bytes(f.bytes)} sha256 ${f.sha256}`,
                    onclick: async (/** @type {Event} */ e) => {
                      e.preventDefault();
                      try {
                        const { url } = await api(
                          `${base}/checkpoints/${c.step}/files/${
                            encodeURIComponent(f.name)
                          }?redirect=false&expires_in=600`,
                        );
                        location.assign(url);
                      } catch (error) {
                        replace(message, String(error.message));
                      }
                    },
                  }, f.name)
                ),
              ),
            )
          ),
        ),
      ),
    );
  };

  /**
   * The spec as JSON text, and an editor for a copy (opened on demand, kept across refreshes): the
   * job's name with " (copy)" and its metadata above the spec's fields as submitted, defaults left
   * out (jobs.js `copyBody`).
   */
  const renderSpec = (/** @type {any} */ job) => {
    const text = JSON.stringify(job.spec ?? {}, null, 2);
    const copyText = JSON.stringify(copyBody(job), null, 2);
    const copy = h("div", { id: "spec-copy" });
    replace(
      specCard,
      h(
        "div",
        { class: "toolbar" },
        h("span", { class: "muted" }, "The spec as the API stored it, defaults filled in."),
        h("button", {
          type: "button",
          id: "edit-copy",
          onclick: () => {
            if (copy.firstChild) return;
            const form = specEditor({
              ids: "copy",
              submitId: "submit-copy",
              text: copyText,
              rows: 24,
            });
            replace(
              copy,
              h(
                "p",
                { class: "muted" },
                "Edit, then submit as a new job (this one is unchanged). name and metadata are " +
                  "the new job's labels; the other fields are its spec" +
                  (job.submitted_spec
                    ? " as this job was submitted: the fields left out take their defaults " +
                      "afresh (those that depend on other fields too)."
                    : " with every default this job ran with filled in (its submission was not " +
                      "kept)."),
              ),
              form.element,
            );
            form.editor.focus();
          },
        }, "Submit an edited copy…"),
      ),
      h("pre", { class: "spec-json", id: "job-spec" }, text),
      copy,
    );
  };

  let drawnSteps = "";
  let specShown = false;
  const refresh = async (/** @type {boolean} */ all) => {
    const job = await api(base);
    renderHeader(job);
    if (!specShown) renderSpec(job), specShown = true;
    const metrics = await api(`${base}/metrics`);
    const episodes = job.spec?.eval?.episodes;
    const key = JSON.stringify(metrics.points.map((/** @type {any} */ p) => [p.step, p.attempt]));
    if (key !== drawnSteps || all) {
      drawnSteps = key;
      const { steps, charts: specs } = chartSpecs(metrics, episodes);
      const width = Math.max(320, Math.min(560, Math.floor((charts.clientWidth || 1100) / 2) - 24));
      replace(
        charts,
        specs.length
          ? specs.map((s) => drawChart(steps, s, width))
          : h("p", { class: "muted" }, "No metrics yet."),
      );
      renderEvals(metrics, episodes);
      renderCheckpoints((await api(`${base}/checkpoints`)).checkpoints);
    }
    return job;
  };

  await refresh(true);
  // Progress changes without events (e.g. within warm-up): re-read the job every 5 s meanwhile.
  const tick = setInterval(() => api(base).then(renderHeader).catch(() => {}), 5000);
  signal.addEventListener("abort", () => clearInterval(tick));
  let timer;
  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(() => refresh(false).catch((e) => replace(message, String(e.message))), 300);
  };
  await follow(`${base}/events`, {
    signal,
    onMessage: (m) => {
      if (m.event === "end") return later();
      if (m.event === "error") return replace(message, m.data);
      let e;
      try {
        e = JSON.parse(m.data);
      } catch {
        return;
      }
      log.appendChild(
        h(
          "tr",
          { dataset: { type: e.type } },
          h("td", null, e.id),
          h("td", null, time(e.created_at)),
          h("td", null, e.type),
          h("td", null, h("code", null, JSON.stringify(e.data))),
        ),
      );
      later();
    },
  });
  clearTimeout(timer);
  clearInterval(tick);
  if (!signal.aborted) await refresh(true);
}

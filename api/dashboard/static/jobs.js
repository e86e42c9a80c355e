/**
 * The job list: live over SSE (`GET /v1/jobs`, `Accept: text/event-stream`), filtered by status,
 * by the start of a job's name (`name_prefix`) and by one metadata pair (`metadata[key]=value`).
 */
import { api, follow } from "./api.js";
import { h, replace } from "./dom.js";
import { countEtasDown, etaCell, etaClock } from "./eta.js";
import { ACTIVE_STATUSES, percent, time } from "./format.js";
import {
  cancelledInQueueText,
  queuedAgainText,
  stageCount,
  stageDetail,
} from "./stage_progress.js";

const FILTERS = [
  ["", "all"],
  ["queued,running,cancelling", "active"],
  ["queued", "queued"],
  ["running", "running"],
  ["cancelling", "cancelling"],
  ["succeeded", "succeeded"],
  ["failed", "failed"],
  ["cancelled", "cancelled"],
];

/**
 * A job's progress as text: `rollout 3/8`; in a warm-up stage its own count instead of the
 * updates, `warmup_policy · SFT step 336/1120, loss 0.412` (stage_progress.js `stageDetail`, the
 * words of `seed status`), also for a job that failed or was cancelled there: where it stopped.
 * A job queued again (stage_progress.js `queuedAgain`) says which run it waits for, `queued again:
 * run 2 of at most 3` (`queued to resume: run 1 of at most 3` when its worker gave its first run
 * back without using it up; `queuedAgainText`, the words of `seed status`), not the last run's
 * stage; one cancelled there, `cancelled while queued again: run 2 of at most 3`
 * (`cancelledInQueueText`).
 * @param {any} job
 */
export function progressText(job) {
  const again = queuedAgainText(job) ?? cancelledInQueueText(job);
  if (again !== null) return again;
  const p = job.progress;
  if (!p) return "";
  const detail = stageDetail(p);
  const steps = p.total_steps && !stageCount(p) ? ` ${p.step ?? 0}/${p.total_steps}` : "";
  return `${p.stage ?? ""}${steps}${detail ? ` · ${detail}` : ""}`;
}

/**
 * Which run of its allowed runs a job is on: `1 of at most 3`. The API's `attempt` counts from 0
 * and grows by one each time the reaper requeues the job after its worker was lost; the job fails
 * once `max_attempts` runs are used (jobs/README.md). A job no worker has started yet says so.
 * @param {{attempt: number, max_attempts: number, started_at: string | null}} job
 */
export function runText(job) {
  if (job.started_at === null) return `not started (at most ${job.max_attempts} runs)`;
  return `${job.attempt + 1} of at most ${job.max_attempts}`;
}

/**
 * The share of a job's progress bar in [0, 1]: 1 once succeeded; 0 while queued (a job queued
 * again, stage_progress.js `queuedAgain`, included: its progress is the last run's); in a warm-up
 * stage the share of its own count (stage_progress.js `stageCount`, as `seed status`'s bar,
 * whatever the status); else the share of updates done.
 * @param {any} job
 */
export function progressShare(job) {
  const p = job.progress;
  const within = stageCount(p);
  if (job.status === "succeeded") return 1;
  if (job.status === "queued") return 0;
  if (within) return Math.min(1, within.done / within.total);
  return p?.total_steps ? Math.min(1, (p.step ?? 0) / p.total_steps) : 0;
}

/**
 * A progress bar element ({@link progressShare}).
 * @param {any} job
 */
export function progressBar(job) {
  const share = progressShare(job);
  return h(
    "span",
    { class: "bar", title: `${Math.round(share * 100)}%` },
    h("span", { class: "fill", style: { width: `${share * 100}%` } }),
  );
}

/**
 * A status badge.
 * @param {string} status
 */
export function statusBadge(status) {
  return h("span", { class: `status status-${status}`, dataset: { status } }, status);
}

/**
 * POST cancel, then `after()`.
 * @param {string} id
 */
export async function cancel(id) {
  return await api(`/v1/jobs/${id}/cancel`, { method: "POST" });
}

/**
 * A job's outcome as text: for a succeeded job the success rate of each evaluation split at its
 * latest metrics (`test_seen 81.0% · test_unseen 79.0%`), else of the training rollouts.
 * @param {any} job
 */
export function resultText(job) {
  if (job.status !== "succeeded") return "";
  const m = job.latest_metrics ?? {};
  const evals = Object.keys(m)
    .map((k) => [k.match(/^eval\/([^/]+)\/success_rate$/)?.[1], m[k]])
    .filter(([split]) => split !== undefined)
    .map(([split, v]) => `${split} ${percent(v)}`);
  if (evals.length) return evals.join(" · ");
  return typeof m.success_rate === "number" ? `train ${percent(m.success_rate)}` : "";
}

/**
 * A job's name and metadata (fields that older servers leave out read as null and `{}`).
 * @param {any} job
 * @returns {{name: string | null, metadata: Record<string, string>}}
 */
export function labelsOf(job) {
  const name = typeof job.name === "string" && job.name !== "" ? job.name : null;
  const metadata = job.metadata && typeof job.metadata === "object" ? job.metadata : {};
  return { name, metadata };
}

/** What the edited copy of a named job is called: its name and this (see {@link copyBody}). */
export const COPY_SUFFIX = " (copy)";

/** Longest job name the API accepts, in characters (jobs/labels.ts `MAX_JOB_NAME_CHARS`). */
const MAX_NAME_CHARS = 128;

/**
 * The body that submits a copy of `job` (`POST /v1/jobs`): its name with {@link COPY_SUFFIX}
 * (the name cut so that the whole stays within 128 characters), its metadata unchanged, then the
 * spec's fields as they were submitted (`submitted_spec`: defaults left out, so the copy's
 * defaults, those that depend on other fields included, are filled afresh from what it says);
 * a job without `submitted_spec` (submitted before the API kept it) gives its stored `spec`. A
 * label the job lacks is left out, so an unlabelled job's copy is its spec alone.
 * @param {any} job
 * @returns {Record<string, unknown>}
 */
export function copyBody(job) {
  const { name, metadata } = labelsOf(job);
  /** @type {Record<string, unknown>} */
  const body = {};
  if (name) {
    const room = MAX_NAME_CHARS - COPY_SUFFIX.length;
    body.name = `${[...name].slice(0, room).join("")}${COPY_SUFFIX}`;
  }
  if (Object.keys(metadata).length) body.metadata = { ...metadata };
  return { ...body, ...(job.submitted_spec ?? job.spec ?? {}) };
}

/**
 * The list's metadata filter as typed (`team=rl`): the key before the first `=`, the value after
 * it (may be empty, may hold `=`). Null for empty text; an Error for text with no `=` or no key.
 * @param {string} text
 * @returns {{key: string, value: string} | null | Error}
 */
export function metadataFilter(text) {
  const t = text.trim();
  if (t === "") return null;
  const cut = t.indexOf("=");
  if (cut <= 0) {
    return new Error(
      `Cannot filter by metadata as the filter must read key=value: current value is ${t}`,
    );
  }
  return { key: t.slice(0, cut).trim(), value: t.slice(cut + 1).trim() };
}

/**
 * The list's location: its filters and the cursors of the pages before this one. `name` is the
 * start of the names shown, `meta` one `key=value` metadata pair.
 * @param {{status?: string, name?: string, meta?: string, limit?: string, pages?: string[]}} q
 */
function listHash(q) {
  const p = new URLSearchParams();
  if (q.status) p.set("status", q.status);
  if (q.name) p.set("name", q.name);
  if (q.meta) p.set("meta", q.meta);
  if (q.limit) p.set("limit", q.limit);
  if (q.pages?.length) p.set("page", q.pages.join(","));
  const s = p.toString();
  return s ? `#/jobs?${s}` : "#/jobs";
}

/**
 * The job list, one page at a time: the first page and any later one are live over SSE. Paging
 * follows the API's `next_cursor`; the cursors of earlier pages stay in the location (`page=`), so
 * the browser's back button and a reload keep the page.
 * @param {HTMLElement} root
 * @param {{params: URLSearchParams, signal: AbortSignal}} ctx
 */
export async function jobsView(root, { params, signal }) {
  const status = params.get("status") ?? "";
  const nameFilter = params.get("name") ?? "";
  const metaText = params.get("meta") ?? "";
  const meta = metadataFilter(metaText);
  const limit = /^\d{1,3}$/.test(params.get("limit") ?? "") ? String(params.get("limit")) : "";
  const pages = (params.get("page") ?? "").split(",").filter((c) => /^[A-Za-z0-9_-]+$/.test(c));
  const here = { status, name: nameFilter, meta: metaText, limit, pages };
  const select = h(
    "select",
    {
      id: "status-filter",
      onchange: () => {
        location.hash = listHash({ ...here, status: select.value, pages: [] });
      },
    },
    FILTERS.map(([v, label]) => h("option", { value: v, selected: v === status }, label)),
  );
  const nameInput = h("input", {
    type: "search",
    id: "name-filter",
    placeholder: "starts with…",
    title: "Jobs whose name starts with this (case-sensitive)",
    value: nameFilter,
    size: 16,
    onchange: () => {
      location.hash = listHash({ ...here, name: nameInput.value.trim(), pages: [] });
    },
  });
  const metaInput = h("input", {
    type: "search",
    id: "metadata-filter",
    placeholder: "key=value",
    title: "Jobs whose metadata holds this key with this value",
    value: metaText,
    size: 16,
    onchange: () => {
      const text = metaInput.value.trim();
      const parsed = metadataFilter(text);
      if (parsed instanceof Error) return replace(message, parsed.message);
      location.hash = listHash({ ...here, meta: text, pages: [] });
    },
  });
  const state = h("span", { class: "muted", id: "live-state" }, "connecting…");
  const body = h("tbody", { id: "jobs-body" });
  const message = h("p", { class: "error", role: "alert" });
  /** @type {Set<string>} */
  const selected = new Set();
  const compare = h("button", {
    type: "button",
    id: "compare-jobs",
    disabled: true,
    onclick: () => {
      location.hash = `#/compare?jobs=${[...selected].join(",")}`;
    },
  }, "Compare selected");
  const newer = h("button", {
    type: "button",
    id: "page-newer",
    disabled: pages.length === 0,
    onclick: () => {
      location.hash = listHash({ ...here, pages: pages.slice(0, -1) });
    },
  }, "← Newer");
  const older = h("button", { type: "button", id: "page-older", disabled: true }, "Older →");
  const pageInfo = h("span", { class: "muted", id: "page-info" }, `page ${pages.length + 1}`);
  const COLUMNS = [
    "",
    "Job",
    "Status",
    "Method",
    "Model",
    "Environment",
    "Progress",
    "Result",
    "Failure reason",
    "ETA",
    "Created",
    "",
  ];
  replace(
    root,
    h(
      "div",
      { class: "toolbar" },
      h("h1", null, "Jobs"),
      h("label", null, "Status ", select),
      h("label", null, "Name ", nameInput),
      h("label", null, "Metadata ", metaInput),
      state,
      compare,
      h("a", { class: "button", href: "#/jobs/new" }, "New job"),
    ),
    message,
    h(
      "table",
      { class: "jobs" },
      h("thead", null, h("tr", null, COLUMNS.map((t) => h("th", null, t)))),
      body,
    ),
    h("div", { class: "toolbar pager" }, newer, pageInfo, older),
  );
  // Each running job's ETA counts down from when its progress was first seen here.
  const etaReadAt = etaClock();
  countEtasDown(body, signal);
  const syncCompare = () => {
    compare.disabled = selected.size < 2;
    replace(compare, `Compare selected${selected.size ? ` (${selected.size})` : ""}`);
  };
  /** @param {any} job */
  const row = (job) => {
    const { name, metadata } = labelsOf(job);
    const reason = job.status === "failed" ? String(job.error ?? "") : "";
    return h(
      "tr",
      { dataset: { job: job.id } },
      h(
        "td",
        null,
        h("input", {
          type: "checkbox",
          class: "pick",
          "aria-label": `select job ${job.id}`,
          checked: selected.has(job.id),
          onchange: (/** @type {Event} */ e) => {
            if (/** @type {HTMLInputElement} */ (e.target).checked) selected.add(job.id);
            else selected.delete(job.id);
            syncCompare();
          },
        }),
      ),
      h(
        "td",
        { class: "job-name" },
        h("a", { href: `#/jobs/${job.id}`, title: job.id }, name ?? job.id.slice(0, 8)),
        name ? h("span", { class: "muted id" }, ` ${job.id.slice(0, 8)}`) : null,
        Object.keys(metadata).length
          ? h(
            "div",
            { class: "metadata" },
            Object.entries(metadata).map(([k, v]) => h("span", { class: "tag" }, `${k}=${v}`)),
          )
          : null,
      ),
      h("td", null, statusBadge(job.status)),
      h("td", null, job.method),
      h("td", { class: "model" }, String(job.spec?.model?.base ?? "")),
      h("td", null, String(job.spec?.env?.id ?? "")),
      h("td", { class: "progress" }, progressBar(job), " ", progressText(job)),
      h("td", { class: "result" }, resultText(job)),
      h(
        "td",
        { class: "reason", title: reason || null },
        reason.length > 200 ? `${reason.slice(0, 200)}…` : reason,
      ),
      h("td", null, etaCell(job, etaReadAt(job, Date.now()))),
      h("td", null, time(job.created_at)),
      h(
        "td",
        null,
        ACTIVE_STATUSES.includes(job.status) && job.status !== "cancelling"
          ? h("button", {
            type: "button",
            class: "cancel",
            onclick: async () => {
              try {
                await cancel(job.id);
              } catch (error) {
                replace(message, String(error.message));
              }
            },
          }, "Cancel")
          : null,
      ),
    );
  };
  const render = (/** @type {{jobs: any[], next_cursor?: string | null}} */ page) => {
    older.onclick = page.next_cursor
      ? () => location.hash = listHash({ ...here, pages: [...pages, String(page.next_cursor)] })
      : null;
    older.disabled = !page.next_cursor;
    if (page.jobs.length === 0) {
      return replace(
        body,
        h("tr", null, h("td", { colspan: COLUMNS.length, class: "muted" }, "No jobs.")),
      );
    }
    replace(body, page.jobs.map(row));
  };
  const query = new URLSearchParams({ limit: limit || "50" });
  if (status) query.set("status", status);
  if (nameFilter) query.set("name_prefix", nameFilter);
  if (meta instanceof Error) replace(message, meta.message);
  else if (meta) query.set(`metadata[${meta.key}]`, meta.value);
  if (pages.length) query.set("cursor", pages[pages.length - 1]);
  await follow(`/v1/jobs?${query}`, {
    signal,
    onState: (s) => replace(state, s),
    onMessage: (m) => {
      if (m.event === "jobs") render(JSON.parse(m.data));
    },
  });
}

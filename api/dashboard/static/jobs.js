/** The job list: live over SSE (`GET /v1/jobs`, `Accept: text/event-stream`), filtered by status. */
import { api, follow } from "./api.js";
import { h, replace } from "./dom.js";
import { ACTIVE_STATUSES, duration, time } from "./format.js";

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
 * A job's progress as text: `rollout 3/8`.
 * @param {any} job
 */
export function progressText(job) {
  const p = job.progress;
  if (!p) return "";
  const steps = p.total_steps ? ` ${p.step ?? 0}/${p.total_steps}` : "";
  return `${p.stage ?? ""}${steps}`;
}

/**
 * A progress bar element (share of steps done).
 * @param {any} job
 */
export function progressBar(job) {
  const p = job.progress;
  const share = job.status === "succeeded"
    ? 1
    : p?.total_steps
    ? Math.min(1, (p.step ?? 0) / p.total_steps)
    : 0;
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
 * @param {HTMLElement} root
 * @param {{params: URLSearchParams, signal: AbortSignal}} ctx
 */
export async function jobsView(root, { params, signal }) {
  const status = params.get("status") ?? "";
  const select = h(
    "select",
    {
      id: "status-filter",
      onchange: () => {
        location.hash = select.value ? `#/jobs?status=${select.value}` : "#/jobs";
      },
    },
    FILTERS.map(([v, label]) => h("option", { value: v, selected: v === status }, label)),
  );
  const state = h("span", { class: "muted", id: "live-state" }, "connecting…");
  const body = h("tbody", { id: "jobs-body" });
  const message = h("p", { class: "error", role: "alert" });
  replace(
    root,
    h(
      "div",
      { class: "toolbar" },
      h("h1", null, "Jobs"),
      h("label", null, "Status ", select),
      state,
      h("a", { class: "button", href: "#/jobs/new" }, "New job"),
    ),
    message,
    h(
      "table",
      { class: "jobs" },
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          ["Job", "Status", "Method", "Environment", "Progress", "ETA", "Created", ""].map((t) =>
            h("th", null, t)
          ),
        ),
      ),
      body,
    ),
  );
  const render = (/** @type {any[]} */ jobs) => {
    if (jobs.length === 0) {
      return replace(body, h("tr", null, h("td", { colspan: 8, class: "muted" }, "No jobs.")));
    }
    replace(
      body,
      jobs.map((job) =>
        h(
          "tr",
          { dataset: { job: job.id } },
          h("td", null, h("a", { href: `#/jobs/${job.id}`, title: job.id }, job.id.slice(0, 8))),
          h("td", null, statusBadge(job.status)),
          h("td", null, job.method),
          h("td", null, String(job.spec?.env?.id ?? "")),
          h("td", { class: "progress" }, progressBar(job), " ", progressText(job)),
          h("td", null, job.status === "running" ? duration(job.progress?.eta_s) : ""),
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
        )
      ),
    );
  };
  const query = new URLSearchParams({ limit: "100" });
  if (status) query.set("status", status);
  await follow(`/v1/jobs?${query}`, {
    signal,
    onState: (s) => replace(state, s),
    onMessage: (m) => {
      if (m.event === "jobs") render(JSON.parse(m.data).jobs);
    },
  });
}

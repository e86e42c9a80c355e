/**
 * The skill library of a job (`GET /v1/jobs/{id}/skills[?step=N]`): every skill with times seen,
 * won/lost, mean teacher gap Δ and first/last step; search and sort; links to the trajectories
 * each skill came from; and a comparison of two steps' libraries (skills added and dropped).
 * Skills are model-written: they are shown as text only.
 */
import { api, ApiError } from "./api.js";
import { h, replace } from "./dom.js";
import { num } from "./format.js";

/**
 * The library's de-duplication key (workers/skills/library.ts `normalizeSkill`): lowercase,
 * whitespace collapsed, punctuation, symbols and spaces stripped at both ends.
 * @param {string} text
 */
export function normalizeSkill(text) {
  return text.toLowerCase().replace(/\s+/g, " ").replace(/^[\p{P}\p{S}\s]+|[\p{P}\p{S}\s]+$/gu, "");
}

const SORTS = {
  times_seen: (/** @type {any} */ a, /** @type {any} */ b) => b.times_seen - a.times_seen,
  mean_teacher_gap: (/** @type {any} */ a, /** @type {any} */ b) =>
    (b.mean_teacher_gap ?? -Infinity) - (a.mean_teacher_gap ?? -Infinity),
  success_share: (/** @type {any} */ a, /** @type {any} */ b) =>
    b.success_count / b.times_seen - a.success_count / a.times_seen,
  last_step: (/** @type {any} */ a, /** @type {any} */ b) => b.last_step - a.last_step,
  first_step: (/** @type {any} */ a, /** @type {any} */ b) => a.first_step - b.first_step,
  text: (/** @type {any} */ a, /** @type {any} */ b) => a.text.localeCompare(b.text),
};

/**
 * Link to a trajectory in the viewer.
 * @param {string} jobId
 * @param {number} step
 * @param {string} trajectoryId
 */
export function trajectoryHref(jobId, step, trajectoryId) {
  return `#/jobs/${jobId}/trajectories?${new URLSearchParams({
    step: String(step),
    trajectory: trajectoryId,
  })}`;
}

/**
 * @param {HTMLElement} root
 * @param {{id: string, params: URLSearchParams}} ctx
 */
export async function skillsView(root, { id, params }) {
  const base = `/v1/jobs/${id}`;
  const step = params.get("step");
  let view;
  try {
    view = await api(`${base}/skills${step ? `?step=${encodeURIComponent(step)}` : ""}`);
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
    replace(
      root,
      h("h1", null, "Skill library"),
      h("p", { class: "muted" }, error.message),
      h("a", { href: `#/jobs/${id}` }, "Back to the job"),
    );
    return;
  }
  const skills = view.library.skills ?? [];
  const steps = (await api(`${base}/skills/steps`)).steps.map((/** @type {any} */ s) => s.step);
  const search = h("input", {
    type: "search",
    id: "skill-search",
    placeholder: "Search skills",
    oninput: () => render(),
  });
  const sort = h(
    "select",
    { id: "skill-sort", onchange: () => render() },
    [
      ["times_seen", "times seen"],
      ["mean_teacher_gap", "mean Δ"],
      ["success_share", "won share"],
      ["last_step", "last step"],
      ["first_step", "first step"],
      ["text", "text"],
    ]
      .map(([v, label]) => h("option", { value: v }, label)),
  );
  const body = h("tbody", { id: "skills-body" });
  const count = h("span", { class: "muted" });

  function render() {
    const q = search.value.trim().toLowerCase();
    const shown = skills.filter((/** @type {any} */ s) =>
      q === "" || s.text.toLowerCase().includes(q) || s.summary.toLowerCase().includes(q)
    ).sort(SORTS[sort.value]);
    replace(count, `${shown.length} of ${skills.length} skills`);
    replace(
      body,
      shown.map((/** @type {any} */ s) =>
        h(
          "tr",
          { class: "skill" },
          h(
            "td",
            { class: "skill-text" },
            s.text,
            s.summary ? h("div", { class: "muted summary" }, s.summary) : null,
          ),
          h("td", null, s.times_seen),
          h("td", null, `${s.success_count} / ${s.failure_count}`),
          h("td", null, num(s.mean_teacher_gap)),
          h("td", null, `${s.first_step}–${s.last_step}`),
          h(
            "td",
            { class: "sources" },
            s.provenance.map((/** @type {any} */ p) =>
              h("a", {
                class: "source",
                href: trajectoryHref(id, p.step, p.trajectory_id),
                title: `${p.task_id}, ${p.success ? "won" : "lost"}, Δ ${num(p.mean_teacher_gap)}`,
              }, p.trajectory_id)
            ),
          ),
        )
      ),
    );
  }

  const stepSelect = (/** @type {string} */ idName, /** @type {number | undefined} */ selected) =>
    h(
      "select",
      { id: idName },
      steps.map((/** @type {number} */ s) =>
        h("option", { value: s, selected: s === selected }, `step ${s}`)
      ),
    );
  const from = stepSelect("compare-from", steps[0]);
  const to = stepSelect("compare-to", steps[steps.length - 1]);
  const diff = h("div", { id: "skill-diff" });
  const compare = async () => {
    const [a, b] = await Promise.all(
      [from.value, to.value].map((s) => api(`${base}/skills?step=${s}`)),
    );
    const keys = (/** @type {any} */ v) =>
      new Map(v.library.skills.map((/** @type {any} */ s) => [normalizeSkill(s.text), s]));
    const ka = keys(a);
    const kb = keys(b);
    const added = [...kb].filter(([k]) => !ka.has(k)).map(([, s]) => s);
    const dropped = [...ka].filter(([k]) => !kb.has(k)).map(([, s]) => s);
    const list = (/** @type {string} */ cls, /** @type {any[]} */ xs) =>
      xs.length
        ? h("ul", { class: cls }, xs.map((s) => h("li", null, s.text)))
        : h("p", { class: "muted" }, "none");
    replace(
      diff,
      h("h3", null, `Added between step ${a.step} and step ${b.step} (${added.length})`),
      list("added", added),
      h("h3", null, `Dropped (${dropped.length})`),
      list("dropped", dropped),
    );
  };

  replace(
    root,
    h(
      "div",
      { class: "toolbar" },
      h("h1", null, `Skill library — step ${view.step}`),
      h("a", { href: `#/jobs/${id}` }, "Back to the job"),
    ),
    h("div", { class: "toolbar" }, search, h("label", null, "Sort by ", sort), count),
    h(
      "table",
      { class: "skills" },
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          ["skill", "seen", "won / lost", "mean Δ", "steps", "from trajectories"].map((t) =>
            h("th", null, t)
          ),
        ),
      ),
      body,
    ),
    h("h2", null, "Compare two steps"),
    h(
      "div",
      { class: "toolbar" },
      from,
      " → ",
      to,
      h("button", {
        type: "button",
        id: "compare",
        onclick: () => compare().catch((e) => replace(diff, h("p", { class: "error" }, e.message))),
      }, "Compare"),
    ),
    diff,
  );
  render();
}

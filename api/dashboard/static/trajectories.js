/**
 * The trajectory viewer (`GET /v1/jobs/{id}/trajectories`): a step's rollouts and evaluation
 * episodes; for one trajectory each turn's observation (and image, fetched with the key), the
 * response, action, validity, reward and the environment's feedback (the analyzer's `Effect:`
 * line), the trajectory's analysis and skill, and on re-scored turns the response tokens coloured
 * by their teacher gap Δ = ℓ_T − ℓ_old (green: the skill in the prompt made the token more likely;
 * red: less likely). All model text is shown as text.
 */
import { api, request } from "./api.js";
import { h, replace } from "./dom.js";
import { num, percent } from "./format.js";

/**
 * Background of a token with teacher gap `gap`, given the largest |Δ| shown (`scale`).
 * @param {number} gap nats
 * @param {number} scale nats (> 0)
 */
export function gapColor(gap, scale) {
  const a = Math.min(1, Math.abs(gap) / scale) * 0.85;
  return gap >= 0 ? `rgba(44, 160, 44, ${a.toFixed(3)})` : `rgba(214, 39, 40, ${a.toFixed(3)})`;
}

/**
 * The response as coloured token spans.
 * @param {string[]} tokens
 * @param {number[]} gaps
 * @param {number} scale
 */
function tokenSpans(tokens, gaps, scale) {
  return h(
    "div",
    { class: "tokens" },
    tokens.map((t, i) =>
      h("span", {
        class: "tok",
        dataset: { gap: String(gaps[i]) },
        title: `Δ = ${gaps[i] >= 0 ? "+" : ""}${gaps[i].toFixed(3)} nats`,
        style: { backgroundColor: gapColor(gaps[i], scale) },
      }, t)
    ),
  );
}

/**
 * An observation image, fetched with the key (an <img src> cannot send it) and shown from a
 * blob: URL.
 * @param {{url: string, width: number, height: number, name: string}} image
 */
function observationImage(image) {
  const img = h("img", {
    alt: image.name,
    width: image.width,
    height: image.height,
    class: "obs-image",
  });
  request(image.url).then((r) => r.blob()).then((b) => {
    img.setAttribute("src", URL.createObjectURL(b));
  }).catch(() =>
    img.replaceWith(h("span", { class: "error" }, `image ${image.name} did not load`))
  );
  return img;
}

/**
 * @param {HTMLElement} root
 * @param {{id: string, params: URLSearchParams}} ctx
 */
export async function trajectoriesView(root, { id, params }) {
  const base = `/v1/jobs/${id}/trajectories`;
  const { steps } = await api(base);
  if (steps.length === 0) {
    replace(
      root,
      h("h1", null, "Trajectories"),
      h("p", { class: "muted" }, "This job has dumped no trajectories yet."),
    );
    return;
  }
  const wanted = params.get("step");
  const step = wanted !== null
    ? Number(wanted)
    : [...steps].reverse().find((/** @type {any} */ s) => s.rollout)?.step ??
      steps[steps.length - 1].step;
  const body = await api(`${base}?step=${step}`);
  const list = body.trajectories;
  const wantedId = params.get("trajectory");
  const wantedSource = params.get("source");
  const selected =
    list.find((/** @type {any} */ t) =>
      t.id === wantedId && (!wantedSource || t.source === wantedSource)
    ) ??
      (wantedId ? null : list[0]);
  const hrefOf = (/** @type {any} */ t) =>
    `#/jobs/${id}/trajectories?${new URLSearchParams({
      step: String(step),
      trajectory: t.id,
      source: t.source,
    })}`;

  const stepSelect = h(
    "select",
    {
      id: "step-select",
      onchange: () => {
        location.hash = `#/jobs/${id}/trajectories?step=${stepSelect.value}`;
      },
    },
    steps.map((/** @type {any} */ s) =>
      h(
        "option",
        { value: s.step, selected: s.step === step },
        `step ${s.step}${s.rollout ? "" : " (eval only)"}`,
      )
    ),
  );

  const side = h(
    "nav",
    { class: "traj-list" },
    ["rollout", "eval"].map((source) => {
      const xs = list.filter((/** @type {any} */ t) => t.source === source);
      if (xs.length === 0) return null;
      const total = body.totals[source];
      return [
        h(
          "h3",
          null,
          `${source === "rollout" ? "Rollouts" : "Evaluation"} (${xs.length}${
            total > xs.length ? ` of ${total}` : ""
          })`,
        ),
        h(
          "ul",
          null,
          xs.map((/** @type {any} */ t) =>
            h(
              "li",
              { class: t === selected ? "current" : "" },
              h(
                "a",
                { href: hrefOf(t), class: t.won ? "won" : "lost" },
                `${t.won ? "✓" : "✗"} ${t.id}`,
              ),
              h("span", { class: "muted" }, ` ${t.split} · ${num(t.score)}`),
            )
          ),
        ),
      ];
    }),
  );

  const evalTable = body.eval && body.eval.length > 0
    ? h(
      "table",
      { class: "evals" },
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          ["split", "episodes", "success", "score", "mean turns"].map((t) => h("th", null, t)),
        ),
      ),
      h(
        "tbody",
        null,
        body.eval.map((/** @type {any} */ s) =>
          h(
            "tr",
            null,
            h("td", null, s.split),
            h("td", null, s.episodes),
            h("td", null, percent(s.success_rate)),
            h("td", null, num(s.score)),
            h("td", null, num(s.mean_turns, 2)),
          )
        ),
      ),
    )
    : null;

  replace(
    root,
    h(
      "div",
      { class: "toolbar" },
      h("h1", null, "Trajectories"),
      stepSelect,
      h("a", { href: `#/jobs/${id}` }, "Back to the job"),
      h("a", { href: `#/jobs/${id}/skills` }, "Skill library"),
    ),
    evalTable,
    h(
      "div",
      { class: "traj-layout" },
      side,
      h(
        "section",
        { class: "traj", id: "trajectory" },
        selected ? detail(selected) : missing(wantedId, body),
      ),
    ),
  );
}

/**
 * @param {string | null} wantedId
 * @param {any} body
 */
function missing(wantedId, body) {
  return h(
    "p",
    { class: "muted" },
    wantedId
      ? `Trajectory ${wantedId} is not in the dump of step ${body.step} (a dump keeps the first ${body.trajectories.length} trajectories).`
      : "Choose a trajectory.",
  );
}

/** @param {any} t */
function detail(t) {
  const gaps = t.steps.flatMap((/** @type {any} */ s) => s.teacher_gaps ?? []);
  const scale = Math.max(0.1, ...gaps.map((/** @type {number} */ g) => Math.abs(g)));
  return [
    h("h2", null, t.id),
    h(
      "dl",
      { class: "facts" },
      [
        ["task", t.task_id],
        ["instruction", t.instruction],
        ["split", t.split],
        ["outcome", t.won ? "won" : "lost"],
        ["score", num(t.score)],
        ["turns", `${t.turns}${t.truncated ? " (cut at max turns)" : ""}`],
      ].map(([k, v]) => [h("dt", null, k), h("dd", null, v)]),
    ),
    t.analysis
      ? h(
        "section",
        { class: "analysis card" },
        h("h3", null, "Analysis"),
        t.analysis.skill !== null
          ? [
            h(
              "p",
              null,
              h("strong", null, "Skill: "),
              h("span", { class: "skill-text", id: "trajectory-skill" }, t.analysis.skill),
            ),
            t.analysis.summary
              ? h("p", null, h("strong", null, "Summary: "), h("span", null, t.analysis.summary))
              : null,
          ]
          : h(
            "p",
            { class: "error" },
            "The analysis did not parse: this trajectory got no distillation signal.",
          ),
        t.analysis.raw !== null
          ? h(
            "details",
            null,
            h("summary", null, "Analyzer output"),
            h("pre", null, t.analysis.raw),
          )
          : null,
      )
      : null,
    gaps.length > 0
      ? h(
        "p",
        { class: "legend" },
        "Response tokens are coloured by their teacher gap Δ = ℓ_T − ℓ_old: ",
        h(
          "span",
          { class: "tok", style: { backgroundColor: gapColor(scale, scale) } },
          `+${scale.toFixed(2)}`,
        ),
        " the skill made the token more likely, ",
        h(
          "span",
          { class: "tok", style: { backgroundColor: gapColor(-scale, scale) } },
          `−${scale.toFixed(2)}`,
        ),
        " less likely (nats).",
      )
      : null,
    t.steps.map((/** @type {any} */ s) =>
      h(
        "article",
        { class: `turn ${s.valid ? "" : "invalid"}`, dataset: { turn: s.turn } },
        h(
          "h3",
          null,
          `Turn ${s.turn}`,
          h(
            "span",
            { class: "muted" },
            `  reward ${num(s.reward)} · ${s.valid ? "valid" : "invalid action"}`,
          ),
        ),
        s.image ? observationImage(s.image) : null,
        h("pre", { class: "observation" }, s.observation),
        h("div", { class: "label" }, "Response"),
        s.response_tokens && s.teacher_gaps
          ? tokenSpans(s.response_tokens, s.teacher_gaps, scale)
          : h("pre", { class: "response" }, s.response),
        h(
          "div",
          null,
          h("span", { class: "label" }, "Action: "),
          h("code", null, s.action || "(none)"),
        ),
        typeof s.feedback === "string"
          ? h("div", { class: "feedback" }, h("span", { class: "label" }, "Effect: "), s.feedback)
          : null,
      )
    ),
  ];
}

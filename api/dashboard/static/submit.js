/**
 * Submitting a job: a JSON editor prefilled with a preset (`/dashboard/presets.json`: the demo's
 * specs from jobs/presets.ts, and the smallest valid spec). A 400/422 answer's field errors are
 * shown beside the spec, each on the line of the field its `path` names (or of the nearest
 * enclosing field present, e.g. for a missing one).
 */
import { api, ApiError, request } from "./api.js";
import { h, replace } from "./dom.js";

/**
 * Pretty-prints `value` as JSON (2 spaces) and records the path of each line in the API's
 * error-path form (`rollout.group_size`, `eval.splits[0]`).
 * @param {unknown} value
 * @returns {{text: string, path: string}[]}
 */
export function jsonLines(value) {
  /** @type {{text: string, path: string}[]} */
  const lines = [];
  const join = (/** @type {string} */ path, /** @type {string | number} */ key) =>
    typeof key === "number" ? `${path}[${key}]` : path === "" ? key : `${path}.${key}`;
  const walk = (
    /** @type {unknown} */ v,
    /** @type {string} */ path,
    /** @type {string} */ indent,
    /** @type {string} */ head,
    /** @type {string} */ tail,
  ) => {
    if (Array.isArray(v) && v.length > 0) {
      lines.push({ text: `${indent}${head}[`, path });
      v.forEach((x, i) => walk(x, join(path, i), indent + "  ", "", i < v.length - 1 ? "," : ""));
      lines.push({ text: `${indent}]${tail}`, path });
    } else if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length > 0) {
      const entries = Object.entries(v);
      lines.push({ text: `${indent}${head}{`, path });
      entries.forEach(([k, x], i) =>
        walk(
          x,
          join(path, k),
          indent + "  ",
          `${JSON.stringify(k)}: `,
          i < entries.length - 1 ? "," : "",
        )
      );
      lines.push({ text: `${indent}}${tail}`, path });
    } else lines.push({ text: `${indent}${head}${JSON.stringify(v)}${tail}`, path });
  };
  walk(value, "", "", "", "");
  return lines;
}

/**
 * The line index for an error `path`: the first line of that path, else of its nearest parent.
 * @param {{path: string}[]} lines
 * @param {string} path
 */
export function lineOf(lines, path) {
  let p = path;
  for (;;) {
    const i = lines.findIndex((l) => l.path === p);
    if (i >= 0) return i;
    if (p === "") return 0;
    const cut = Math.max(p.lastIndexOf("."), p.lastIndexOf("["));
    p = cut < 0 ? "" : p.slice(0, cut);
  }
}

/**
 * A JSON spec editor that submits to `POST /v1/jobs` and opens the new job; a 400/422 shows the
 * API's message and each field error on the line of its field. `ids` prefixes the element ids
 * (`${ids}-editor`, `${ids}-message`, `${ids}-checked`); `submitId` is the button's.
 * @param {{ids: string, submitId: string, text: string, rows?: number}} options
 * @returns {{element: HTMLElement, editor: HTMLTextAreaElement, clear: () => void}}
 */
export function specEditor({ ids, submitId, text, rows = 30 }) {
  const editor = /** @type {HTMLTextAreaElement} */ (h("textarea", {
    id: `${ids}-editor`,
    spellcheck: "false",
    rows,
    cols: 70,
  }));
  editor.value = text;
  const message = h("div", { class: "error", role: "alert", id: `${ids}-message` });
  const checked = h("ol", { class: "checked-spec", id: `${ids}-checked` });

  const showErrors = (
    /** @type {unknown} */ spec,
    /** @type {{path: string, message: string}[]} */ errors,
  ) => {
    const lines = jsonLines(spec);
    /** @type {Map<number, {path: string, message: string}[]>} */
    const at = new Map();
    for (const e of errors) {
      const i = lineOf(lines, e.path);
      at.set(i, [...(at.get(i) ?? []), e]);
    }
    replace(
      checked,
      lines.map((l, i) =>
        h(
          "li",
          { dataset: { path: l.path }, class: at.has(i) ? "has-error" : "" },
          h("code", null, l.text),
          (at.get(i) ?? []).map((e) =>
            h(
              "span",
              { class: "field-error", dataset: { path: e.path } },
              `${e.path}: ${e.message}`,
            )
          ),
        )
      ),
    );
  };

  const clear = () => {
    replace(message);
    replace(checked);
  };

  const submit = async () => {
    clear();
    let spec;
    try {
      spec = JSON.parse(editor.value);
    } catch (error) {
      replace(message, `The spec must be JSON: ${error.message}`);
      return;
    }
    try {
      const job = await api("/v1/jobs", { method: "POST", json: spec });
      location.hash = `#/jobs/${job.id}`;
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      replace(message, error.message);
      const errors = error.problem.errors ?? [];
      if (errors.length > 0 && spec && typeof spec === "object") showErrors(spec, errors);
    }
  };

  const element = h(
    "div",
    null,
    message,
    h("div", { class: "editor" }, editor, h("div", { class: "checked" }, checked)),
    h("button", { type: "button", id: submitId, onclick: submit }, "Submit"),
  );
  return { element, editor, clear };
}

/** @param {HTMLElement} root */
export async function submitView(root) {
  const presets = await (await request("/dashboard/presets.json")).json();
  const names = Object.keys(presets);
  const form = specEditor({
    ids: "spec",
    submitId: "submit-job",
    text: JSON.stringify(presets[names[0]], null, 2),
  });
  const preset = h(
    "select",
    {
      id: "preset",
      onchange: () => {
        form.editor.value = JSON.stringify(presets[preset.value], null, 2);
        form.clear();
      },
    },
    names.map((n) => h("option", { value: n }, n)),
  );
  replace(
    root,
    h("div", { class: "toolbar" }, h("h1", null, "New job"), h("label", null, "Preset ", preset)),
    h(
      "p",
      { class: "muted" },
      "Edit the JobSpec (see jobs/SPEC.md); fields left out take their defaults.",
    ),
    form.element,
  );
}

/**
 * DOM building without HTML: `h(tag, props, ...children)` makes an element; string and number
 * children become text nodes (`document.createTextNode`), so model-written text (skills,
 * responses, observations) is always shown as characters, never parsed as markup. Nothing in
 * the dashboard assigns `innerHTML`.
 */

/**
 * An element. `props`: `class`, `text` (textContent), `on<event>` (a function), `style` (an
 * object of CSSOM properties), `dataset` (an object), anything else an attribute (strings only;
 * attributes named `on…` or `style` as strings are refused: no inline code or inline CSS).
 * @param {string} tag
 * @param {Record<string, unknown> | null} [props]
 * @param {...unknown} children nodes, strings, numbers, arrays of them; null/undefined/false
 *   skipped
 * @returns {HTMLElement}
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = String(v);
    else if (k === "text") el.textContent = String(v);
    else if (k === "style") Object.assign(el.style, v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on")) {
      if (typeof v !== "function") throw new TypeError(`Cannot set ${k} as it must be a function`);
      el.addEventListener(k.slice(2), /** @type {EventListener} */ (v));
    } else if (k === "value" || k === "checked" || k === "disabled" || k === "selected") {
      /** @type {any} */ (el)[k] = v;
    } else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

/**
 * Appends children as {@link h} does (text for strings and numbers).
 * @param {Node} el
 * @param {unknown[]} children
 */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/**
 * Replaces the children of `el`.
 * @param {Node & ParentNode} el
 * @param {...unknown} children
 */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

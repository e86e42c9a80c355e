/**
 * The dashboard's router: one view per `location.hash` (`#/jobs`, `#/jobs/new`, `#/jobs/{id}`,
 * `#/jobs/{id}/skills`, `#/jobs/{id}/trajectories?step=N&trajectory=ID`, `#/compare?jobs=A,B`,
 * `#/signin?next=…`). Each view gets an AbortSignal that stops its live streams when the user
 * navigates away. A page asked for without a key goes to sign-in with its location as `next`.
 */
import { apiKey, signInHash, signOut } from "./api.js";
import { compareView } from "./compare.js";
import { h, replace } from "./dom.js";
import { jobView } from "./job.js";
import { jobsView } from "./jobs.js";
import { signInView } from "./signin.js";
import { skillsView } from "./skills.js";
import { submitView } from "./submit.js";
import { trajectoriesView } from "./trajectories.js";

const ID = "([0-9a-f-]{36})";
/** @type {[RegExp, (root: HTMLElement, ctx: any) => unknown][]} */
const ROUTES = [
  [/^#\/signin$/, signInView],
  [/^#\/compare$/, compareView],
  [/^#\/jobs\/new$/, submitView],
  [new RegExp(`^#/jobs/${ID}/skills$`), skillsView],
  [new RegExp(`^#/jobs/${ID}/trajectories$`), trajectoriesView],
  [new RegExp(`^#/jobs/${ID}$`), jobView],
  [/^(#\/?(jobs)?)?$/, jobsView],
];

/** @type {AbortController | undefined} */
let current;

function nav() {
  const el = document.getElementById("nav");
  if (!apiKey()) return replace(el);
  replace(
    el,
    h("a", { href: "#/jobs" }, "Jobs"),
    h("a", { href: "#/jobs/new" }, "New job"),
    h("button", {
      type: "button",
      id: "sign-out",
      class: "link",
      onclick: () => {
        signOut();
        location.hash = "#/signin";
      },
    }, "Sign out"),
  );
}

function route() {
  current?.abort();
  current = new AbortController();
  const [path, query] = location.hash.split("?");
  const params = new URLSearchParams(query ?? "");
  const root = document.getElementById("view");
  nav();
  if (!apiKey() && path !== "#/signin") {
    location.hash = signInHash();
    return;
  }
  for (const [pattern, view] of ROUTES) {
    const m = path.match(pattern);
    if (!m) continue;
    replace(root);
    Promise.resolve(view(root, { params, signal: current.signal, id: m[1] })).catch((error) => {
      if (current.signal.aborted) return;
      root.appendChild(h("p", { class: "error", role: "alert" }, String(error.message ?? error)));
    });
    return;
  }
  replace(root, h("p", { class: "error" }, "No such page."), h("a", { href: "#/jobs" }, "Jobs"));
}

addEventListener("hashchange", route);
route();

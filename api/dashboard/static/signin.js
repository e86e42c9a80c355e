/**
 * Sign-in: an API key (`seed_…`) checked against the API, then kept in sessionStorage; then back
 * to the page asked for (`#/signin?next=#/jobs/…`, see {@link safeNext}).
 */
import { api, ApiError, safeNext, signIn, signOut } from "./api.js";
import { h, replace } from "./dom.js";

/**
 * @param {HTMLElement} root
 * @param {{params: URLSearchParams}} ctx
 */
export function signInView(root, { params }) {
  const next = safeNext(params.get("next"));
  const input = h("input", {
    type: "password",
    id: "api-key",
    name: "api-key",
    autocomplete: "off",
    placeholder: "seed_…",
    required: true,
    size: 50,
  });
  const message = h("p", { class: "error", role: "alert" });
  const form = h(
    "form",
    {
      class: "card signin",
      onsubmit: async (/** @type {Event} */ e) => {
        e.preventDefault();
        replace(message);
        signIn(input.value.trim());
        try {
          await api("/v1/jobs?limit=1");
          input.value = "";
          location.hash = next;
        } catch (error) {
          signOut();
          replace(
            message,
            error instanceof ApiError ? error.message : `Cannot reach the API: ${error}`,
          );
        }
      },
    },
    h("h1", null, "Sign in"),
    h(
      "p",
      { class: "muted" },
      "Paste an API key (deno task keys create --tenant NAME). It is kept in this tab's session storage only.",
    ),
    h("label", { for: "api-key" }, "API key"),
    input,
    h("button", { type: "submit", id: "sign-in" }, "Sign in"),
    message,
  );
  replace(root, form);
  input.focus();
}

import assert from "node:assert/strict";
import { IMAGE_PLACEHOLDER } from "../../../workers/model/mod.ts";
import { withoutImagePlaceholders } from "../../../workers/seed/text_policy.ts";

Deno.test("generated text loses every image placeholder, including ones that removal would form", () => {
  assert.equal(IMAGE_PLACEHOLDER, "<image>");
  // One replaceAll pass left "<image>" here, an image slot for any later prompt quoting it.
  assert.equal(withoutImagePlaceholders("search[<im<image>age>]"), "search[]");
  assert.equal(withoutImagePlaceholders("<<im<image>age>im<image>age>x"), "x");
  assert.equal(withoutImagePlaceholders("<action>up</action> <image>"), "<action>up</action> ");
  assert.equal(withoutImagePlaceholders("<imag e> stays"), "<imag e> stays");
});

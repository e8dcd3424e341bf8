// The package brings the gateway's own elements, byte for byte.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { expect, test } from "vitest";

const web = resolve(import.meta.dirname, "../../../internal/web");
const copies = resolve(import.meta.dirname, "../dist/elements");

test.each(["client.js", "card.js", "form.js", "marked.js", "marked.LICENSE"])("dist/elements/%s is internal/web's", (f) => {
  expect(readFileSync(resolve(copies, f)).equals(readFileSync(resolve(web, f)))).toBe(true);
});

test("importing the package defines both elements", async () => {
  expect(customElements.get("toolgate-client")).toBeUndefined();
  await import("../dist/index.js");
  expect(customElements.get("toolgate-client")).toBeTypeOf("function");
  expect(customElements.get("toolgate-card")).toBeTypeOf("function");
});

// Copies the gateway's browser elements into dist/elements/, byte for byte:
// the package brings <toolgate-client> and <toolgate-card> itself, and they
// must be the very files the gateway serves at /client.js, /card.js and
// /form.js and /marked.js (test/elements.test.ts checks it). They are plain ES modules
// without a build step, so they are copied, not compiled.
import { copyFileSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";

const web = resolve(import.meta.dirname, "../../../internal/web");
const out = resolve(import.meta.dirname, "../dist/elements");
mkdirSync(out, { recursive: true });
for (const f of ["client.js", "card.js", "form.js", "marked.js", "marked.LICENSE"]) {
  copyFileSync(join(web, f), join(out, f));
}

// importMap lets a test page import an npm package's ES modules as they are
// installed here, without a bundler: it follows the module's imports from
// the entry file and maps every bare specifier met to its file, resolved
// with the package's "browser", "import" and "default" export conditions.
// The page's server serves node_modules/ under /node_modules/.
import { readFileSync, existsSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

export const nodeModules = resolve(import.meta.dirname, "node_modules");

/** pick is an export target under the browser's conditions. */
function pick(target) {
  if (typeof target === "string") return target;
  if (!target || typeof target !== "object") return null;
  for (const c of ["browser", "import", "default"]) {
    if (c in target) {
      const t = pick(target[c]);
      if (t) return t;
    }
  }
  return null;
}

/** resolveBare is the file a bare specifier names, e.g. "zod/v4". */
function resolveBare(spec) {
  const parts = spec.split("/");
  const n = spec.startsWith("@") ? 2 : 1;
  const dir = join(nodeModules, ...parts.slice(0, n));
  const sub = parts.length > n ? `./${parts.slice(n).join("/")}` : ".";
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  let target;
  if (pkg.exports) {
    const exp = typeof pkg.exports === "string" || !Object.keys(pkg.exports).some((k) => k.startsWith("."))
      ? { ".": pkg.exports }
      : pkg.exports;
    target = pick(exp[sub]);
  } else {
    target = sub === "." ? (pkg.module ?? pkg.main ?? "index.js") : sub;
  }
  if (!target) throw new Error(`importMap: ${spec} has no browser export`);
  return join(dir, target);
}

const importRe = /(?:\bimport|\bexport)\s*(?:[\w*${}\s,]+?\bfrom\s*)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/g;

/** importMap is the page's {imports} for the entry specifiers. */
export function importMap(...entries) {
  const imports = {};
  const seen = new Set();
  const url = (file) => "/node_modules/" + relative(nodeModules, file).split(sep).join("/");
  const crawl = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const m of readFileSync(file, "utf8").matchAll(importRe)) {
      const spec = m[1] ?? m[2];
      let f;
      if (spec.startsWith(".")) {
        f = resolve(dirname(file), spec);
      } else {
        f = resolveBare(spec);
        imports[spec] = url(f);
      }
      if (existsSync(f)) crawl(f);
    }
  };
  for (const e of entries) {
    const f = resolveBare(e);
    imports[e] = url(f);
    crawl(f);
  }
  return { imports };
}

/** moduleFile is the file under node_modules a /node_modules/ path names, or null. */
export function moduleFile(pathname) {
  const f = resolve(nodeModules, "." + decodeURIComponent(pathname.slice("/node_modules".length)));
  return f.startsWith(nodeModules + sep) && existsSync(f) ? f : null;
}

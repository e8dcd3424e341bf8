// The npm tarballs `make packages` writes (dist/npm/), installed the way an
// app installs them: in a scratch folder outside the checkout (os.tmpdir()),
// a fresh Vite + React app whose package.json names only react, react-dom,
// zod, typescript and vite, plus the two tarballs by path. Then:
// toolgate-tools compiles a tools.ts with nothing else installed, and a page
// built by `vite build` (no dedupe, no alias) with @toolgate/react renders
// in headless Chromium with one React and no console error.
//
// Run by `make install-test` (after `make packages`); it needs the npm
// registry, Debian's chromium, and playwright-core from examples/browser.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join, relative, resolve, sep } from "node:path";
import { promisify } from "node:util";

import { launchChromium } from "../browser/chromium.mjs";

const root = resolve(import.meta.dirname, "../..");
const tarballs = {
  kit: join(root, "dist/npm/toolgate-kit-0.1.0.tgz"),
  react: join(root, "dist/npm/toolgate-react-0.1.0.tgz"),
};

// The app's own dependencies: the versions the workspace uses, so the npm
// cache usually has them.
const APP = {
  name: "toolgate-install-check",
  private: true,
  type: "module",
  dependencies: { react: "19.3.1", "react-dom": "19.3.1", zod: "4.6.7" },
  devDependencies: { typescript: "7.0.2", vite: "8.4.0" },
};

let app; // the scratch folder

// run runs a command in the scratch app with npm's own variables removed
// (a `npm test` around this file would otherwise leak its prefix and
// workspace into the app's npm), and fails with all it printed.
async function run(cmd, args, { cwd = app, timeout = 180_000 } = {}) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  try {
    return await promisify(execFile)(cmd, args, { cwd, env, timeout, maxBuffer: 64 << 20 });
  } catch (err) {
    throw new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed: ${err.message}\n${err.stdout ?? ""}\n${err.stderr ?? ""}`);
  }
}

function tarList(tgz) {
  return run("tar", ["-tzf", tgz], { cwd: root }).then(({ stdout }) => stdout.split("\n").filter(Boolean));
}

async function tarPackageJSON(tgz) {
  const { stdout } = await run("tar", ["-xzOf", tgz, "package/package.json"], { cwd: root });
  return JSON.parse(stdout);
}

before(async () => {
  for (const f of Object.values(tarballs)) {
    assert.ok(existsSync(f), `${f} is missing: run make packages`);
  }
  app = realpathSync(mkdtempSync(join(tmpdir(), "toolgate-install-")));
  const rel = relative(root, app);
  assert.ok(rel.startsWith(".." + sep), `the scratch folder ${app} is inside the checkout ${root}`);
  writeFileSync(join(app, "package.json"), JSON.stringify(APP, null, 2) + "\n");
  for (const f of Object.values(tarballs)) copyFileSync(f, join(app, f.split(sep).pop()));
});

after(() => {
  if (app && !process.env.KEEP_SCRATCH) rmSync(app, { recursive: true, force: true });
});

// The tests below run in order, in the app this one installs.
test("npm install of the two tarballs in a fresh app outside the checkout", async () => {
  await run("npm", ["install", "--no-audit", "--no-fund", "./toolgate-kit-0.1.0.tgz", "./toolgate-react-0.1.0.tgz"]);
  const pkg = JSON.parse(readFileSync(join(app, "package.json"), "utf8"));
  assert.deepEqual(Object.keys(pkg.dependencies).sort(), ["@toolgate/kit", "@toolgate/react", "react", "react-dom", "zod"]);
});

test("the tarballs hold what the packages need, built by their prepare scripts", async () => {
  const kit = await tarList(tarballs.kit);
  const react = await tarList(tarballs.react);
  for (const f of [
    "package/package.json", "package/bin/toolgate-tools.mjs", "package/compiler/compile.mjs",
    "package/dist/index.js", "package/dist/index.d.ts", "package/dist/tools.js", "package/dist/tools.d.ts",
  ]) assert.ok(kit.includes(f), `@toolgate/kit's tarball lacks ${f}:\n${kit.join("\n")}`);
  for (const f of [
    "package/package.json", "package/dist/index.js", "package/dist/index.d.ts",
    "package/dist/elements/client.js", "package/dist/elements/card.js", "package/dist/elements/marked.js",
    "package/dist/elements/marked.LICENSE",
  ]) assert.ok(react.includes(f), `@toolgate/react's tarball lacks ${f}:\n${react.join("\n")}`);
  for (const [name, files] of [["kit", kit], ["react", react]]) {
    const stray = files.filter((f) => /(^|\/)(node_modules|src|test)\//.test(f));
    assert.deepEqual(stray, [], `@toolgate/${name}'s tarball holds files an app does not need`);
  }

  const kitPkg = await tarPackageJSON(tarballs.kit);
  const reactPkg = await tarPackageJSON(tarballs.react);
  // dist/ is not in git: `make packages` removes it and npm pack's prepare
  // script builds it again, so the lists above prove the build ran.
  assert.ok(kitPkg.scripts?.prepare, "@toolgate/kit has no prepare script to build dist/");
  assert.ok(reactPkg.scripts?.prepare, "@toolgate/react has no prepare script to build dist/");
  assert.ok(kit.includes("package/" + kitPkg.bin["toolgate-tools"].replace(/^\.\//, "")), "the bin is not in the tarball");
  assert.ok(kitPkg.dependencies?.esbuild, "esbuild is not a dependency of @toolgate/kit (toolgate-tools needs it)");
  assert.equal(kitPkg.peerDependencies?.esbuild, undefined, "esbuild is still a peer of @toolgate/kit");
  // One React per page: the bindings use the app's.
  assert.ok(reactPkg.peerDependencies?.react, "@toolgate/react does not take react as a peer");
  for (const dep of ["react", "react-dom"]) {
    assert.equal(reactPkg.dependencies?.[dep], undefined, `@toolgate/react depends on ${dep}: the app would get two`);
  }
  assert.ok(!existsSync(join(app, "node_modules/@toolgate/react/node_modules")), "@toolgate/react was installed with a node_modules of its own");
});

const TOOLS_TS = `import { z } from 'zod';
import type { KazzleTool } from '@toolgate/kit/tools';

export const tools = [
  {
    name: 'greet',
    displayName: 'Greet',
    description: 'Greets someone by name.',
    input: z.object({ name: z.string().min(1).describe('Who to greet.') }).strict(),
    target: { type: 'app', component: 'hello', method: 'POST', path: '/greet', body: '\${input}' },
  },
] as const satisfies readonly KazzleTool[];
`;

test("npx toolgate-tools build compiles a tools.ts with only the tarballs installed", async () => {
  writeFileSync(join(app, "tools.ts"), TOOLS_TS);
  await run("npx", ["toolgate-tools", "build", "tools.ts", "-o", "tools.json"]);
  const manifest = JSON.parse(readFileSync(join(app, "tools.json"), "utf8"));
  assert.deepEqual(manifest, {
    tools: [{
      name: "greet",
      displayName: "Greet",
      description: "Greets someone by name.",
      input_schema: {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: { name: { type: "string", minLength: 1, description: "Who to greet." } },
        required: ["name"],
        additionalProperties: false,
      },
      target: { type: "app", component: "hello", method: "POST", path: "/greet", body: "${input}" },
    }],
  });
  // --check agrees with what it wrote.
  await run("npx", ["toolgate-tools", "build", "tools.ts", "-o", "tools.json", "--check"]);
  // The kit's types, from its tarball, type-check the file.
  writeFileSync(join(app, "tsconfig.json"), JSON.stringify({
    compilerOptions: { target: "ES2023", module: "nodenext", moduleResolution: "nodenext", strict: true, noEmit: true, types: [] },
    files: ["tools.ts"],
  }, null, 2));
  await run("npx", ["tsc", "-p", "."]);
});

const INDEX_HTML = `<!doctype html>
<html lang="en">
  <head><meta charset="utf-8"><link rel="icon" href="data:,"><title>toolgate install check</title></head>
  <body>
    <div id="root"></div>
    <script type="module" src="/main.tsx"></script>
  </body>
</html>
`;

const MAIN_TSX = `import { StrictMode, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { ToolgateClient, useToolgateReadable, useToolgateTool } from '@toolgate/react';

function Lesson() {
  const [step, setStep] = useState(1);
  useToolgateTool('next_step', () => {
    setStep((s) => s + 1);
    return { content: 'next' };
  });
  useToolgateReadable('lesson_step', step);
  return <p id="status">Lesson ready at step {step}</p>;
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <ToolgateClient options={null}>
      <Lesson />
    </ToolgateClient>
  </StrictMode>,
);
`;

// JSX with Vite's own transform (Oxc), no React plugin; no resolve.dedupe,
// no alias: one React must come from the install itself. The source map
// lists every module in the bundle.
const VITE_CONFIG = `import { defineConfig } from 'vite';

export default defineConfig({
  base: './',
  oxc: { jsx: { runtime: 'automatic' } },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
});
`;

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".map": "application/json", ".css": "text/css" };

// serve serves dir on a loopback port.
function serve(dir) {
  const server = createServer((req, res) => {
    let p = decodeURIComponent(new URL(req.url, "http://x").pathname);
    if (p.endsWith("/")) p += "index.html";
    const file = resolve(dir, "." + p);
    if (!file.startsWith(dir + sep) || !existsSync(file)) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "Content-Type": TYPES[extname(file)] ?? "application/octet-stream" });
    res.end(readFileSync(file));
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

test("a Vite page with @toolgate/react has one React and renders in Chromium", async (t) => {
  writeFileSync(join(app, "index.html"), INDEX_HTML);
  writeFileSync(join(app, "main.tsx"), MAIN_TSX);
  writeFileSync(join(app, "vite.config.js"), VITE_CONFIG);

  // One react in the install: every path npm lists is the app's own.
  const { stdout } = await run("npm", ["ls", "react", "--all", "--parseable"]);
  const copies = [...new Set(stdout.split("\n").filter(Boolean).filter((p) => p.endsWith(join(sep, "node_modules", "react"))))];
  assert.deepEqual(copies, [join(app, "node_modules", "react")], `npm ls react --all:\n${stdout}`);

  await run("npx", ["vite", "build"]);
  const dist = join(app, "dist");
  const assets = readdirSync(join(dist, "assets"));
  const maps = assets.filter((f) => f.endsWith(".js.map"));
  assert.ok(maps.length > 0, `vite build wrote no source map: ${assets}`);
  // Every React module in the bundle comes from one folder.
  const reactDirs = new Set();
  for (const m of maps) {
    for (const s of JSON.parse(readFileSync(join(dist, "assets", m), "utf8")).sources) {
      const at = s.lastIndexOf("node_modules/react/");
      if (at >= 0) reactDirs.add(s.slice(0, at + "node_modules/react/".length));
    }
  }
  assert.equal(reactDirs.size, 1, `the bundle holds React from ${reactDirs.size} folders: ${[...reactDirs].join(", ")}`);

  const server = await serve(dist);
  t.after(() => server.close());
  const browser = await launchChromium();
  t.after(() => browser.close());
  const page = await browser.newPage();
  const problems = [];
  page.on("console", (msg) => {
    if (msg.type() === "error" || msg.type() === "warning") problems.push(`console.${msg.type()}: ${msg.text()}`);
  });
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("requestfailed", (req) => problems.push(`request failed: ${req.url()}`));
  page.on("response", (res) => {
    if (res.status() >= 400) problems.push(`${res.status()}: ${res.url()}`);
  });
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.waitForSelector("#status", { timeout: 10_000 }).catch((err) => {
    throw new Error(`the page did not render: ${err.message}\n${problems.join("\n")}`);
  });
  assert.equal(await page.textContent("#status"), "Lesson ready at step 1");
  // The hooks reached the element: its page context has the readable.
  const context = await page.evaluate(() => {
    const el = document.querySelector("toolgate-client");
    return customElements.get("toolgate-client") && el ? el.pageContext() : null;
  });
  assert.deepEqual(context, [{ name: "lesson_step", value: 1 }]);
  assert.deepEqual(problems, [], "the page logged errors (two Reacts give \"Invalid hook call\")");
});

// toolgate-tools openapi: the tools.ts it writes from an OpenAPI document
// compiles back (toolgate-tools build) to the manifest `toolgate openapi
// --json` prints for the same document: the same names, targets and input
// schemas, up to what docs/openapi.md ("From TypeScript") says differs.
//
// Needs go: it builds ./cmd/toolgate. Skipped without it, unless CI=1.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { tmpdir } from "node:os";
import { promisify } from "node:util";

const run = promisify(execFile);
const kit = resolve(import.meta.dirname, "..");
const root = resolve(kit, "../..");
const bin = join(kit, "bin", "toolgate-tools.mjs");

let toolgate; // the built binary, or undefined when it could not be built
let skip = false;
let outside; // a folder for the binary
let inside; // a folder beside the kit, where the written tools.ts resolve zod

before(async () => {
  outside = await mkdtemp(join(tmpdir(), "toolgate-openapi-"));
  inside = await mkdtemp(join(kit, "test", ".openapi-"));
  try {
    await run("go", ["build", "-o", join(outside, "toolgate"), "./cmd/toolgate"], { cwd: root, maxBuffer: 16 << 20 });
    toolgate = join(outside, "toolgate");
  } catch (err) {
    if (process.env.CI === "1") throw new Error(`cannot build ./cmd/toolgate: ${err.stderr || err.message}`);
    skip = `cannot build ./cmd/toolgate (go is needed): ${String(err.stderr || err.message).split("\n")[0]}`;
  }
});

after(async () => {
  await rm(outside, { recursive: true, force: true });
  await rm(inside, { recursive: true, force: true });
});

async function tools(args) {
  return run(process.execPath, [bin, "openapi", ...args, "--toolgate", toolgate], { cwd: kit });
}

// normalize is what compares: keys in order, no $schema, and without the
// bounds Zod's z.int() writes (|n| ≤ 2^53−1, the integers a double holds:
// the one narrowing docs/openapi.md names).
function normalize(s, compiled) {
  if (Array.isArray(s)) return s.map((v) => normalize(v, compiled));
  if (s === null || typeof s !== "object") return s;
  const out = {};
  for (const k of Object.keys(s).sort()) {
    if (k === "$schema") continue;
    if (compiled && s.type === "integer" && ((k === "minimum" && s[k] === -Number.MAX_SAFE_INTEGER) || (k === "maximum" && s[k] === Number.MAX_SAFE_INTEGER))) continue;
    out[k] = normalize(s[k], compiled);
  }
  return out;
}

const documents = [
  ["petstore, app targets", "internal/openapi/testdata/petstore.yaml", ["--component", "api", "--prefix", "pets_"]],
  ["3.1 with $defs, recursion and grouped parameters, url targets", "internal/openapi/testdata/v31/api.yaml", ["--server", "https://api.example.com/v1"]],
];

for (const [what, doc, flags] of documents) {
  test(`openapi → tools.ts → build gives toolgate's manifest: ${what}`, async (t) => {
    if (skip) return t.skip(skip);
    const file = join(root, doc);
    const { stdout } = await run(toolgate, ["openapi", ...flags, "--json", file]);
    const want = JSON.parse(stdout);
    assert.ok(want.tools.length > 0, "the document makes tools");

    const ts = join(inside, `${doc.replaceAll("/", "_")}.ts`);
    await tools([file, ...flags, "-o", ts]);
    const source = await readFile(ts, "utf8");
    assert.match(source, /^import \{ z \} from 'zod';$/m);
    assert.match(source, /\] as const satisfies readonly KazzleTool\[\];\n$/);
    assert.doesNotMatch(source, /kept as JSON Schema|z\.any\(\)/, "nothing is left to JSON Schema");

    const built = await run(process.execPath, [bin, "build", ts], { cwd: kit });
    const got = JSON.parse(built.stdout);
    assert.deepEqual(got.tools.map((x) => x.name), want.tools.map((x) => x.name));
    for (const [i, w] of want.tools.entries()) {
      const g = got.tools[i];
      assert.deepEqual(g.target, w.target, `${w.name}: target`);
      assert.deepEqual(g.annotations, w.annotations, `${w.name}: annotations`);
      assert.equal(g.description, w.description, `${w.name}: description`);
      assert.equal(g.displayName, w.displayName, `${w.name}: displayName`);
      assert.deepEqual(normalize(g.input_schema, true), normalize(w.input_schema, false), `${w.name}: input_schema`);
    }

    // It type-checks as written (the recursive schemas are typed by hand),
    // its targets' operation too.
    const tsc = join(resolve(import.meta.dirname, "..", "..", "..", "node_modules", "typescript", "bin", "tsc"));
    const checked = await run(process.execPath, [tsc, "--ignoreConfig", "--noEmit", "--strict", "--target", "es2022", "--module", "nodenext",
      "--moduleResolution", "nodenext", "--types", "node", ts], { cwd: kit }).catch((err) => err);
    assert.equal(`${checked.stdout}${checked.stderr}`, "", "tsc");
  });
}

test("openapi: a schema Zod cannot say is an error naming the tool and the path, or with --loose kept as JSON Schema", async (t) => {
  if (skip) return t.skip(skip);
  const file = join(kit, "test", "fixtures", "openapi", "unsupported.yaml");
  await assert.rejects(tools([file, "--component", "api"]), (err) => {
    assert.equal(err.code, 1);
    assert.match(err.stderr, /tool "tagged": input_schema\/properties\/tags: uniqueItems/);
    assert.doesNotMatch(err.stderr, /listTags/);
    return true;
  });

  const ts = join(inside, "loose.ts");
  await tools([file, "--component", "api", "--loose", "-o", ts]);
  assert.match(await readFile(ts, "utf8"), /\/\* kept as JSON Schema: uniqueItems/);
  const got = JSON.parse((await run(process.execPath, [bin, "build", ts], { cwd: kit })).stdout);
  const tagged = got.tools.find((x) => x.name === "tagged");
  assert.deepEqual(tagged.input_schema.properties.tags, { items: { type: "string" }, type: "array", uniqueItems: true });
  assert.equal(tagged.input_schema.required, undefined, "tags stays optional");
});

test("openapi: without the toolgate binary, the error says what to install", async (t) => {
  const { stderr } = await run(process.execPath, [bin, "openapi", "api.yaml", "--component", "api", "--toolgate", join(kit, "no-such-toolgate")], { cwd: kit }).catch((err) => err);
  assert.match(stderr, /no-such-toolgate: not found: .*toolgate openapi.*--toolgate PATH/);
});

test("openapi: one of --component and --server", async () => {
  for (const flags of [[], ["--component", "a", "--server", "https://x.example"]]) {
    const err = await run(process.execPath, [bin, "openapi", "api.yaml", ...flags], { cwd: kit }).catch((e) => e);
    assert.equal(err.code, 2);
    assert.match(err.stderr, /give one of --component NAME/);
  }
});

// toolgate-tools openapi: the tools.ts it writes from an OpenAPI document
// compiles back (toolgate-tools build) to the manifest `toolgate openapi
// --json` prints for the same document: the same names, targets and input
// schemas, up to what docs/openapi.md ("From TypeScript") says differs.
//
// And semantically: a gateway serving both (the document with `openapi`,
// the compiled tools.ts with `manifest`) takes and refuses the same inputs.
//
// Needs go: it builds ./cmd/toolgate. Skipped without it, unless CI=1.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer } from "node:http";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { startToolgate } from "../../../examples/stack.mjs";

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

// Inputs for the gateway to judge twice, by the document's tool and by the
// tools.ts one. A case with `known` is the documented difference, asserted
// as it is.
const BIG = "1152921504606846976"; // 2^60: an integer, but not a safe one
const judged = [
  ["listPets", "no limit", "{}"],
  ["listPets", "a limit", `{"limit":5}`],
  ["listPets", "a limit over the maximum", `{"limit":101}`],
  ["listPets", "a fraction", `{"limit":1.5}`],
  ["listPets", "a string for an integer", `{"limit":"5"}`],
  ["listPets", "an extra key", `{"limit":5,"x":1}`],
  ["listPets", "a negative integer past 2^53", `{"limit":-${BIG}}`, { ts: "invalid", go: "valid" }],
  ["createPets", "a pet", `{"body":{"id":1,"name":"a"}}`],
  ["createPets", "a null tag", `{"body":{"id":1,"name":"a","tag":null}}`],
  ["createPets", "no name", `{"body":{"id":1}}`],
  ["createPets", "no body", "{}"],
  ["createPets", "an extra key in the open body", `{"body":{"id":1,"name":"a","x":[]}}`],
  ["createPets", "a string id", `{"body":{"id":"1","name":"a"}}`],
  ["showPetById", "an id", `{"petId":"1"}`],
  ["showPetById", "no id", "{}"],
  ["showPetById", "a number id", `{"petId":1}`],
  ["v31_form", "nothing", "{}"],
  ["v31_form", "a form", `{"body":{"a":"x"}}`],
  ["v31_form", "a number in the form", `{"body":{"a":1}}`],
  ["v31_put_item", "an item with a tree", `{"body":{"name":null,"tree":{"name":"r","children":[{"name":"c","children":[]}]}},"cookie":{"session":"s"},"path":{"id":"abc"},"query":{"tags":["red"],"id":3,"filter":{"min":1}}}`],
  ["v31_put_item", "a bad name deep in the tree", `{"body":{"name":"n","tree":{"children":[{"children":[{"name":1}]}]}},"cookie":{"session":"s"},"path":{"id":"abc"}}`],
  ["v31_put_item", "an id over maxLength", `{"body":{"name":"n"},"cookie":{"session":"s"},"path":{"id":"123456789"}}`],
  ["v31_put_item", "a tag not in the enum", `{"body":{"name":"n"},"cookie":{"session":"s"},"path":{"id":"a"},"query":{"tags":["pink"]}}`],
  ["v31_put_item", "no cookie", `{"body":{"name":"n"},"path":{"id":"a"}}`],
  ["v31_put_item", "an extra key in a strict group", `{"body":{"name":"n"},"cookie":{"session":"s"},"path":{"id":"a","x":1}}`],
  ["v31_search", "a query", `{"q":"a","colors":["x","y"]}`],
  ["v31_search", "no q", `{"colors":[]}`],
  ["v31_search", "a number q", `{"q":1}`],
];

test("a gateway takes the same inputs from the document's tools and from the tools.ts ones", async (t) => {
  if (skip) return t.skip(skip);
  const ISSUER = "https://openapi.test";
  const petstore = join(root, "internal/openapi/testdata/petstore.yaml");
  const v31 = join(root, "internal/openapi/testdata/v31/api.yaml");
  // The tools.ts tools, compiled and put in one manifest, named ts_….
  const all = [];
  for (const [doc, prefix] of [[petstore, "ts_"], [v31, "ts_v31_"]]) {
    const ts = join(inside, `judged-${prefix}.ts`);
    await tools([doc, "--component", "api", "--prefix", prefix, "-o", ts]);
    all.push(...JSON.parse((await run(process.execPath, [bin, "build", ts], { cwd: kit })).stdout).tools);
  }
  const manifest = join(inside, "judged.json");
  await writeFile(manifest, JSON.stringify({ tools: all }));

  const upstream = await new Promise((ok) => {
    const srv = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        res.end('{"content":"ok"}');
      });
    });
    srv.listen(0, "127.0.0.1", () => ok(srv));
  });
  const { gate, stop } = await startToolgate({
    name: "openapi",
    block: () => `			component api http://127.0.0.1:${upstream.address().port}
			openapi ${petstore} {
				component api
			}
			openapi ${v31} {
				component api
				prefix v31_
			}
			manifest ${manifest}
			identity {
				issuer ${ISSUER}
			}
			ledger off`,
  });
  try {
    const verdict = async (tool, input) => {
      const res = await fetch(`${gate}/tools/${tool}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"input":${input},"identity":{"user":"u","install":"i"}}`,
      });
      const a = JSON.parse(await res.text());
      assert.equal(res.status, 200, `POST /tools/${tool} ${input}: ${JSON.stringify(a)}`);
      if (a.status === "done" && !a.isError && a.content === "ok") return "valid";
      if (a.status === "done" && a.isError && a.content.startsWith("invalid input:")) return "invalid";
      assert.fail(`${tool} ${input}: neither a call nor an input refusal: ${JSON.stringify(a)}`);
    };
    const rows = [];
    const seen = new Set();
    const verdicts = new Set();
    for (const [tool, what, input, known] of judged) {
      seen.add(tool);
      const go = await verdict(tool, input);
      const ts = await verdict(`ts_${tool}`, input);
      verdicts.add(go);
      const want = known ?? { go, ts: go };
      if (go !== want.go || ts !== want.ts) rows.push({ tool, case: what, go, ts, expected: known ? `go ${known.go}, ts ${known.ts}` : "the same" });
    }
    if (rows.length) console.table(rows);
    assert.equal(rows.length, 0, `${rows.length} of ${judged.length} cases disagree (table above)`);
    assert.equal(seen.size, all.length, "every tool is judged");
    assert.deepEqual([...verdicts].sort(), ["invalid", "valid"], "the cases probe both verdicts");
  } finally {
    stop();
    upstream.close();
  }
});

// Every keyword the generator writes as Zod, in a manifest written by hand:
// compiled back, each schema is the one it was made from.
test("toolsSource: the keywords it writes as Zod compile back to themselves", async () => {
  const { toolsSource } = await import("../compiler/openapi.mjs");
  const input = {
    $defs: {
      A: { type: "object", properties: { b: { $ref: "#/$defs/B" } } },
      B: { type: "object", properties: { a: { $ref: "#/$defs/A" }, n: { type: "number" } }, required: ["n"], additionalProperties: false },
    },
    type: "object",
    additionalProperties: false,
    required: ["s", "req_default"],
    properties: {
      s: { type: "string", minLength: 1, maxLength: 9, pattern: "^a/b+$", format: "hostname", description: "it's \"quoted\"" },
      n: { type: "number", minimum: 0, maximum: 10, multipleOf: 0.5 },
      nx: { type: "number", exclusiveMinimum: -1, exclusiveMaximum: 11 },
      re2: { type: "string", pattern: "(?P<x>a)" },
      i: { type: "integer", minimum: -3, maximum: 3, default: 1, title: "I" },
      b: { type: ["boolean", "null"] },
      multi: { type: ["string", "integer"] },
      c: { const: "x" },
      cnull: { const: null },
      e: { enum: ["a", "b"], type: "string" },
      emixed: { enum: ["a", 1, null] },
      any: {},
      arr: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 3 },
      bare: { type: "array" },
      rec: { type: "object", additionalProperties: { type: "integer", minimum: 0 } },
      loose: { type: "object", properties: { x: { type: "string" } }, additionalProperties: {} },
      catchall: { type: "object", properties: { x: { type: "string" } }, additionalProperties: { type: "boolean" } },
      any_of: { anyOf: [{ type: "string" }, { type: "object", properties: { z: { type: "null" } } }] },
      one_of: { oneOf: [{ type: "string", maxLength: 2 }, { type: "string", minLength: 1 }] },
      req_default: { type: "string", default: "d" },
      cyc: { $ref: "#/$defs/A" },
      ex: { type: "string", examples: ["e"], deprecated: true },
    },
  };
  const every = (schema, opts) => toolsSource({ tools: [{ name: "every", description: "d", input_schema: schema, target: { type: "app", component: "c", method: "POST", path: "/" } }] }, opts);
  // A pattern JavaScript cannot read is one Zod cannot check.
  assert.throws(() => every(input), /tool "every": input_schema\/properties\/re2\/pattern: a pattern JavaScript cannot read/);
  assert.match(every(input, { loose: true }), /kept as JSON Schema: a pattern JavaScript cannot read/);
  delete input.properties.re2;
  const text = toolsSource({ tools: [{ name: "every", description: "d", input_schema: input, target: { type: "app", component: "c", method: "POST", path: "/" } }] });
  const ts = join(inside, "every.ts");
  await writeFile(ts, text);
  const { stdout } = await run(process.execPath, [bin, "build", ts], { cwd: kit });
  const got = JSON.parse(stdout).tools[0].input_schema;
  // Zod writes a union of bare types as one type array, and a literal with its type.
  const want = structuredClone(input);
  want.properties.multi = { anyOf: [{ type: "string" }, { type: "integer" }] };
  got.properties.multi = normalize(got.properties.multi, true);
  if (got.properties.multi.type) got.properties.multi = { anyOf: got.properties.multi.type.map((type) => ({ type })) };
  for (const [k, type] of [["c", "string"], ["cnull", "null"]]) want.properties[k].type = type;
  want.properties.emixed = { anyOf: [{ type: "string", const: "a" }, { type: "number", const: 1 }, { type: "null", const: null }] };
  want.properties.rec.propertyNames = { type: "string" };
  want.properties.bare.items = {};
  // RegExp's source escapes "/", which means the same to Go.
  want.properties.s.pattern = "^a\\/b+$";
  assert.deepEqual(normalize(got, true), normalize(want, false));
});

test("toolsSource: --loose keeps no schema that refers to $defs", async () => {
  const { toolsSource } = await import("../compiler/openapi.mjs");
  const input = { $defs: { T: { type: "string" } }, type: "object", properties: { u: { type: "array", uniqueItems: true, items: { $ref: "#/$defs/T" } } } };
  assert.throws(() => toolsSource({ tools: [{ name: "u", description: "d", input_schema: input, target: {} }] }, { loose: true }),
    /tool "u": input_schema\/properties\/u: uniqueItems .*refers to \$defs/);
});

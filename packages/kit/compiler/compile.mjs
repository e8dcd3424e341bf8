// The tools.ts compiler: it loads a tools.ts file (TypeScript, Zod input
// schemas) and writes toolgate's JSON manifest from it (docs/configuration.md,
// "The manifest format"; docs/kits.md, "tools.ts and the compiler").
//
// Plain JavaScript on purpose: the bin must run straight after `npm ci`,
// before (or without) `npm run build`.

import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { register } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { parseLimit, parseTimeout } from './governance.mjs';

// CompileError carries every problem found, one line each, in the form
// `<file>: tool "<name>": <field>: <what>`.
export class CompileError extends Error {
  constructor(lines) {
    super(lines.join('\n'));
    this.name = 'CompileError';
    this.lines = lines;
  }
}

// toolgate's tool-name rule (internal/manifest's nameRE).
const NAME_RE = /^[a-zA-Z0-9_-]{1,64}$/;

const TOOL_FIELDS = ['name', 'displayName', 'description', 'input', 'target', 'annotations', 'allow', 'ui', 'approval', 'limits'];

// The tool the gateway adds for MCP Apps clients (internal/manifest's
// CardAnswerTool): a declared tool may not take its name.
const RESERVED_NAME = 'toolgate_card_answer';
const ANNOTATIONS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

// The target kinds by their wire names, one entry each, as internal/dispatch
// has one Kind each (docs/architecture.md, "Adding a target kind"): the
// fields a target of the kind may have, whether it is sent over HTTP (a
// method, query, headers and a body), the headers the gateway keeps for
// itself, and the checks of its own fields. A url target may name a
// component for its env, and map its answer with a result expression; the
// gateway checks those deeper rules at load.
export const TARGET_KINDS = {
  app: {
    fields: ['type', 'component', 'method', 'path', 'query', 'headers', 'body', 'operation'],
    http: true,
    // The gateway owns the headers it sends an app target (docs/configuration.md, "Targets").
    ownHeaders: {
      authorization: 'an app target may not set Authorization: toolgate sends the identity token in it',
      'kazzle-tool-context': "an app target may not set Kazzle-Tool-Context: toolgate sends the call's context in it",
      'idempotency-key': "an app target may not set Idempotency-Key: toolgate sends the call's idempotency key in it",
    },
    check(target, { nonEmpty, fail }) {
      nonEmpty('component');
      if (typeof target.path !== 'string' || !target.path.startsWith('/')) fail('target.path', 'required: a string starting with "/"');
    },
  },
  url: {
    fields: ['type', 'component', 'method', 'url', 'query', 'headers', 'body', 'result', 'operation'],
    http: true,
    check(target, { nonEmpty, fail }) {
      if (typeof target.url !== 'string' || !/^https?:\/\//i.test(target.url)) fail('target.url', 'required: an absolute http(s) URL');
      if (target.component !== undefined) nonEmpty('component');
      if (target.result !== undefined) nonEmpty('result');
    },
  },
  kazzle: {
    fields: ['type', 'name'],
    http: false,
    // It runs in the user's own page: there is no call for the gateway to
    // hold for approval.
    inPage: true,
    check(target, { nonEmpty }) {
      nonEmpty('name');
    },
  },
  // A tool of an upstream MCP server the gateway's config declares (mcp_server).
  mcp: {
    fields: ['type', 'server', 'tool'],
    http: false,
    check(target, { nonEmpty }) {
      nonEmpty('server');
      nonEmpty('tool');
    },
  },
};

// kindNames lists the kinds' wire names, each written by quote: "a", "b" or "c".
function kindNames(quote, last) {
  const names = Object.keys(TARGET_KINDS).map(quote);
  return names.length === 1 ? names[0] : `${names.slice(0, -1).join(', ')}${last}${names.at(-1)}`;
}

// The order a target's fields are written in, whatever order the author
// used: the manifest must not change when tools.ts is only reordered.
const TARGET_ORDER = ['type', 'component', 'method', 'path', 'url', 'query', 'headers', 'body', 'name', 'result', 'server', 'tool', 'operation'];

// compile loads file and returns the manifest's text: 2-space JSON with a
// trailing newline, the same bytes for the same tools.ts and zod.
export async function compile(file) {
  const { tools, toJSONSchema } = await load(file);
  return JSON.stringify(manifest(file, tools, toJSONSchema), null, 2) + '\n';
}

// HOOKS serve one module, the bundle, from memory at a file: URL beside
// tools.ts (module.register, Node 20.6+); every other import resolves and
// loads as usual.
const HOOKS =
  'data:text/javascript,' +
  encodeURIComponent(`
let url, source;
export function initialize(data) { url = data.url; source = data.source; }
export async function resolve(specifier, context, next) {
  return specifier === url ? { url, shortCircuit: true } : next(specifier, context);
}
export async function load(u, context, next) {
  return u === url ? { format: 'module', source, shortCircuit: true } : next(u, context);
}
`);

// load bundles file with esbuild and imports it. Everything file imports
// from a package (zod, @toolgate/kit, …) is left external, so Node resolves
// it at import as if the bundle were a module beside file: the bundle is
// served from memory under such a URL by a module hook, so nothing is
// written and a read-only folder (a config directory) compiles too. The
// toJSONSchema it returns comes from the zod that file's folder resolves:
// the instance that built the schemas, whose registry holds their
// .describe() texts.
export async function load(file) {
  const abs = path.resolve(file);
  const dir = path.dirname(abs);
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    throw new CompileError([`${file}: esbuild is needed to read TypeScript: npm install --save-dev esbuild`]);
  }
  try {
    if (!(await stat(abs)).isFile()) throw new CompileError([`${file}: not a file`]);
  } catch (err) {
    if (err instanceof CompileError) throw err;
    throw new CompileError([`${file}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`]);
  }
  // A name no file beside tools.ts has, so the hook serves only this.
  const virtual = path.join(dir, `.${path.basename(abs)}.toolgate-${randomBytes(8).toString('hex')}.mjs`);
  const virtualURL = pathToFileURL(virtual).href;
  // 'zod/v4/core' is the same module zod 4's 'zod' (and zod 3.25's
  // 'zod/v4') is built on, so its toJSONSchema is z.toJSONSchema.
  const entry =
    `export * as module from ${JSON.stringify('./' + path.basename(abs))};\n` +
    `export { toJSONSchema } from 'zod/v4/core';\n`;
  let out;
  try {
    out = await esbuild.build({
      stdin: { contents: entry, resolveDir: dir, sourcefile: 'toolgate-tools-entry.js', loader: 'js' },
      bundle: true,
      packages: 'external',
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile: virtual,
      write: false,
      sourcemap: 'inline',
      logLevel: 'silent',
    });
  } catch (err) {
    if (!Array.isArray(err.errors)) throw err;
    throw new CompileError(err.errors.map((e) => buildMessage(file, abs, e)));
  }
  register(HOOKS, { data: { url: virtualURL, source: out.outputFiles[0].text } });
  let ns;
  try {
    ns = await import(virtualURL);
  } catch (err) {
    throw new CompileError([runtimeMessage(file, abs, virtual, err)]);
  }
  const mod = ns.module;
  let tools = mod.tools;
  if (tools === undefined) tools = mod.default;
  if (tools === undefined) {
    throw new CompileError([`${file}: no export named "tools" and no default export: export const tools = [...] as const satisfies readonly KazzleTool[]`]);
  }
  if (!Array.isArray(tools)) {
    throw new CompileError([`${file}: tools: not an array`]);
  }
  if (typeof ns.toJSONSchema !== 'function') {
    throw new CompileError([`${file}: the zod beside it has no toJSONSchema: zod 4 is needed`]);
  }
  return { tools, toJSONSchema: ns.toJSONSchema };
}

// buildMessage formats an esbuild error as file:line:column: text, naming
// the file as the user gave it when the error is in it.
function buildMessage(file, abs, e) {
  const loc = e.location;
  if (!loc) return `${file}: ${e.text}`;
  const where = path.resolve(loc.file) === abs ? file : loc.file;
  return `${where}:${loc.line}:${loc.column + 1}: ${e.text}`;
}

// runtimeMessage tells what failed while tools.ts ran (a throw, a missing
// package), at its line in tools.ts when the stack shows one (the bin
// enables source maps, so frames name tools.ts, not the bundle), and never
// by the bundle's virtual name.
function runtimeMessage(file, abs, virtual, err) {
  const virtualURL = pathToFileURL(virtual).href;
  const clean = (s) => String(s).split(virtualURL).join(file).split(virtual).join(file);
  const message = err instanceof Error ? err.message : String(err);
  // A frame ends "(<file>:<line>:<col>)" or "at <file>:<line>:<col>";
  // source-mapped frames name a path, others a file: URL.
  const frame = String(err?.stack ?? '')
    .split('\n')
    .slice(1)
    .map((line) => line.match(/[( ]((?:file:\/\/)?\/[^():]*):(\d+):(\d+)\)?$/))
    .find((m) => m && (m[1].startsWith('file:') ? fileURLToPath(m[1]) : m[1]) === abs);
  const where = frame ? `${file}:${frame[2]}:${frame[3]}` : file;
  return `${where}: ${clean(message)}`;
}

// manifest checks every tool and returns toolgate's manifest document, or
// throws a CompileError listing every problem it found.
export function manifest(file, tools, toJSONSchema) {
  const errors = [];
  const out = [];
  const seen = new Map();
  tools.forEach((tool, i) => {
    const label = typeof tool?.name === 'string' && NAME_RE.test(tool.name) ? `tool ${JSON.stringify(tool.name)}` : `tools[${i}]`;
    const problems = [];
    const fail = (field, what) => problems.push(`${file}: ${label}: ${field}: ${what}`);
    const entry = checkTool(tool, fail, toJSONSchema);
    if (typeof tool?.name === 'string') {
      if (seen.has(tool.name)) fail('name', `used twice (tools[${seen.get(tool.name)}] and tools[${i}])`);
      else seen.set(tool.name, i);
    }
    if (problems.length > 0) errors.push(...problems);
    else out.push(entry);
  });
  if (errors.length > 0) throw new CompileError(errors);
  return { tools: out };
}

// checkTool reports through fail what is wrong with tool, and returns its
// manifest entry (meaningful only when nothing was reported).
function checkTool(tool, fail, toJSONSchema) {
  if (!isPlainObject(tool)) {
    fail('tool', 'not an object');
    return undefined;
  }
  for (const key of Object.keys(tool)) {
    if (!TOOL_FIELDS.includes(key)) fail(key, `unknown field (a tool has ${TOOL_FIELDS.join(', ')})`);
  }
  if (typeof tool.name !== 'string' || !NAME_RE.test(tool.name)) {
    fail('name', tool.name === undefined ? `required: a string matching ${NAME_RE.source}` : `${show(tool.name)} must match ${NAME_RE.source}`);
  } else if (tool.name === RESERVED_NAME) {
    fail('name', `${show(tool.name)} is reserved: the gateway serves a tool of that name to MCP Apps clients`);
  }
  if (typeof tool.description !== 'string' || tool.description.trim() === '') fail('description', 'required: a non-empty string');
  // Optional, as in a JSON manifest: the gateway labels the tool with its name.
  if (tool.displayName !== undefined && (typeof tool.displayName !== 'string' || tool.displayName.trim() === '')) {
    fail('displayName', 'a non-empty string when given (default: the name)');
  }
  const entry = {
    name: tool.name,
    displayName: tool.displayName,
    description: tool.description,
    input_schema: inputSchema(tool.input, fail, toJSONSchema),
    target: checkTarget(tool.target, fail),
  };
  if (tool.annotations !== undefined) entry.annotations = checkAnnotations(tool.annotations, fail);
  if (tool.allow !== undefined) {
    if (typeof tool.allow !== 'string' || tool.allow.trim() === '') fail('allow', 'must be a non-empty expression string');
    entry.allow = tool.allow;
  }
  if (tool.ui !== undefined) {
    // As the gateway checks at load: only an app target shows in the view.
    if (typeof tool.ui !== 'boolean') fail('ui', 'must be true or false');
    else if (tool.ui && isPlainObject(tool.target) && tool.target.type !== 'app') fail('ui', 'only an app target shows in the MCP Apps view');
    entry.ui = tool.ui;
  }
  if (tool.approval !== undefined) {
    entry.approval = checkApproval(tool.approval, fail);
    const kind = isPlainObject(tool.target) && Object.hasOwn(TARGET_KINDS, tool.target.type) ? TARGET_KINDS[tool.target.type] : undefined;
    if (kind?.inPage) fail('approval', "a client tool runs in the user's own page, so there is no call to hold for approval");
  }
  if (tool.limits !== undefined) entry.limits = checkLimits(tool.limits, fail);
  return entry;
}

// inputSchema converts a Zod 4 object schema with Zod's own toJSONSchema.
//
// io: 'input' describes what a caller may send, which is what the gateway
// validates: a field with .default() may be left out, a plain (not
// .strict()) z.object() lets unknown keys through (Zod strips them), and
// a .transform() is described by what it reads. The output side would
// mark defaulted fields required and close every object, refusing calls
// Zod itself accepts.
function inputSchema(input, fail, toJSONSchema) {
  const def = input?._zod?.def;
  if (def === undefined) {
    if (input === undefined) fail('input', 'required: a Zod object schema (z.object({...}))');
    else if (input?._def !== undefined) fail('input', 'a Zod 3 schema: toolgate-tools needs Zod 4 (zod@^4)');
    else fail('input', `${show(input)} is not a Zod schema`);
    return undefined;
  }
  if (def.type !== 'object') {
    fail('input', `a Zod ${def.type} schema: the input must be z.object({...})`);
    return undefined;
  }
  const params = { target: 'draft-2020-12', io: 'input' };
  try {
    return toJSONSchema(input, params);
  } catch (err) {
    // Zod's message names the kind ("Date cannot be represented in JSON
    // Schema"), not the field: ask again, this time with a handler that
    // Zod calls with the path of what it cannot represent.
    let where;
    try {
      toJSONSchema(input, { ...params, unrepresentable: ({ path }) => { where ??= path; return 'throw'; } });
    } catch {}
    fail(where ? fieldPath(where) : 'input', err.message);
    return undefined;
  }
}

// fieldPath turns a JSON Schema path (["properties", "when", "items"]) into
// the field it describes (input.when[]).
export function fieldPath(jsonPath) {
  let s = 'input';
  for (let i = 0; i < jsonPath.length; i++) {
    const seg = jsonPath[i];
    if ((seg === 'properties' || seg === 'patternProperties') && i + 1 < jsonPath.length) s += '.' + jsonPath[++i];
    else if (seg === 'items') s += '[]';
    else if (seg === 'prefixItems' && i + 1 < jsonPath.length) s += `[${jsonPath[++i]}]`;
    else if (seg === 'additionalProperties') s += '.*';
    else s += '/' + seg;
  }
  return s;
}

// checkTarget checks a target's shape (type, fields and their types) and
// returns it with its fields in the manifest's order. The deeper rules
// (references, the component's existence, paths) are the gateway's, which
// names the tool too when it loads the manifest.
function checkTarget(target, fail) {
  if (!isPlainObject(target)) {
    fail('target', target === undefined ? `required: {type: ${Object.keys(TARGET_KINDS).map((n) => JSON.stringify(n)).join(' | ')}, ...}` : 'not an object');
    return undefined;
  }
  const kind = Object.hasOwn(TARGET_KINDS, target.type) ? TARGET_KINDS[target.type] : undefined;
  if (kind === undefined) {
    fail('target.type', `${show(target.type)} is not ${kindNames((n) => JSON.stringify(n), ' or ')}`);
    return undefined;
  }
  const fields = kind.fields;
  for (const key of Object.keys(target)) {
    if (!fields.includes(key)) fail(`target.${key}`, `unknown field for a ${target.type} target (it has ${fields.join(', ')})`);
  }
  const nonEmpty = (key) => {
    if (typeof target[key] !== 'string' || target[key] === '') fail(`target.${key}`, 'required: a non-empty string');
  };
  kind.check(target, { nonEmpty, fail });
  if (kind.http) {
    if (!METHODS.includes(target.method)) fail('target.method', `${show(target.method)} is not one of ${METHODS.join(', ')}`);
    for (const key of ['query', 'headers']) {
      if (target[key] === undefined) continue;
      if (!isPlainObject(target[key])) {
        fail(`target.${key}`, 'must be an object of strings');
        continue;
      }
      for (const [k, v] of Object.entries(target[key])) {
        if (typeof v !== 'string') fail(`target.${key}.${k}`, 'must be a string');
      }
    }
    if (kind.ownHeaders && isPlainObject(target.headers)) {
      for (const k of Object.keys(target.headers)) {
        const why = Object.hasOwn(kind.ownHeaders, k.toLowerCase()) ? kind.ownHeaders[k.toLowerCase()] : undefined;
        if (why !== undefined) fail(`target.headers.${k}`, why);
      }
    }
    if (target.body !== undefined) checkJSON(target.body, 'target.body', fail, new Set());
    // How an OpenAPI operation's input is sent (docs/openapi.md): written
    // as it is, the gateway checks it at load.
    if (target.operation !== undefined) {
      if (!isPlainObject(target.operation)) fail('target.operation', 'must be an object');
      else checkJSON(target.operation, 'target.operation', fail, new Set());
    }
  }
  const out = {};
  for (const key of TARGET_ORDER) {
    if (target[key] !== undefined) out[key] = target[key];
  }
  return out;
}

// checkJSON refuses what JSON.stringify would silently drop or change in a
// body (undefined, functions, NaN, a Date's toJSON…) and what it cannot
// write at all (bigint, cycles): the manifest must say what tools.ts says.
function checkJSON(v, where, fail, stack) {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(v)) fail(where, `${v} is not a JSON number`);
      return;
    case 'object':
      if (v === null) return;
      if (stack.has(v)) {
        fail(where, 'refers to itself');
        return;
      }
      stack.add(v);
      if (Array.isArray(v)) v.forEach((item, i) => checkJSON(item, `${where}[${i}]`, fail, stack));
      else if (isPlainObject(v)) for (const [k, item] of Object.entries(v)) checkJSON(item, `${where}.${k}`, fail, stack);
      else fail(where, 'is not plain JSON (an object of another class)');
      stack.delete(v);
      return;
    default:
      fail(where, `a ${typeof v} is not JSON`);
  }
}

function checkAnnotations(a, fail) {
  if (!isPlainObject(a)) {
    fail('annotations', 'not an object');
    return undefined;
  }
  for (const [k, v] of Object.entries(a)) {
    if (!ANNOTATIONS.includes(k)) fail(`annotations.${k}`, `unknown hint (toolgate has ${ANNOTATIONS.join(', ')})`);
    else if (typeof v !== 'boolean') fail(`annotations.${k}`, 'must be true or false');
  }
  const out = {};
  for (const k of ANNOTATIONS) {
    if (a[k] !== undefined) out[k] = a[k];
  }
  return out;
}

// An approval's members in the manifest's order.
const APPROVAL_FIELDS = ['when', 'title', 'description', 'timeout', 'assignee'];

// checkApproval checks the gateway's own approval question on a tool and
// returns it with its members in the manifest's order, as written: the
// expressions (when, assignee) are compiled by the gateway at load, which
// names the tool too.
function checkApproval(a, fail) {
  if (!isPlainObject(a)) {
    fail('approval', 'must be an object: {title, when?, description?, timeout?, assignee?}');
    return undefined;
  }
  for (const key of Object.keys(a)) {
    if (!APPROVAL_FIELDS.includes(key)) fail(`approval.${key}`, `unknown field (an approval has ${APPROVAL_FIELDS.join(', ')})`);
  }
  const nonEmpty = (v) => typeof v === 'string' && v.trim() !== '';
  if (!nonEmpty(a.title)) fail('approval.title', "required: a non-empty string, the card's title");
  if (a.when !== undefined && !nonEmpty(a.when)) fail('approval.when', 'must be a non-empty expression string (left out: every call is approved first)');
  if (a.description !== undefined && !nonEmpty(a.description)) fail('approval.description', 'must be a non-empty string when given');
  if (a.assignee !== undefined && !nonEmpty(a.assignee)) fail('approval.assignee', 'must be a non-empty expression string (left out: the caller decides)');
  if (a.timeout !== undefined) {
    const t = typeof a.timeout === 'string' ? parseTimeout(a.timeout) : { error: 'whole days (2d) or a duration (24h, 90m), a string' };
    if (t.error !== undefined) fail('approval.timeout', `${show(a.timeout)}: ${t.error}`);
  }
  const out = {};
  for (const k of APPROVAL_FIELDS) {
    if (a[k] !== undefined) out[k] = a[k];
  }
  return out;
}

// checkLimits checks a tool's quotas and returns them as written. Two
// limits that count the same calls (one window, or both concurrent, in one
// scope) are an error: which of them holds would be a guess.
function checkLimits(limits, fail) {
  if (!Array.isArray(limits)) {
    fail('limits', 'must be an array of strings such as "20/1h per user"');
    return undefined;
  }
  const seen = new Map();
  for (let i = 0; i < limits.length; i++) {
    const l = parseLimit(limits[i]);
    if (l.error !== undefined) {
      fail(`limits[${i}]`, typeof limits[i] === 'string' ? `${show(limits[i])}: ${l.error}` : l.error);
      continue;
    }
    const key = `${l.window} ${l.scope}`;
    if (seen.has(key)) {
      const j = seen.get(key);
      fail(`limits[${i}]`, `${show(limits[i])} counts the same calls as limits[${j}] (${show(limits[j])}): ${l.window === 0 ? 'both concurrent' : 'one window'}, per ${l.scope}`);
    } else {
      seen.set(key, i);
    }
  }
  return [...limits];
}

function isPlainObject(v) {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

// show writes a value for an error message, short.
function show(v) {
  if (v === undefined) return 'undefined';
  if (typeof v === 'string') return JSON.stringify(v.length > 80 ? v.slice(0, 80) + '…' : v);
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'object') return v === null ? 'null' : Array.isArray(v) ? 'an array' : 'an object';
  return String(v);
}

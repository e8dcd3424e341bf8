// toolgate-tools openapi: a tools.ts written from an OpenAPI document
// (docs/openapi.md, "From TypeScript"). The document is read by the
// toolgate binary (`toolgate openapi FILE --json`), the one reader of
// OpenAPI documents; this file turns the manifest it prints into a tools.ts
// whose Zod schemas compile back to the same input schemas.

import { execFile } from 'node:child_process';

import { CompileError } from './compile.mjs';

// runToolgate runs `toolgate openapi` and returns the manifest it prints.
// args are the document and the flags (--component or --server, --prefix,
// --operations), passed on as they are.
export function runToolgate(bin, args) {
  return new Promise((resolve, reject) => {
    execFile(bin, ['openapi', ...args, '--json'], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err?.code === 'ENOENT') {
        reject(new CompileError([`${bin}: not found: the gateway's binary reads the document (\`toolgate openapi\`, or \`caddy openapi\` of a Caddy built with the module: README.md, "Install"); put it on PATH or name it with --toolgate PATH`]));
        return;
      }
      if (err) {
        const said = String(stderr).trim() || err.message;
        reject(new CompileError(said.split('\n').map((l) => `${bin} openapi: ${logMessage(l)}`)));
        return;
      }
      try {
        resolve(JSON.parse(stdout));
      } catch (e) {
        reject(new CompileError([`${bin} openapi: its output is not a manifest: ${e.message}`]));
      }
    });
  });
}

// logMessage is the msg of a JSON log line (how Caddy's commands report
// errors), or the line.
function logMessage(line) {
  try {
    const v = JSON.parse(line);
    if (typeof v?.msg === 'string') return v.error === undefined ? v.msg : `${v.msg}: ${v.error}`;
  } catch {}
  return line;
}

// The keywords a schema may have besides those of its type: annotations,
// which Zod carries as metadata (.describe and .meta) and writes back as
// they are.
const META = ['title', 'examples', 'deprecated', 'readOnly', 'writeOnly', 'format', '$comment'];

// The keywords each type takes, beyond META, description and default.
const KEYWORDS = {
  object: ['properties', 'required', 'additionalProperties'],
  string: ['minLength', 'maxLength', 'pattern', 'enum', 'const'],
  number: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'enum', 'const'],
  integer: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'enum', 'const'],
  boolean: ['enum', 'const'],
  null: ['enum', 'const'],
  array: ['items', 'minItems', 'maxItems'],
};

// toolsSource returns the text of a tools.ts declaring manifest's tools.
// Each input schema becomes Zod source; what Zod cannot say is an error
// naming the tool and the schema's path, or with loose, a z.unknown() that
// carries the JSON Schema as metadata (the gateway checks it, Zod does
// not), marked by a comment. The $defs of every tool become shared
// constants, named as the manifest names them.
export function toolsSource(manifest, { loose = false, source = 'the OpenAPI document' } = {}) {
  const errors = [];
  const defs = new Map(); // name → { json, text, recursive }
  const tools = [];
  for (const tool of manifest.tools ?? []) {
    const label = `tool ${JSON.stringify(tool.name)}`;
    const gen = new Generator(label, loose, errors);
    const localDefs = tool.input_schema?.$defs ?? {};
    gen.defNames = new Set(Object.keys(localDefs));
    for (const [name, schema] of Object.entries(localDefs)) {
      const json = JSON.stringify(schema);
      const had = defs.get(name);
      if (had !== undefined) {
        if (had.json !== json) errors.push(`${label}: input_schema/$defs/${name}: another tool has a different schema of that name`);
        continue;
      }
      defs.set(name, { json, text: gen.schema(schema, `input_schema/$defs/${name}`), deps: gen.takeRefs() });
    }
    const { $defs, ...top } = tool.input_schema ?? {};
    if (top.type !== 'object') errors.push(`${label}: input_schema: not an object schema`);
    const input = gen.schema(top, 'input_schema');
    tools.push({ tool, input });
  }
  if (errors.length > 0) throw new CompileError(errors);

  const order = orderDefs(defs);
  const names = new Map();
  for (const name of order.keys()) {
    const id = ident(name);
    if (names.has(id)) errors.push(`input_schema/$defs: ${JSON.stringify(names.get(id))} and ${JSON.stringify(name)} make the same name ${id}`);
    names.set(id, name);
  }
  if (errors.length > 0) throw new CompileError(errors);
  const declared = new Set(order.keys());
  const out = [];
  out.push(`// The tools of ${source}, written by toolgate-tools openapi: edit them`);
  out.push('// as any tools.ts (docs/kits.md, "tools.ts and the compiler").');
  out.push("import { z } from 'zod';");
  out.push("import type { KazzleTool } from '@toolgate/kit/tools';");
  out.push('');
  const before = new Set();
  for (const [name, d] of order) {
    // A schema that refers to itself (or to one declared after it) is
    // typed by hand: TypeScript cannot infer a type from its own initializer.
    const typed = d.lazy ? ': z.ZodType' : '';
    out.push(`const ${ident(name)}${typed} = ${refer(d.text, before)}.meta({ id: ${lit(name)} });`);
    before.add(name);
  }
  if (defs.size > 0) out.push('');
  out.push('export const tools = [');
  for (const { tool, input } of tools) {
    out.push('  {');
    out.push(`    name: ${lit(tool.name)},`);
    if (tool.displayName !== undefined) out.push(`    displayName: ${lit(tool.displayName)},`);
    out.push(`    description: ${lit(tool.description)},`);
    out.push(`    input: ${indent(refer(input, declared), '    ')},`);
    out.push(`    target: ${indent(js(tool.target), '    ')},`);
    for (const key of ['annotations', 'allow', 'ui', 'approval', 'limits']) {
      if (tool[key] !== undefined) out.push(`    ${key}: ${indent(js(tool[key]), '    ')},`);
    }
    out.push('  },');
  }
  out.push('] as const satisfies readonly KazzleTool[];');
  return out.join('\n') + '\n';
}

// refer replaces the marks of references to defs: a def declared before
// is named, any other (a def in a cycle) is named lazily.
function refer(text, declared) {
  return text.replace(/\u0000([^\u0000]*)\u0000/g, (_, name) => (declared.has(name) ? ident(name) : `z.lazy(() => ${ident(name)})`));
}

// orderDefs puts each def after those it refers to, so that it can name
// them; a def in a cycle refers to the others lazily (z.lazy), and so do
// its references, which Generator wrote as lazy already.
function orderDefs(defs) {
  const done = new Map();
  const visiting = new Set();
  const visit = (name) => {
    if (done.has(name)) return;
    const d = defs.get(name);
    if (visiting.has(name)) {
      d.lazy = true;
      return;
    }
    visiting.add(name);
    for (const dep of d.deps) if (defs.has(dep)) visit(dep);
    visiting.delete(name);
    done.set(name, d);
  };
  for (const name of defs.keys()) visit(name);
  return done;
}

// Generator writes the Zod source of one tool's schemas.
class Generator {
  constructor(label, loose, errors) {
    this.label = label;
    this.loose = loose;
    this.errors = errors;
    this.refs = new Set();
  }

  takeRefs() {
    const r = this.refs;
    this.refs = new Set();
    return r;
  }

  // unsupported reports what Zod cannot say at path, or with loose keeps
  // the JSON Schema as it is.
  unsupported(s, path, what) {
    if (!this.loose) {
      this.errors.push(`${this.label}: ${path}: ${what} (toolgate-tools openapi --loose keeps it as JSON Schema, unchecked by Zod)`);
      return 'z.unknown()';
    }
    // Its references would name $defs that only Zod schemas bring along.
    if (JSON.stringify(s).includes('"$ref"')) {
      this.errors.push(`${this.label}: ${path}: ${what}, and it refers to $defs, which a schema kept as JSON Schema cannot`);
      return 'z.unknown()';
    }
    return `/* kept as JSON Schema: ${what.replaceAll('*/', '* /')} */ z.unknown().meta(${js(s)})`;
  }

  // schema returns the Zod expression of s, which a parent makes optional.
  schema(s, path) {
    if (s === true) return 'z.unknown()';
    if (s === false) return 'z.never()';
    if (s === null || typeof s !== 'object' || Array.isArray(s)) return this.unsupported(s, path, 'not a schema');
    let expr = this.core(s, path);
    if (s.description !== undefined) expr += `.describe(${lit(s.description)})`;
    const meta = {};
    for (const k of META) if (s[k] !== undefined) meta[k] = s[k];
    if (Object.keys(meta).length > 0) expr += `.meta(${js(meta)})`;
    return expr;
  }

  // core is the schema's assertions: its type and the keywords of the type.
  core(s, path) {
    const known = new Set(['description', 'default', ...META]);
    if (s.$ref !== undefined) {
      const m = /^#\/\$defs\/([^/]+)$/.exec(s.$ref);
      if (!m || !this.defNames.has(m[1])) return this.unsupported(s, path, `$ref ${JSON.stringify(s.$ref)} is not one of its $defs`);
      const extra = Object.keys(s).filter((k) => k !== '$ref' && !known.has(k));
      if (extra.length > 0) return this.unsupported(s, path, `$ref beside ${extra.join(', ')}`);
      this.refs.add(m[1]);
      // A mark, replaced once the defs are ordered (see refer).
      return `\u0000${m[1]}\u0000`;
    }
    for (const [kw, fn] of [['anyOf', 'union'], ['oneOf', 'xor']]) {
      if (s[kw] === undefined) continue;
      const extra = Object.keys(s).filter((k) => k !== kw && !known.has(k));
      if (extra.length > 0 || !Array.isArray(s[kw]) || s[kw].length < 2) return this.unsupported(s, path, `${kw} beside ${extra.join(', ') || 'nothing'}`);
      const parts = s[kw].map((b, i) => this.schema(b, `${path}/${kw}/${i}`));
      return `z.${fn}([${parts.join(', ')}])`;
    }
    if (s.allOf !== undefined) return this.unsupported(s, path, 'allOf');

    let types = s.type;
    if (types === undefined) {
      const extra = Object.keys(s).filter((k) => !known.has(k));
      if (extra.length === 0) return this.withDefault(s, 'z.unknown()');
      if (extra.length === 1 && extra[0] === 'const') return this.withDefault(s, this.literal(s.const, path));
      if (extra.length === 1 && extra[0] === 'enum') return this.withDefault(s, this.enumOf(s.enum, path));
      return this.unsupported(s, path, `no type, with ${extra.join(', ')}`);
    }
    if (!Array.isArray(types)) types = [types];
    const nullable = types.includes('null') && types.length > 1;
    const main = types.filter((t) => !(nullable && t === 'null'));
    for (const t of main) {
      if (!Object.hasOwn(KEYWORDS, t)) return this.unsupported(s, path, `type ${JSON.stringify(t)}`);
    }
    const allowed = new Set([...known, 'type', ...main.flatMap((t) => KEYWORDS[t])]);
    const extra = Object.keys(s).filter((k) => !allowed.has(k));
    if (extra.length > 0) return this.unsupported(s, path, `${extra.join(', ')} (for type ${main.join(', ')})`);
    if (main.length > 1) {
      // Each type keeps only its own keywords: split the schema by type.
      const parts = main.map((t) => {
        const one = { type: t };
        for (const k of KEYWORDS[t]) if (s[k] !== undefined) one[k] = s[k];
        return this.typed(one, t, path);
      });
      let expr = `z.union([${parts.join(', ')}])`;
      if (nullable) expr += '.nullable()';
      return this.withDefault(s, expr);
    }
    let expr = this.typed(s, main[0], path);
    if (nullable) expr += '.nullable()';
    return this.withDefault(s, expr);
  }

  // withDefault adds the schema's default. .default() makes a property
  // optional, as a default without `required` does; a required property
  // keeps its default as an annotation (see object).
  withDefault(s, expr) {
    if (s.default === undefined) return expr;
    return this.required ? `${expr}.meta({ default: ${js(s.default)} })` : `${expr}.default(${js(s.default)})`;
  }

  literal(v, path) {
    if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) return `z.literal(${js(v)})`;
    return this.unsupported({ const: v }, path, 'a const that is not a string, number, boolean or null');
  }

  enumOf(values, path) {
    if (!Array.isArray(values) || values.length === 0) return this.unsupported({ enum: values }, path, 'an empty enum');
    if (values.every((v) => typeof v === 'string')) return `z.enum(${js(values)})`;
    if (values.length === 1) return this.literal(values[0], path);
    return `z.union([${values.map((v) => this.literal(v, path)).join(', ')}])`;
  }

  typed(s, type, path) {
    if (s.const !== undefined) return this.literal(s.const, path);
    if (s.enum !== undefined) return this.enumOf(s.enum, path);
    switch (type) {
      case 'string': {
        let e = 'z.string()';
        if (s.minLength !== undefined) e += `.min(${s.minLength})`;
        if (s.maxLength !== undefined) e += `.max(${s.maxLength})`;
        if (s.pattern !== undefined) {
          // Go's syntax, which JavaScript reads the same in the main (a
          // named group (?P<n>…) it cannot); its source escapes "/" as "\/".
          try {
            new RegExp(s.pattern);
          } catch (err) {
            return this.unsupported(s, `${path}/pattern`, `a pattern JavaScript cannot read: ${err.message}`);
          }
          e += `.regex(new RegExp(${lit(s.pattern)}))`;
        }
        return e;
      }
      case 'number':
      case 'integer': {
        let e = type === 'integer' ? 'z.int()' : 'z.number()';
        if (s.minimum !== undefined) e += `.min(${s.minimum})`;
        if (s.maximum !== undefined) e += `.max(${s.maximum})`;
        if (s.exclusiveMinimum !== undefined) e += `.gt(${s.exclusiveMinimum})`;
        if (s.exclusiveMaximum !== undefined) e += `.lt(${s.exclusiveMaximum})`;
        if (s.multipleOf !== undefined) e += `.multipleOf(${s.multipleOf})`;
        return e;
      }
      case 'boolean':
        return 'z.boolean()';
      case 'null':
        return 'z.null()';
      case 'array': {
        const items = s.items === undefined ? 'z.unknown()' : this.schema(s.items, `${path}/items`);
        let e = `z.array(${items})`;
        if (s.minItems !== undefined) e += `.min(${s.minItems})`;
        if (s.maxItems !== undefined) e += `.max(${s.maxItems})`;
        return e;
      }
      case 'object':
        return this.object(s, path);
    }
    return this.unsupported(s, path, `type ${type}`);
  }

  object(s, path) {
    const required = new Set(s.required ?? []);
    const props = s.properties ?? {};
    for (const r of required) {
      if (!Object.hasOwn(props, r)) return this.unsupported(s, path, `required ${JSON.stringify(r)} is not one of its properties`);
    }
    const ap = s.additionalProperties;
    const lines = Object.entries(props).map(([name, p]) => {
      const saved = this.required;
      this.required = required.has(name);
      let e = this.schema(p, `${path}/properties/${name}`);
      // .default() already makes the property optional.
      if (!required.has(name) && !(p && typeof p === 'object' && p.default !== undefined)) e += '.optional()';
      this.required = saved;
      return `${key(name)}: ${e},`;
    });
    const open = ap === undefined;
    const anything = ap === true || (ap !== null && typeof ap === 'object' && Object.keys(ap).length === 0);
    if (lines.length === 0 && ap !== undefined && ap !== false && !anything) {
      return `z.record(z.string(), ${this.schema(ap, `${path}/additionalProperties`)})`;
    }
    const body = lines.length === 0 ? '{}' : `{\n${lines.map((l) => '  ' + indent(l, '  ')).join('\n')}\n}`;
    if (ap === false) return `z.strictObject(${body})`;
    if (open) return `z.object(${body})`;
    if (anything) return `z.looseObject(${body})`;
    return `z.object(${body}).catchall(${this.schema(ap, `${path}/additionalProperties`)})`;
  }
}

// js writes a JSON value as a JavaScript literal: keys unquoted where they
// can be, strings in single quotes, 2-space indented when it does not fit
// on a line.
function js(v, pad = '') {
  if (v === null || typeof v !== 'object') return lit(v);
  const inner = pad + '  ';
  const items = Array.isArray(v) ? v.map((x) => js(x, inner)) : Object.entries(v).map(([k, x]) => `${key(k)}: ${js(x, inner)}`);
  const [open, close] = Array.isArray(v) ? ['[', ']'] : ['{ ', ' }'];
  if (items.length === 0) return Array.isArray(v) ? '[]' : '{}';
  const flat = Array.isArray(v) ? `[${items.join(', ')}]` : `${open}${items.join(', ')}${close}`;
  if (flat.length <= 80 && !flat.includes('\n')) return flat;
  return `${open.trim()}\n${items.map((i) => `${inner}${i},`).join('\n')}\n${pad}${close.trim()}`;
}

function lit(v) {
  if (typeof v === 'string') return `'${JSON.stringify(v).slice(1, -1).replaceAll("\\\"", '"').replaceAll("'", "\\'")}'`;
  return JSON.stringify(v);
}

function key(k) {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? k : lit(k);
}

// ident makes a $defs name a JavaScript name: the names toolgate writes
// ($defs of components) are letters, digits and _; anything else becomes _.
// Names tools.ts declares itself, or that JavaScript keeps, get a _ too.
function ident(name) {
  let s = name.replace(/[^A-Za-z0-9_$]/g, '_');
  if (/^[0-9]/.test(s)) s = '_' + s;
  return TAKEN.has(s) ? s + '_' : s;
}

const TAKEN = new Set(['z', 'tools', 'KazzleTool', 'await', 'break', 'case', 'catch', 'class', 'const', 'continue', 'debugger', 'default', 'delete', 'do', 'else', 'enum', 'export', 'extends', 'false', 'finally', 'for', 'function', 'if', 'import', 'in', 'instanceof', 'let', 'new', 'null', 'return', 'static', 'super', 'switch', 'this', 'throw', 'true', 'try', 'typeof', 'var', 'void', 'while', 'with', 'yield', 'undefined', 'NaN', 'Infinity', 'Object', 'Array', 'String', 'Number', 'Boolean', 'RegExp', 'Map', 'Set', 'JSON', 'Math', 'Date', 'Error', 'Promise', 'Symbol']);

function indent(text, pad) {
  return text.split('\n').join('\n' + pad);
}

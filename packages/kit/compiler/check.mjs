// The gateway's load checks that a tools.ts can fail and the compiler does
// not make itself, for `toolgate-tools build --check`: the schemas'
// patterns are Go regular expressions (internal/manifest's compileSchema,
// by santhosh-tekuri/jsonschema), every ${...} reference parses and can
// resolve (internal/refs, internal/dispatch, internal/manifest's
// checkInputRefs), and, given the Caddyfile, every component a target
// names is declared there (caddymodule). Messages carry the gateway's own
// wording after the file, the tool and the field.

import { RE2JS } from 're2js';

import { declaredComponents } from './caddyfile.mjs';
import { fieldPath, TARGET_KINDS } from './compile.mjs';

// check returns one line per problem the gateway would refuse doc, the
// manifest compiled from file, for; none when it would load. caddyfile,
// when given, is the path of the Caddyfile that serves the tools.
export async function check(file, doc, { caddyfile } = {}) {
  let components;
  if (caddyfile !== undefined) {
    try {
      components = await declaredComponents(caddyfile);
    } catch (err) {
      return [err.message];
    }
  }
  const lines = [];
  for (const tool of doc.tools) {
    const fail = (field, what) => lines.push(`${file}: tool ${JSON.stringify(tool.name)}: ${field}: ${what}`);
    checkPatterns(tool.input_schema, [], fail);
    checkTarget(tool, fail, components && { caddyfile, components });
  }
  return lines;
}

// checkPatterns reports every pattern and patternProperties key in
// schema (and in its subschemas, at path) that Go's regexp refuses: the
// gateway validates each schema against the 2020-12 metaschema, whose
// "format": "regex" it asserts with Go's regexp.
function checkPatterns(schema, path, fail) {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return;
  const refuse = (pattern, err, what = '') =>
    fail(fieldPath(path), `${what}'${pattern}' is not valid regex: ${err}; the gateway reads patterns with Go's regexp (RE2 syntax): no lookahead or lookbehind, backreferences, possessive or atomic groups, or \\u escapes`);
  if (typeof schema.pattern === 'string') {
    const err = goRegexpError(schema.pattern);
    if (err) refuse(schema.pattern, err);
  }
  for (const key of Object.keys(schema.patternProperties ?? {})) {
    const err = goRegexpError(key);
    if (err) refuse(key, err, 'patternProperties key ');
  }
  for (const [kw, v] of Object.entries(schema)) {
    if (SCHEMA_MAPS.includes(kw) && v && typeof v === 'object') {
      for (const [k, sub] of Object.entries(v)) checkPatterns(sub, [...path, kw, k], fail);
    } else if (SCHEMA_LISTS.includes(kw) && Array.isArray(v)) {
      v.forEach((sub, i) => checkPatterns(sub, [...path, kw, String(i)], fail));
    } else if (SCHEMA_ONE.includes(kw)) {
      checkPatterns(v, [...path, kw], fail);
    }
  }
}

// The 2020-12 keywords whose values are subschemas: a map of them, a list
// of them, or one. Others (const, enum, default, examples) hold data.
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
const SCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SCHEMA_ONE = ['items', 'additionalProperties', 'unevaluatedProperties', 'unevaluatedItems', 'contains', 'propertyNames', 'not', 'if', 'then', 'else', 'contentSchema'];

// goRegexpError is Go's regexp.Compile error for pattern, without the
// Go type's prefix, or '' when Go compiles it. re2js parses as Go's
// regexp/syntax does (Perl flags), with Go's messages; the two places
// where it is more or less lenient than Go 1.26 are handled here.
export function goRegexpError(pattern) {
  try {
    RE2JS.compile(pattern);
  } catch (err) {
    // Go allows a capture name twice; re2js does not. Unique names leave
    // every other rule as it was.
    if (!/duplicate capture group name/.test(err.message)) return err.message;
    let n = 0;
    return goRegexpError(pattern.replace(/\(\?P?<[A-Za-z0-9_]+>/g, () => `(?<g${n++}>`));
  }
  const unknown = unknownProperty(pattern);
  return unknown ? `error parsing regexp: invalid character class range: \`${unknown}\`` : '';
}

// GO_LACKS are the \p names re2js knows and Go 1.26's unicode tables do
// not (its Categories and Scripts): binary properties, and the scripts of
// Unicode 16 and later.
const GO_LACKS = new Set([
  'ASCII_Hex_Digit', 'Alphabetic', 'Dash', 'Emoji', 'Emoji_Component', 'Emoji_Modifier', 'Emoji_Modifier_Base',
  'Emoji_Presentation', 'Extended_Pictographic', 'Hex_Digit', 'Lowercase', 'Math', 'Quotation_Mark',
  'Terminal_Punctuation', 'Unknown', 'Uppercase', 'White_Space',
  'Beria_Erfe', 'Garay', 'Gurung_Khema', 'Kirat_Rai', 'Ol_Onal', 'Sidetic', 'Sunuwar', 'Tai_Yo', 'Todhri',
  'Tolong_Siki', 'Tulu_Tigalari',
]);

// unknownProperty returns the first \p{Name} or \P{Name} in pattern whose
// name is in GO_LACKS. A backslash always takes the next character, in a
// class too, and \Q…\E is literal text.
function unknownProperty(pattern) {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== '\\') continue;
    const next = pattern[i + 1];
    if (next === 'Q') {
      const end = pattern.indexOf('\\E', i + 2);
      if (end < 0) return '';
      i = end + 1;
    } else if (next === 'p' || next === 'P') {
      const m = pattern.slice(i).match(/^\\[pP]\{\^?([^}]*)\}/);
      if (m && GO_LACKS.has(m[1])) return m[0];
      i++;
    } else {
      i++;
    }
  }
  return '';
}

// checkTarget reports the references in tool's target that the gateway
// would refuse, and, with the Caddyfile's components (decl), a component
// or env name it does not declare.
function checkTarget(tool, fail, decl) {
  const target = tool.target;
  // A target not sent over HTTP (a client tool) holds no references.
  if (!TARGET_KINDS[target.type]?.http) return;
  if (decl && target.component !== undefined && !decl.components.has(target.component)) {
    const names = [...decl.components.keys()].sort();
    fail('target.component', `${target.type} target: component ${JSON.stringify(target.component)} is not declared in ${decl.caddyfile} ` +
      `(its toolgate blocks declare ${names.length ? names.join(', ') : 'none'}); declare it there with \`component ${target.component} <base_url>\`, or name a declared one`);
  }
  const refs = [];
  const parse = (field, text) => {
    const r = parseTemplate(text);
    if (r.error) fail(field, `${target.type} target: ${r.error}`);
    else refs.push(...r.refs.map((ref) => ({ ...ref, field })));
  };
  parse(target.type === 'app' ? 'target.path' : 'target.url', target.type === 'app' ? target.path : target.url);
  for (const key of ['query', 'headers']) {
    for (const [k, v] of Object.entries(target[key] ?? {})) parse(`target.${key}.${k}`, v);
  }
  if (target.body !== undefined) bodyStrings(target.body, 'target.body', parse);

  const schema = tool.input_schema;
  const props = Object.keys(schema.properties ?? {});
  const patterns = Object.keys(schema.patternProperties ?? {});
  for (const ref of refs) {
    if (ref.root === 'connection') {
      // As dispatch's checkConnections: a user's token goes in a url
      // target's header or query value, and nowhere else. Whether the
      // connection is declared is the gateway's to say, at load.
      if (!/^target\.(query|headers)\./.test(ref.field)) {
        fail(ref.field, `${target.type} target: ${ref.text}: a connection's token goes in a header or a query value of a url target, never in its URL or body`);
      } else if (target.type !== 'url') {
        fail(ref.field, `${target.type} target: ${ref.text}: a connection's token goes only to a url target; a component gets the identity token`);
      }
      continue;
    }
    if (ref.root === 'env') {
      if (target.component === undefined) {
        fail(ref.field, `${target.type} target: ${ref.text} needs a component whose env declares it; name one with component`);
      } else if (decl && decl.components.has(target.component) && !decl.components.get(target.component).has(ref.path[0])) {
        fail(ref.field, `${target.type} target: ${ref.text}: component ${JSON.stringify(target.component)} declares no env ${ref.path[0]} in ${decl.caddyfile}; ` +
          `add \`env ${ref.path[0]} <value>\` to its component block`);
      }
      continue;
    }
    // As internal/manifest's checkInputRefs: only a closed top-level
    // object makes a reference that no property admits unresolvable.
    const name = ref.path[0];
    if (name === undefined || schema.additionalProperties !== false) continue;
    if (props.includes(name) || patterns.some((p) => matches(p, name))) continue;
    fail(ref.field, `${ref.text} can never resolve: input_schema allows no property ${JSON.stringify(name)} (it allows ${props.length ? props.join(', ') : 'none'})`);
  }
}

// matches reports whether Go's regexp pattern finds a match in name; a
// pattern Go cannot read counts as a match, as in the gateway.
function matches(pattern, name) {
  try {
    return RE2JS.compile(pattern).test(name);
  } catch {
    return true;
  }
}

// bodyStrings calls parse with every string in a body (not its keys),
// named as the compiler names body fields.
function bodyStrings(v, where, parse) {
  if (typeof v === 'string') parse(where, v);
  else if (Array.isArray(v)) v.forEach((item, i) => bodyStrings(item, `${where}[${i}]`, parse));
  else if (v && typeof v === 'object') for (const [k, item] of Object.entries(v)) bodyStrings(item, `${where}.${k}`, parse);
}

// parseTemplate is internal/refs' Parse: it returns the references in s,
// or the error the gateway gives for it. "$${" is a literal "${".
export function parseTemplate(s) {
  const refs = [];
  for (let i = 0; i < s.length; ) {
    if (s.startsWith('$${', i)) {
      i += 3;
      continue;
    }
    if (!s.startsWith('${', i)) {
      i++;
      continue;
    }
    const end = s.indexOf('}', i);
    if (end < 0) return { error: `unterminated reference at offset ${Buffer.byteLength(s.slice(0, i))} in ${JSON.stringify(s)}` };
    const ref = parseRef(s.slice(i, end + 1));
    if (ref.error) return ref;
    refs.push(ref);
    i = end + 1;
  }
  return { refs };
}

function parseRef(text) {
  const inner = text.slice(2, -1);
  if (inner === '') return { error: `empty reference ${text}` };
  const segs = inner.split('.');
  const bad = segs.find((seg) => !/^[A-Za-z0-9_-]+$/.test(seg));
  if (bad !== undefined) return { error: `invalid reference ${text}: bad segment ${JSON.stringify(bad)}` };
  switch (segs[0]) {
    case 'input':
      return { root: 'input', path: segs.slice(1), text };
    case 'env':
      if (segs.length !== 2) return { error: `invalid reference ${text}: want \${env.NAME}` };
      return { root: 'env', path: segs.slice(1), text };
    case 'connection':
      if (segs.length !== 2) return { error: `invalid reference ${text}: want \${connection.NAME}` };
      return { root: 'connection', path: segs.slice(1), text };
  }
  return { error: `unknown reference ${text}: the root must be input, env or connection` };
}

// Unit tests for the playground's form plan and how it reads what a person
// typed (form.js's pure half; the DOM half runs in the browser test,
// examples/browser/playground.test.mjs). Run: node --test
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { plan, valueOf, prefill, htmlPattern, rfc3339, MAX_DEPTH } from './form.js';

// The example's share_bookmark schema, which the browser test drives.
const share = {
  type: 'object',
  properties: {
    id: { type: 'string', pattern: '^b[0-9]+$' },
    with: {
      type: 'object',
      properties: { email: { type: 'string', format: 'email' }, note: { type: 'string', maxLength: 200 } },
      required: ['email'],
    },
    permission: { type: 'string', enum: ['view', 'comment'], default: 'view' },
    expiresInDays: { type: 'integer', minimum: 1, maximum: 90 },
    notify: { type: 'boolean' },
  },
  required: ['id', 'with'],
};

/** byPath finds a field by its dotted path. */
function byPath(root, path) {
  if (root.path.join('.') === path) return root;
  for (const c of root.children ?? []) {
    const f = byPath(c, path);
    if (f) return f;
  }
}

/** read reads a plan with raw values given by dotted path; anything else is untouched. */
function read(root, raws) {
  return valueOf(root, (f) => {
    const k = f.path.join('.');
    const given = Object.hasOwn(raws, k);
    if (f.kind === 'checkbox') return given ? { checked: raws[k], dirty: true } : { checked: f.checked, dirty: false };
    if (f.kind === 'select') return given ? raws[k] : f.selected;
    return given ? raws[k] : '';
  });
}

test('each schema type becomes its field', () => {
  const p = plan(share);
  assert.equal(p.kind, 'object');
  assert.deepEqual(p.children.map((f) => [f.name, f.kind]), [
    ['id', 'text'], ['with', 'object'], ['permission', 'select'], ['expiresInDays', 'number'], ['notify', 'checkbox'],
  ]);
  assert.deepEqual(byPath(p, 'id').attrs, { pattern: '^b[0-9]+$' });
  assert.equal(byPath(p, 'with.email').inputType, 'email');
  assert.deepEqual(byPath(p, 'with.note').attrs, { maxlength: '200' });
  assert.deepEqual(byPath(p, 'expiresInDays').attrs, { step: '1', min: '1', max: '90' });
  // Optional with a default: "not set" first, the default selected.
  const perm = byPath(p, 'permission');
  assert.deepEqual(perm.options.map((o) => o.value), [undefined, 'view', 'comment']);
  assert.equal(perm.selected, 1);
});

test('required is enforced only where every object around it is required', () => {
  const p = plan({
    type: 'object',
    required: ['a'],
    properties: {
      a: { type: 'object', required: ['x'], properties: { x: { type: 'string' } } },
      b: { type: 'object', required: ['y'], properties: { y: { type: 'string' } } },
    },
  });
  assert.equal(byPath(p, 'a.x').enforce, true);
  assert.equal(byPath(p, 'b').enforce, false);
  assert.equal(byPath(p, 'b.y').required, true);
  assert.equal(byPath(p, 'b.y').enforce, false);
  assert.deepEqual(read(p, {}), { a: { x: '' } });
  assert.deepEqual(read(p, { 'b.y': 'z' }), { a: { x: '' }, b: { y: 'z' } });
});

test('formats map to input types only where the browser value is the format', () => {
  const kinds = Object.fromEntries(
    ['email', 'uri', 'url', 'date', 'date-time', 'time', 'uri-reference', 'hostname', undefined].map((format) => [
      String(format), plan({ type: 'object', properties: { f: { type: 'string', format } } }).children[0].inputType,
    ]));
  assert.deepEqual(kinds, {
    email: 'email', uri: 'url', url: 'url', date: 'date', 'date-time': 'datetime-local',
    time: 'text', 'uri-reference': 'text', hostname: 'text', undefined: 'text',
  });
});

test('what no field can show is raw JSON', () => {
  const p = plan({
    type: 'object',
    properties: {
      one: { oneOf: [{ type: 'string' }, { type: 'integer' }] },
      any: { anyOf: [{ type: 'string' }] },
      ref: { $ref: '#/$defs/x' },
      objs: { type: 'array', items: { type: 'object', properties: {} } },
      free: { type: 'object' },
      nullable: { type: ['string', 'null'] },
      none: {},
      boolSchema: true,
      emptyEnum: { enum: [] },
      tags: { type: 'array', items: { type: 'string' } },
    },
  });
  assert.deepEqual(p.children.map((f) => [f.name, f.kind]), [
    ['one', 'json'], ['any', 'json'], ['ref', 'json'], ['objs', 'json'], ['free', 'json'], ['nullable', 'json'],
    ['none', 'json'], ['boolSchema', 'json'], ['emptyEnum', 'json'], ['tags', 'list'],
  ]);
  // A whole schema that is not an object with properties is one field, "input".
  for (const s of [{}, { type: 'string' }, { oneOf: [] , properties: {} }, null, true]) {
    const r = plan(s);
    assert.equal(r.kind, 'json');
    assert.equal(r.name, 'input');
  }
});

test('objects deeper than MAX_DEPTH are raw JSON', () => {
  let s = { type: 'string' };
  for (let i = 0; i < MAX_DEPTH + 3; i++) s = { type: 'object', properties: { n: s } };
  let f = plan(s);
  let depth = 0;
  while (f.kind === 'object') {
    f = f.children[0];
    depth++;
  }
  assert.equal(f.kind, 'json');
  assert.equal(depth, MAX_DEPTH);
});

test('the input is what was typed, and no more', () => {
  const p = plan(share);
  // Nothing typed: the required fields are there, empty; the enum's default is kept.
  assert.deepEqual(read(p, {}), { id: '', with: { email: '' }, permission: 'view' });
  assert.deepEqual(
    read(p, { id: 'b1', 'with.email': 'x@example.com', 'with.note': 'for you', permission: 2, expiresInDays: '7', notify: true }),
    { id: 'b1', with: { email: 'x@example.com', note: 'for you' }, permission: 'comment', expiresInDays: 7, notify: true });
  // "not set" leaves the enum out; an unchecked box a person touched is false.
  assert.deepEqual(read(p, { id: 'b1', 'with.email': 'e', permission: 0, notify: false }),
    { id: 'b1', with: { email: 'e' }, notify: false });
});

test('numbers, lists and JSON are parsed; what cannot be is an error naming the field', () => {
  const p = plan({
    type: 'object',
    properties: {
      n: { type: 'number' },
      i: { type: 'integer' },
      nums: { type: 'array', items: { type: 'number' } },
      flags: { type: 'array', items: { type: 'boolean' } },
      tags: { type: 'array', items: { type: 'string' } },
      raw: {},
      deep: { type: 'object', properties: { raw: {} } },
    },
  });
  assert.deepEqual(read(p, { n: '1.5', i: '-3', nums: '1, 2.5,,', flags: 'true,false', tags: ' a , b c ,', raw: '{"k":[1]}' }),
    { n: 1.5, i: -3, nums: [1, 2.5], flags: [true, false], tags: ['a', 'b c'], raw: { k: [1] } });
  assert.deepEqual(read(p, { raw: 'null' }), { raw: null });
  assert.deepEqual(read(p, { raw: '   ' }), {});
  assert.throws(() => read(p, { i: '1.5' }), /^Error: i: "1.5" is not an integer$/);
  assert.throws(() => read(p, { n: 'abc' }), /^Error: n: "abc" is not a number$/);
  assert.throws(() => read(p, { nums: '1, x' }), /^Error: nums: "x" is not a number$/);
  assert.throws(() => read(p, { flags: 'yes' }), /^Error: flags: "yes" is not true or false$/);
  assert.throws(() => read(p, { 'deep.raw': '{bad' }), /^Error: deep\.raw: not valid JSON/);
  assert.throws(() => read(plan({}), { input: '[' }), /^Error: input: not valid JSON/);
  assert.deepEqual(read(plan({}), { input: '[1]' }), [1]);
});

test('an enum keeps its values\' types; a required one has no "not set"', () => {
  const p = plan({ type: 'object', required: ['e'], properties: { e: { enum: [1, true, null, 'x', { a: 1 }] } } });
  const e = p.children[0];
  assert.deepEqual(e.options.map((o) => o.label), ['1', 'true', 'null', 'x', '{"a":1}']);
  assert.equal(e.selected, 0);
  for (const [i, want] of [[0, 1], [1, true], [2, null], [4, { a: 1 }]]) assert.deepEqual(read(p, { e: i }), { e: want });
});

test('a property named __proto__ is a key, not a prototype', () => {
  const p = plan(JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"},"constructor":{"type":"string"}}}'));
  const v = read(p, JSON.parse('{"__proto__":"x","constructor":"y"}'));
  assert.equal(Object.getPrototypeOf(v), Object.prototype);
  assert.equal(JSON.stringify(v), '{"__proto__":"x","constructor":"y"}');
});

test('html patterns: only those anchored at both ends', () => {
  assert.equal(htmlPattern('^b[0-9]+$'), '^b[0-9]+$');
  assert.equal(htmlPattern('^a\\\\$'), '^a\\\\$'); // an escaped backslash, then the anchor
  assert.equal(htmlPattern('^a\\$'), undefined); // a literal dollar
  assert.equal(htmlPattern('b[0-9]+'), undefined);
  assert.equal(htmlPattern('^b'), undefined);
  assert.equal(htmlPattern(5), undefined);
  // Valid in a schema but not under the "v" flag browsers compile the
  // attribute with: Zod's email pattern (an unescaped "-" in a class).
  const zodEmail = "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$";
  assert.equal(htmlPattern(zodEmail), undefined);
  assert.equal(htmlPattern('^[a-z]{2,}$'), '^[a-z]{2,}$');
});

test('datetime-local values become RFC 3339 with the local offset', () => {
  assert.equal(rfc3339('2025-01-31T09:30', 0), '2025-01-31T09:30:00Z');
  assert.equal(rfc3339('2025-01-31T09:30:15', -60), '2025-01-31T09:30:15+01:00');
  assert.equal(rfc3339('2025-07-01T09:30', 330), '2025-07-01T09:30:00-05:30');
  assert.equal(rfc3339('2025-01-31T09:30', -345), '2025-01-31T09:30:00+05:45');
});

test('prefill: the fields read back exactly the value they were given', () => {
  const p = plan(share);
  for (const value of [
    { id: 'b1', with: { email: 'ana@example.com' } },
    { id: 'b1', with: { email: 'ana@example.com', note: 'a, b' }, permission: 'comment', expiresInDays: 7, notify: false },
    { with: { email: 'ana@example.com' }, id: 'b22', notify: true }, // key order does not matter
  ]) {
    const raws = prefill(p, value);
    assert.ok(raws, JSON.stringify(value));
    assert.deepEqual(valueOf(p, (f) => raws.get(f)), value);
  }
  const raws = prefill(p, { id: 'b1', with: { email: 'e@x.example' }, expiresInDays: 7, notify: false });
  assert.equal(raws.get(byPath(p, 'expiresInDays')), '7');
  assert.deepEqual(raws.get(byPath(p, 'notify')), { checked: false, dirty: true });
  // An optional enum left out is "not set", not its default.
  assert.equal(raws.get(byPath(p, 'permission')), 0);
});

test('prefill: lists, raw JSON and a schema with no fields', () => {
  const schema = {
    type: 'object',
    properties: { tags: { type: 'array', items: { type: 'string' } }, ns: { type: 'array', items: { type: 'integer' } }, any: {} },
  };
  const p = plan(schema);
  const value = { tags: ['a', 'b c'], ns: [1, 2], any: { deep: [1, { x: '<b>' }] } };
  const raws = prefill(p, value);
  assert.equal(raws.get(byPath(p, 'tags')), 'a, b c');
  assert.equal(raws.get(byPath(p, 'ns')), '1, 2');
  assert.deepEqual(valueOf(p, (f) => raws.get(f)), value);
  const whole = plan(undefined);
  assert.equal(prefill(whole, [1, 'two']).get(whole), '[\n  1,\n  "two"\n]');
});

test('prefill: what the fields cannot hold exactly is refused', () => {
  const p = plan(share);
  for (const value of [
    { id: 'b1', with: { email: 'e@x.example' }, extra: 1 }, // a property the schema does not name
    { id: 'b1', with: { email: 'e@x.example' }, expiresInDays: '7' }, // a string in a number field
    { id: 'b1', with: { email: 'e@x.example' }, notify: 'yes' },
    { id: 'b1', with: { email: 'e@x.example' }, permission: 'admin' }, // not an option
    { id: 'b1\nb2', with: { email: 'e@x.example' } }, // a one-line field drops the line break
    { id: 'b1', with: { email: ' e@x.example' } }, // an email field trims
    { id: 'b1', with: { email: 'e@x.example', note: '' } }, // an empty optional string would be left out
    { with: { email: 'e@x.example' } }, // a required string missing would be sent as ""
    { id: 'b1', with: 'e@x.example' },
    [],
    'b1',
  ]) {
    assert.equal(prefill(p, value), null, JSON.stringify(value));
  }
  const lists = plan({ type: 'object', properties: { tags: { type: 'array', items: { type: 'string' } } } });
  for (const tags of [['a,b'], [' a'], [''], [1], []]) assert.equal(prefill(lists, { tags }), null, JSON.stringify(tags));
});

// Unit tests for the page context registry (ReadableRegistry), the SSE parser
// and the result body mapping (resultBody). Run: node --test
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  ReadableRegistry, SSEParser, resultBody, renderedBytes, tokenSubject,
  MAX_READABLE_ITEMS, MAX_READABLE_BYTES, READABLE_NAME_PATTERN,
} from './client.js';

const names = (reg) => reg.snapshot().items.map((i) => i.name);
const bytes = (s) => Buffer.byteLength(s, 'utf8');

test('limits are the spec values', () => {
  assert.equal(MAX_READABLE_ITEMS, 32);
  assert.equal(MAX_READABLE_BYTES, 4096);
  assert.ok(READABLE_NAME_PATTERN.test('a'));
});

test('valid names', () => {
  const reg = new ReadableRegistry();
  for (const n of ['a', 'Z9', 'lesson', 'a_b', 'a.b', 'a:b', 'a-b', '_.:-', '0', 'x'.repeat(64)]) {
    reg.set(n, 1);
  }
  assert.equal(reg.size, 10);
});

test('invalid names throw TypeError', () => {
  const reg = new ReadableRegistry();
  const bad = ['', 'x'.repeat(65), 'a b', ' a', 'a\n', 'é', 'ü', '名字', '😀', 'a/b', 'a$', 'a\u0000', 'a,b', 'a"b',
    undefined, null, 1, {}, ['a']];
  for (const n of bad) {
    assert.throws(() => reg.set(n, 'v'), TypeError, `name ${JSON.stringify(n)}`);
  }
  assert.equal(reg.size, 0);
});

test('valid values', () => {
  const reg = new ReadableRegistry();
  const cases = [
    ['s', 'text', 'text'],
    ['empty', '', ''],
    ['n', 83, 83],
    ['neg', -1.5, -1.5],
    ['t', true, true],
    ['nul', null, null],
    ['o', { positionSeconds: 83 }, { positionSeconds: 83 }],
    ['a', [1, 'x', null], [1, 'x', null]],
    ['nested', { a: { b: [{ c: [true, { d: 'e' }] }] } }, { a: { b: [{ c: [true, { d: 'e' }] }] } }],
    ['date', new Date(0), '1970-01-01T00:00:00.000Z'],
  ];
  for (const [n, v] of cases) reg.set(n, v);
  assert.deepEqual(reg.snapshot().items, cases.map(([name, , value]) => ({ name, value })));
});

test('shared (non-cyclic) references are fine', () => {
  const reg = new ReadableRegistry();
  const shared = { x: 1 };
  reg.set('dag', { a: shared, b: shared, c: [shared, shared] });
  assert.deepEqual(reg.snapshot().items[0].value, { a: { x: 1 }, b: { x: 1 }, c: [{ x: 1 }, { x: 1 }] });
});

test('invalid values throw TypeError and keep the previous value', () => {
  const cyclic = { a: 1 };
  cyclic.self = cyclic;
  const cyclicArray = [1];
  cyclicArray.push(cyclicArray);
  const bad = {
    undefined: undefined,
    function: () => 1,
    symbol: Symbol('s'),
    bigint: 10n,
    NaN: NaN,
    Infinity: Infinity,
    negInfinity: -Infinity,
    cyclic,
    cyclicArray,
    nestedFunction: { a: { f() {} } },
    nestedUndefined: { a: undefined },
    undefinedInArray: [1, undefined],
    holeInArray: [1, , 3], // eslint-disable-line no-sparse-arrays
    nestedSymbol: [Symbol('x')],
    nestedBigInt: { n: 1n },
    nestedNaN: [{ x: NaN }],
    toJSONUndefined: { toJSON: () => undefined },
  };
  for (const [label, value] of Object.entries(bad)) {
    const reg = new ReadableRegistry();
    reg.set('k', 'before');
    reg.set('other', 1);
    assert.throws(() => reg.set('k', value), TypeError, label);
    assert.deepEqual(reg.snapshot().items, [{ name: 'k', value: 'before' }, { name: 'other', value: 1 }], label);
    assert.throws(() => reg.set('fresh', value), TypeError, label);
    assert.equal(reg.size, 2, label);
  }
});

test('a bad name with a good value keeps the previous entries', () => {
  const reg = new ReadableRegistry();
  reg.set('a', 1);
  assert.throws(() => reg.set('a b', 2), TypeError);
  assert.deepEqual(reg.snapshot().items, [{ name: 'a', value: 1 }]);
});

test('updating keeps position; remove and set again puts last', () => {
  const reg = new ReadableRegistry();
  reg.set('a', 1);
  reg.set('b', 2);
  reg.set('c', 3);
  reg.set('a', 10);
  assert.deepEqual(reg.snapshot().items, [{ name: 'a', value: 10 }, { name: 'b', value: 2 }, { name: 'c', value: 3 }]);
  assert.equal(reg.remove('a'), true);
  assert.equal(reg.remove('a'), false);
  assert.equal(reg.remove('nope'), false);
  assert.deepEqual(names(reg), ['b', 'c']);
  reg.set('a', 11);
  assert.deepEqual(names(reg), ['b', 'c', 'a']);
});

test('values are captured when set, not when snapshotted', () => {
  const reg = new ReadableRegistry();
  const obj = { n: 1 };
  reg.set('o', obj);
  obj.n = 2;
  obj.f = () => {};
  const snap = reg.snapshot();
  assert.deepEqual(snap.items[0].value, { n: 1 });
  snap.items[0].value.n = 99;
  assert.deepEqual(reg.snapshot().items[0].value, { n: 1 });
});

test('no entries: empty snapshot', () => {
  assert.deepEqual(new ReadableRegistry().snapshot(), { items: [], dropped: [] });
});

test('32 items kept, the 33rd drops the oldest', () => {
  const reg = new ReadableRegistry();
  for (let i = 0; i < 32; i++) reg.set(`k${i}`, i);
  assert.deepEqual(reg.snapshot().dropped, []);
  assert.equal(reg.snapshot().items.length, 32);
  reg.set('k32', 32);
  reg.set('k33', 33);
  const snap = reg.snapshot();
  assert.deepEqual(snap.dropped, ['k0', 'k1']);
  assert.equal(snap.items.length, 32);
  assert.equal(snap.items[0].name, 'k2');
  assert.equal(snap.items[31].name, 'k33');
});

test('the item limit follows registration order, not name order', () => {
  const reg = new ReadableRegistry();
  for (let i = 0; i < 33; i++) reg.set(`k${i}`, i);
  reg.set('k0', 'updated'); // keeps its (oldest) position
  assert.deepEqual(reg.snapshot().dropped, ['k0']);
  reg.remove('k1');
  reg.set('k1', 'again'); // now newest; 33 entries
  assert.deepEqual(reg.snapshot().dropped, ['k0']);
  reg.set('k99', 1);
  assert.deepEqual(reg.snapshot().dropped, ['k0', 'k2']);
});

test('exactly 4096 bytes is kept; one more byte drops the oldest', () => {
  const reg = new ReadableRegistry();
  reg.set('a', 'x'.repeat(2047)); // 1 + 2047 = 2048
  reg.set('b', 'y'.repeat(2047)); // 2048
  assert.deepEqual(reg.snapshot().dropped, []);
  reg.set('b', 'y'.repeat(2048));
  const snap = reg.snapshot();
  assert.deepEqual(snap.dropped, ['a']);
  assert.deepEqual(snap.items.map((i) => i.name), ['b']);
});

test('bytes are UTF-8: é is 2, € is 3, 😀 is 4', () => {
  for (const [ch, size] of [['é', 2], ['€', 3], ['😀', 4]]) {
    assert.equal(bytes(ch), size);
    const fit = Math.floor(4095 / size);
    const rest = 4095 - fit * size; // filler so name (1) + value hit exactly 4096
    const reg = new ReadableRegistry();
    reg.set('a', ch.repeat(fit) + 'x'.repeat(rest));
    assert.deepEqual(reg.snapshot().dropped, [], ch);
    reg.set('a', ch.repeat(fit) + 'x'.repeat(rest + 1));
    assert.deepEqual(reg.snapshot(), { items: [], dropped: ['a'] }, ch);
    // 2048 characters of é are 4096 bytes on their own: over with the name.
    const reg2 = new ReadableRegistry();
    reg2.set('z', ch.repeat(Math.ceil(4096 / size)));
    assert.deepEqual(reg2.snapshot().dropped, ['z'], ch);
  }
});

test('multi-byte names count too', () => {
  // names are ASCII by rule, so only values carry multi-byte characters; the
  // name's own bytes still count.
  const reg = new ReadableRegistry();
  const name = 'n'.repeat(64);
  reg.set(name, '€'.repeat(1344)); // 64 + 4032 = 4096
  assert.deepEqual(reg.snapshot().dropped, []);
  reg.set(name, '€'.repeat(1344) + 'x');
  assert.deepEqual(reg.snapshot().dropped, [name]);
});

test('JSON values count as compact JSON with keys in the order received', () => {
  const value = { zeta: 1, alpha: [1, 2, { b: 'é', a: null }] };
  const text = '{"zeta":1,"alpha":[1,2,{"b":"é","a":null}]}';
  assert.equal(JSON.stringify(value), text);
  const reg = new ReadableRegistry();
  reg.set('k', value);
  reg.set('pad', 'p'.repeat(4096 - 1 - bytes(text) - 3)); // exactly full
  assert.deepEqual(reg.snapshot().dropped, []);
  reg.set('pad', 'p'.repeat(4096 - 1 - bytes(text) - 3 + 1));
  assert.deepEqual(reg.snapshot().dropped, ['k']);
  // key order kept in the value handed out
  const reg2 = new ReadableRegistry();
  reg2.set('k', value);
  assert.equal(JSON.stringify(reg2.snapshot().items[0].value), text);
});

test('a string value counts as is, not as a JSON string with quotes', () => {
  const reg = new ReadableRegistry();
  reg.set('s', 'a"b'.padEnd(4095, 'x')); // 1 + 4095 = 4096 raw; quoted/escaped would be more
  assert.deepEqual(reg.snapshot().dropped, []);
  reg.set('s', '"'.repeat(4095));
  assert.deepEqual(reg.snapshot().dropped, []);
});

test('numbers and nested strings count as JSON text', () => {
  const reg = new ReadableRegistry();
  reg.set('n', 1e21); // "1e+21": 5 bytes
  reg.set('q', ['"']); // ["\""]: 6 bytes
  reg.set('pad', 'p'.repeat(4096 - (1 + 5) - (1 + 6) - 3));
  assert.deepEqual(reg.snapshot().dropped, []);
  reg.set('q', ['""']); // ["\"\""]: two more bytes
  assert.deepEqual(reg.snapshot().dropped, ['n']);
});

test('both limits at once: drop oldest until both hold', () => {
  const reg = new ReadableRegistry();
  reg.set('big0', 'x'.repeat(2000));
  reg.set('big1', 'x'.repeat(2000));
  for (let i = 0; i < 34; i++) reg.set(`s${i}`, i); // 34 small items: over the count
  // count alone would drop 4 (big0, big1, s0, s1): bytes then hold too
  let snap = reg.snapshot();
  assert.deepEqual(snap.dropped, ['big0', 'big1', 's0', 's1']);
  assert.equal(snap.items.length, 32);

  const reg2 = new ReadableRegistry();
  for (let i = 0; i < 34; i++) reg2.set(`s${i}`, i);
  reg2.set('big', 'x'.repeat(4000)); // bytes need many more drops than count
  snap = reg2.snapshot();
  const total = snap.items.reduce((n, i) => n + bytes(i.name) + bytes(typeof i.value === 'string' ? i.value : JSON.stringify(i.value)), 0);
  assert.ok(total <= 4096 && snap.items.length <= 32);
  assert.equal(snap.items.at(-1).name, 'big');
  assert.equal(snap.dropped[0], 's0');
  assert.equal(snap.dropped.length + snap.items.length, 35);
  // the kept ones are the newest, contiguous
  assert.deepEqual(snap.items.map((i) => i.name), [...Array(35).keys()].map((i) => (i < 34 ? `s${i}` : 'big')).slice(snap.dropped.length));
  // one fewer drop would break the byte limit
  const lastDropped = snap.dropped.at(-1);
  assert.ok(total + bytes(lastDropped) + bytes(lastDropped.slice(1)) > 4096);
});

test('oldest dropped even when a newer item is the big one: all dropped', () => {
  const reg = new ReadableRegistry();
  reg.set('small', 'a');
  reg.set('huge', 'x'.repeat(5000));
  assert.deepEqual(reg.snapshot(), { items: [], dropped: ['small', 'huge'] });
});

test('the registry is unchanged by a snapshot that dropped', () => {
  const reg = new ReadableRegistry();
  for (let i = 0; i < 40; i++) reg.set(`k${i}`, i);
  const first = reg.snapshot();
  assert.equal(first.dropped.length, 8);
  assert.equal(reg.size, 40);
  assert.deepEqual(reg.snapshot(), first);
  for (let i = 0; i < 8; i++) reg.remove(`k${i + 8}`);
  const after = reg.snapshot();
  assert.deepEqual(after.dropped, []);
  assert.equal(after.items[0].name, 'k0');
});

// --- SSE parser ---

const parseAll = (...chunks) => {
  const p = new SSEParser();
  return chunks.flatMap((c) => p.push(c));
};

test('sse: a simple event', () => {
  assert.deepEqual(parseAll('event: call\ndata: {"callId":"c1"}\n\n'), [{ event: 'call', data: '{"callId":"c1"}', id: '' }]);
});

test('sse: multi-line data joined with LF', () => {
  assert.deepEqual(parseAll('event: call\ndata: line1\ndata:line2\ndata:  two spaces\n\n'), [
    { event: 'call', data: 'line1\nline2\n two spaces', id: '' },
  ]);
});

test('sse: CRLF and CR line endings', () => {
  assert.deepEqual(parseAll('event: call\r\ndata: a\r\ndata: b\r\n\r\nevent: x\rdata: c\r\r'), [
    { event: 'call', data: 'a\nb', id: '' },
    { event: 'x', data: 'c', id: '' },
  ]);
});

test('sse: CRLF split between chunks is one line end', () => {
  assert.deepEqual(parseAll('data: a\r', '\n', 'data: b\r', '\n\r', '\n'), [{ event: 'message', data: 'a\nb', id: '' }]);
  // an empty chunk (a decoder holding half a character) between CR and LF
  assert.deepEqual(parseAll('data: a\r', '', '\ndata: b\n', '', '\n'), [{ event: 'message', data: 'a\nb', id: '' }]);
});

test('sse: comments and keep-alives ignored', () => {
  assert.deepEqual(parseAll(': ping\n\n: ping\nevent: call\n: in between\ndata: x\n\n:\n\n'), [
    { event: 'call', data: 'x', id: '' },
  ]);
});

test('sse: events split across chunks at any point', () => {
  const stream = ': ping\n\nevent: call\ndata: {"callId":"c1","input":{"q":"é€😀"}}\n\nevent: call\r\ndata: 2\r\n\r\n';
  const whole = parseAll(stream);
  assert.equal(whole.length, 2);
  for (let i = 0; i <= stream.length; i++) {
    assert.deepEqual(parseAll(stream.slice(0, i), stream.slice(i)), whole, `split at ${i}`);
  }
  assert.deepEqual(parseAll(...stream), whole, 'one character at a time');
});

test('sse: an event without its blank line is not emitted until complete', () => {
  const p = new SSEParser();
  assert.deepEqual(p.push('event: call\ndata: x\n'), []);
  assert.deepEqual(p.push('data: y'), []);
  assert.deepEqual(p.push('\n'), []);
  assert.deepEqual(p.push('\n'), [{ event: 'call', data: 'x\ny', id: '' }]);
  assert.deepEqual(p.push('event: call\ndata: never finished'), []);
});

test('sse: event type resets after dispatch; default is message', () => {
  assert.deepEqual(parseAll('event: call\ndata: 1\n\ndata: 2\n\n'), [
    { event: 'call', data: '1', id: '' },
    { event: 'message', data: '2', id: '' },
  ]);
});

test('sse: no data, no event; empty data line is an empty event', () => {
  assert.deepEqual(parseAll('event: call\n\n'), []);
  assert.deepEqual(parseAll('data\n\n'), [{ event: 'message', data: '', id: '' }]);
  assert.deepEqual(parseAll('data:\n\n'), [{ event: 'message', data: '', id: '' }]);
});

test('sse: unknown fields ignored, colon in value kept, id carried', () => {
  assert.deepEqual(parseAll('retry: 10\nfoo: bar\nid: 7\nevent: call\ndata: a: b:c\n\ndata: z\n\n'), [
    { event: 'call', data: 'a: b:c', id: '7' },
    { event: 'message', data: 'z', id: '7' },
  ]);
});

// --- result bodies (resultBody) ---

test('result body: string, value, undefined', () => {
  assert.equal(resultBody('plain "text"'), '{"result":"plain \\"text\\""}');
  assert.equal(resultBody(''), '{"result":""}');
  assert.equal(resultBody({ z: 1, a: [true, null] }), '{"result":{"z":1,"a":[true,null]}}');
  assert.equal(resultBody(0), '{"result":0}');
  assert.equal(resultBody(null), '{"result":null}');
  assert.equal(resultBody(NaN), '{"result":null}'); // as JSON.stringify serializes it
  assert.equal(resultBody(undefined), '{}');
  assert.deepEqual(JSON.parse(resultBody({ b: 2, a: 1 })), { result: { b: 2, a: 1 } });
});

test('result body: unserializable values throw', () => {
  const cyclic = {};
  cyclic.c = cyclic;
  for (const v of [() => 1, Symbol('s'), 1n, cyclic, { n: 2n }]) {
    assert.throws(() => resultBody(v), TypeError);
  }
});

// The server's sizes (internal/pagecontext checks the same file): the page counts
// what toolgate renders, so both drop the same items.
const serverSizes = JSON.parse(readFileSync(new URL('../pagecontext/testdata/sizes.json', import.meta.url), 'utf8'));

test('values count as the server renders them', () => {
  assert.ok(serverSizes.length > 5);
  for (const { name, value, bytes: want } of serverSizes) {
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    assert.equal(bytes(name) + renderedBytes(text), want, `${name} ${JSON.stringify(value)}`);
    // and the registry drops at the same point
    const reg = new ReadableRegistry();
    reg.set(name, value);
    reg.set('pad', 'p'.repeat(MAX_READABLE_BYTES - want - 3));
    assert.deepEqual(reg.snapshot().dropped, [], name);
    reg.set('pad', 'p'.repeat(MAX_READABLE_BYTES - want - 3 + 1));
    assert.deepEqual(reg.snapshot().dropped, [name], name);
  }
});

test('rendered bytes: escapes, stripped format characters', () => {
  assert.equal(renderedBytes('<'.repeat(1023) + 'xxx'), 4095);
  assert.equal(renderedBytes('&'), 5);
  assert.equal(renderedBytes('\\'), 1);
  assert.equal(renderedBytes('\\u'), 6);
  assert.equal(renderedBytes('\\\u200bu'), 6, 'a dropped character does not part \\ from u');
  assert.equal(renderedBytes('\\\\u'), 7);
  assert.equal(renderedBytes('\u202a\u202e\u2066\u2069\u200b\u200f\u2060\ufeff\u061c\u{E0041}'), 0);
  assert.equal(renderedBytes('\ud800'), 3, 'a lone surrogate is sent as U+FFFD');
  const reg = new ReadableRegistry();
  reg.set('l', '<'.repeat(1023) + 'xxx'); // 1 + 4092 + 3 = 4096
  assert.deepEqual(reg.snapshot().dropped, []);
  reg.set('l', '<'.repeat(1023) + 'xxxx');
  assert.deepEqual(reg.snapshot().dropped, ['l']);
});

test('tokenSubject reads sub without verifying; anything else is no user', () => {
  const b64url = (x) => Buffer.from(x).toString('base64url');
  const jwt = (payload) => `${b64url('{"alg":"none"}')}.${b64url(payload)}.sig`;
  assert.equal(tokenSubject(jwt('{"sub":"u_1","thread":"th_1"}')), 'u_1');
  assert.equal(tokenSubject(jwt('{"sub":"Zoë 名"}')), 'Zoë 名');
  assert.equal(tokenSubject(jwt('{"sub":"a"}').replace(/=+/g, '')), 'a');
  for (const bad of ['', 'opaque', 'a.b.c', jwt('{"sub":1}'), jwt('[]'), jwt('null'), jwt('{}'), '..', 'a.%%%.c']) {
    assert.equal(tokenSubject(bad), '', bad);
  }
});

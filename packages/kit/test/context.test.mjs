// toolContext and isThreadToolInvocation on the three kinds of request a
// component may have: Node's IncomingMessage, a Fetch Request, and an
// Express-style request.

import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';

import { createHash } from 'node:crypto';

import { idempotencyKey, isThreadToolInvocation, toolContext, ToolContextError } from '@toolgate/kit';
import * as tools from '@toolgate/kit/tools';

// incoming sends the headers (name, value pairs; a name may repeat) to a
// real node:http server and returns the IncomingMessage it got.
async function incoming(pairs) {
  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const got = new Promise((resolve) =>
      server.once('request', (req, res) => {
        resolve(req);
        res.end();
      }),
    );
    const req = http.request({ host: '127.0.0.1', port: server.address().port, headers: ['Host', 'component.test', ...pairs.flat()], agent: false });
    req.end();
    const r = await got;
    await new Promise((resolve) => req.once('response', (res) => res.resume().once('end', resolve)));
    return r;
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

function fetchRequest(pairs) {
  const headers = new Headers();
  for (const [k, v] of pairs) headers.append(k, v);
  return new Request('http://component.test/tools/x', { method: 'POST', headers });
}

// Express reads req.get(name) from the lower-cased headers object; a
// framework may offer only get() or header(), so those alone are tried.
function expressStyle(pairs) {
  const h = {};
  for (const [k, v] of pairs) {
    const key = k.toLowerCase();
    h[key] = h[key] === undefined ? v : [].concat(h[key], v);
  }
  return { get: (name) => h[name.toLowerCase()] };
}
function headerStyle(pairs) {
  const { get } = expressStyle(pairs);
  return { header: get };
}

const kinds = {
  'IncomingMessage': incoming,
  'Fetch Request': async (pairs) => fetchRequest(pairs),
  'req.get': async (pairs) => expressStyle(pairs),
  'req.header': async (pairs) => headerStyle(pairs),
};

const H = 'Kazzle-Tool-Context';

test('both shapes of the header, from every kind of request', async (t) => {
  for (const [kind, make] of Object.entries(kinds)) {
    await t.test(kind, async () => {
      const thread = await make([[H, '{"source":"thread","threadId":"th_1"}']]);
      assert.deepEqual(toolContext(thread), { source: 'thread', threadId: 'th_1' });
      assert.equal(isThreadToolInvocation(thread), true);
      assert.equal(isThreadToolInvocation(toolContext(thread)), true);

      const api = await make([[H, ' {"source": "api"} ']]);
      assert.deepEqual(toolContext(api), { source: 'api' });
      assert.equal(isThreadToolInvocation(api), false);
      assert.equal(isThreadToolInvocation(toolContext(api)), false);

      // The header's name in any case.
      const lower = await make([['kazzle-tool-context', '{"threadId":"t","source":"thread"}']]);
      assert.deepEqual(toolContext(lower), { source: 'thread', threadId: 't' });
    });
  }
});

test('the @toolgate/kit/tools import path has toolContext and isThreadToolInvocation', () => {
  assert.equal(tools.toolContext, toolContext);
  assert.equal(tools.isThreadToolInvocation, isThreadToolInvocation);
});

test('refused: absent, twice, and anything toolgate would not send', async (t) => {
  const cases = [
    ['absent', [], 'missing', /^no Kazzle-Tool-Context header$/],
    ['sent twice', [[H, '{"source":"api"}'], [H, '{"source":"api"}']], 'malformed', /sent 2 times|not a JSON object/],
    ['not JSON', [[H, 'thread']], 'malformed', /not a JSON object/],
    ['an array', [[H, '[{"source":"api"}]']], 'malformed', /not a JSON object/],
    ['a string', [[H, '"api"']], 'malformed', /not a JSON object/],
    ['two objects', [[H, '{"source":"api"}{"source":"api"}']], 'malformed', /not a JSON object/],
    ['empty object', [[H, '{}']], 'malformed', /source is missing/],
    ['unknown source', [[H, '{"source":"cron"}']], 'malformed', /source "cron" is neither "thread" nor "api"/],
    ['source in another case', [[H, '{"Source":"api"}']], 'malformed', /unknown field "Source"/],
    ['unknown field', [[H, '{"source":"api","user":"u1"}']], 'malformed', /unknown field "user"/],
    ['null source', [[H, '{"source":null}']], 'malformed', /source must be a string/],
    ['numeric threadId', [[H, '{"source":"thread","threadId":7}']], 'malformed', /threadId must be a string/],
    ['thread without threadId', [[H, '{"source":"thread"}']], 'malformed', /a "thread" context needs a threadId/],
    ['thread with empty threadId', [[H, '{"source":"thread","threadId":""}']], 'malformed', /a "thread" context needs a threadId/],
    ['api with threadId', [[H, '{"source":"api","threadId":"t"}']], 'malformed', /an "api" context has no threadId/],
    ['api with empty threadId', [[H, '{"source":"api","threadId":""}']], 'malformed', /an "api" context has no threadId/],
    // JSON.parse would keep the last: "thread" would win over "api".
    ['duplicate source', [[H, '{"source":"api","source":"thread","threadId":"t"}']], 'malformed', /"source" is given twice/],
    ['duplicate by escape', [[H, '{"source":"thread","threadId":"a","thread\\u0049d":"b"}']], 'malformed', /"threadId" is given twice/],
    ['__proto__', [[H, '{"source":"api","__proto__":"x"}']], 'malformed', /unknown field "__proto__"/],
    ['over 4 KiB', [[H, `{"source":"thread","threadId":"${'t'.repeat(4100)}"}`]], 'malformed', /longer than 4096 bytes/],
  ];
  for (const [kind, make] of Object.entries(kinds)) {
    await t.test(kind, async () => {
      for (const [name, pairs, code, message] of cases) {
        const req = await make(pairs);
        assert.throws(
          () => toolContext(req),
          (err) => err instanceof ToolContextError && err.code === code && message.test(err.message),
          `${kind}: ${name}`,
        );
        assert.equal(isThreadToolInvocation(req), false, `${kind}: ${name}`);
      }
    });
  }
});

test('a thread context of exactly 4 KiB is read', () => {
  const head = '{"source":"thread","threadId":"';
  const value = head + 't'.repeat(4096 - head.length - 2) + '"}';
  assert.equal(value.length, 4096);
  assert.equal(toolContext(fetchRequest([[H, value]])).source, 'thread');
});

test('not a request is a TypeError, not a refusal', () => {
  assert.throws(() => toolContext({}), TypeError);
  assert.throws(() => isThreadToolInvocation({}), TypeError);
});

test('idempotencyKey: SHA-256 over the length-prefixed user, install and call id', () => {
  const msg = Buffer.from('\x00\x00\x00\x05alice\x00\x00\x00\x04in_1\x00\x00\x00\x07order-1', 'latin1');
  assert.equal(idempotencyKey('alice', 'in_1', 'order-1'), createHash('sha256').update(msg).digest('base64url'));
  // The value the Go kit's test pins too (apptools).
  assert.equal(idempotencyKey('alice', 'in_1', 'order-1').length, 43);
  assert.notEqual(idempotencyKey('alice', 'in_1', 'order-1'), idempotencyKey('bob', 'in_1', 'order-1'));
  assert.equal(idempotencyKey('alice', undefined, 'x'), idempotencyKey('alice', '', 'x'));
  assert.notEqual(idempotencyKey('alicein_1', '', 'x'), idempotencyKey('alice', 'in_1', 'x'));
  // Lengths in bytes, not UTF-16 units.
  const u = 'é';
  const m2 = Buffer.concat([Buffer.from([0, 0, 0, 2]), Buffer.from(u), Buffer.from([0, 0, 0, 0, 0, 0, 0, 1]), Buffer.from('x')]);
  assert.equal(idempotencyKey(u, '', 'x'), createHash('sha256').update(m2).digest('base64url'));
});

// A call a person approved (docs/governance.md, "Approvals"): the gateway
// adds "approval" after threadId, escaping <, > and & as Go does.
test('an approved call: the approval as sent, from every kind of request', async (t) => {
  const cases = [
    ['with a device, changed',
      '{"source":"thread","threadId":"th_1","approval":{"by":"u_1","device":"laptop-1","at":"2026-12-02T10:14:03Z","changed":true}}',
      { by: 'u_1', device: 'laptop-1', at: '2026-12-02T10:14:03Z', changed: true }],
    ['without a device, unchanged',
      '{"source":"thread","threadId":"th_1","approval":{"by":"u_1","at":"2026-12-02T10:14:03Z","changed":false}}',
      { by: 'u_1', at: '2026-12-02T10:14:03Z', changed: false }],
    ['more fractional digits than Go writes (RFC 3339 sets no bound)',
      '{"source":"thread","threadId":"th_1","approval":{"by":"u_1","at":"2026-12-02T10:14:03.1234567890Z","changed":false}}',
      { by: 'u_1', at: '2026-12-02T10:14:03.1234567890Z', changed: false }],
    ['nanoseconds',
      '{"source":"thread","threadId":"th_1","approval":{"by":"u_1","at":"2026-12-02T10:14:03.123456789Z","changed":false}}',
      { by: 'u_1', at: '2026-12-02T10:14:03.123456789Z', changed: false }],
    ['milliseconds and an offset, on a leap day',
      '{"source":"thread","threadId":"th_1","approval":{"by":"u_1","at":"2028-02-29T23:59:59.5+05:30","changed":true}}',
      { by: 'u_1', at: '2028-02-29T23:59:59.5+05:30', changed: true }],
    ['escaped as Go writes it, members in another order',
      '{"approval":{"changed":true,"at":"2026-12-02T10:14:03Z","device":"a\\u003cb","by":"u\\u0026co"},"threadId":"th_1","source":"thread"}',
      { by: 'u&co', device: 'a<b', at: '2026-12-02T10:14:03Z', changed: true }],
    ['an empty device, as sent',
      '{"source":"thread","threadId":"th_1","approval":{"by":"u_1","device":"","at":"2026-12-02T10:14:03Z","changed":true}}',
      { by: 'u_1', device: '', at: '2026-12-02T10:14:03Z', changed: true }],
  ];
  for (const [kind, make] of Object.entries(kinds)) {
    await t.test(kind, async () => {
      for (const [name, header, approval] of cases) {
        const req = await make([[H, header]]);
        const c = toolContext(req);
        assert.deepEqual(c, { source: 'thread', threadId: 'th_1', approval }, `${kind}: ${name}`);
        assert.equal(isThreadToolInvocation(req), true, `${kind}: ${name}`);
        assert.equal(isThreadToolInvocation(c), true, `${kind}: ${name}`);
      }
    });
  }
});

test('refused: an approval toolgate would not send', async (t) => {
  const at = '"at":"2026-12-02T10:14:03Z"';
  const ctx = (approval) => `{"source":"thread","threadId":"th_1","approval":${approval}}`;
  const withAt = (s) => ctx(`{"by":"u_1",${at},"changed":true${s}}`);
  const withTime = (time) => ctx(`{"by":"u_1","at":${JSON.stringify(time)},"changed":true}`);
  const cases = [
    ['an unknown member', withAt(',"note":"x"'), /approval: unknown field "note"/],
    ['__proto__', withAt(',"__proto__":{}'), /approval: unknown field "__proto__"/],
    ['by empty', ctx(`{"by":"",${at},"changed":true}`), /approval: by is empty$/],
    ['by missing', ctx(`{${at},"changed":true}`), /approval: by is missing/],
    ['by a number', ctx(`{"by":7,${at},"changed":true}`), /approval: by must be a string/],
    ['device null', withAt(',"device":null'), /approval: device must be a string/],
    ['device a number', withAt(',"device":1'), /approval: device must be a string/],
    ['at missing', ctx('{"by":"u_1","changed":true}'), /approval: at is missing/],
    ['at a number', ctx('{"by":"u_1","at":1764670443,"changed":true}'), /approval: at must be a string/],
    ['at not a date', withTime('yesterday'), /approval: at is not an RFC 3339 time: "/],
    ['at a date alone', withTime('2026-12-02'), /approval: at is not an RFC 3339 time: "/],
    ['at without a zone', withTime('2026-12-02T10:14:03'), /approval: at is not an RFC 3339 time: "/],
    ['at with a space for T', withTime('2026-12-02 10:14:03Z'), /approval: at is not an RFC 3339 time: "/],
    ['at in lower case', withTime('2026-12-02t10:14:03z'), /approval: at is not an RFC 3339 time: "/],
    ['at on a missing leap day', withTime('2026-02-29T10:14:03Z'), /approval: at is not an RFC 3339 time: "/],
    ['at in month 13', withTime('2026-13-02T10:14:03Z'), /approval: at is not an RFC 3339 time: "/],
    ['at on day 31 of a 30-day month', withTime('2026-11-31T10:14:03Z'), /approval: at is not an RFC 3339 time: "/],
    ['at hour 24', withTime('2026-12-02T24:00:00Z'), /approval: at is not an RFC 3339 time: "/],
    ['at a leap second', withTime('2026-12-31T23:59:60Z'), /approval: at is not an RFC 3339 time: "/],
    ['at with a dot and no digits', withTime('2026-12-02T10:14:03.Z'), /approval: at is not an RFC 3339 time: "/],
    ['at with a one-digit hour', withTime('2026-12-02T1:14:03Z'), /approval: at is not an RFC 3339 time: "/],
    ['at with a comma before the fraction', withTime('2026-12-02T10:14:03,5Z'), /approval: at is not an RFC 3339 time: "/],
    ['at with an offset minute of 60', withTime('2026-12-02T10:14:03+23:60'), /approval: at is not an RFC 3339 time: "/],
    ['at with an offset of 24 hours', withTime('2026-12-02T10:14:03+24:00'), /approval: at is not an RFC 3339 time: "/],
    ['at with a line after it', withTime('2026-12-02T10:14:03Z\n'), /approval: at is not an RFC 3339 time: "/],
    ['changed a string', ctx(`{"by":"u_1",${at},"changed":"true"}`), /approval: changed must be a boolean/],
    ['changed missing', ctx(`{"by":"u_1",${at}}`), /approval: changed is missing/],
    ['changed null', ctx(`{"by":"u_1",${at},"changed":null}`), /approval: changed must be a boolean/],
    ['approval null', ctx('null'), /approval: not a JSON object/],
    ['approval an array', ctx(`[{"by":"u_1",${at},"changed":true}]`), /approval: not a JSON object/],
    ['approval a string', ctx('"u_1"'), /approval: not a JSON object/],
    ['approval empty', ctx('{}'), /approval: by is missing/],
    // JSON.parse would keep the last: a second approval or by would win.
    ['approval twice', `{"source":"thread","threadId":"th_1","approval":{"by":"u_1",${at},"changed":false},"approval":{"by":"u_2",${at},"changed":true}}`,
      /"approval" is given twice/],
    ['by twice', ctx(`{"by":"u_1","by":"u_2",${at},"changed":true}`), /approval: "by" is given twice/],
    ['changed twice by escape', ctx(`{"by":"u_1",${at},"changed":true,"chang\\u0065d":false}`), /approval: "changed" is given twice/],
    ['approval with source api', `{"source":"api","approval":{"by":"u_1",${at},"changed":true}}`, /an "api" context has no approval: a person approves in a thread/],
    ['approval without a source', `{"approval":{"by":"u_1",${at},"changed":true}}`, /source is missing/],
    ['approval with a thread and no threadId', `{"source":"thread","approval":{"by":"u_1",${at},"changed":true}}`, /a "thread" context needs a threadId/],
  ];
  for (const [kind, make] of Object.entries(kinds)) {
    await t.test(kind, async () => {
      for (const [name, header, message] of cases) {
        const req = await make([[H, header]]);
        assert.throws(
          () => toolContext(req),
          (err) => err instanceof ToolContextError && err.code === 'malformed' && message.test(err.message),
          `${kind}: ${name}`,
        );
        assert.equal(isThreadToolInvocation(req), false, `${kind}: ${name}`);
      }
    });
  }
});

// The gateway bounds a thread id and a user at 256 bytes (MaxIdentityLen
// in internal/gateway) and escapes <, > and & in six bytes each: the
// longest header it sends (but for the device, which it does not bound)
// still fits in 4 KiB.
test('the longest approved context the gateway sends is read', () => {
  const esc = (n, c) => `\\u00${c.charCodeAt(0).toString(16)}`.repeat(n);
  const header =
    `{"source":"thread","threadId":"${esc(256, '<')}",` +
    `"approval":{"by":"${esc(256, '&')}","device":"${'d'.repeat(256)}","at":"9999-12-31T23:59:59.999999999-23:59","changed":false}}`;
  assert.ok(Buffer.byteLength(header) <= 4096, `${Buffer.byteLength(header)} bytes`);
  assert.deepEqual(toolContext(fetchRequest([[H, header]])), {
    source: 'thread',
    threadId: '<'.repeat(256),
    approval: { by: '&'.repeat(256), device: 'd'.repeat(256), at: '9999-12-31T23:59:59.999999999-23:59', changed: false },
  });
});

// Tests of <toolgate-client>'s call flow (docs/http-api.md, "Client tools")
// against a fake toolgate:
// fetch is replaced by a mock that serves the SSE stream, claims and results.
import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { ToolgateClient } from './client.js';

const encoder = new TextEncoder();
let seq = 0;
const newId = () => `toolu_${Date.now()}_${++seq}`;
const callEvent = (callId, name, input = {}) => `event: call\ndata: ${JSON.stringify({ callId, name, input })}\n\n`;

async function until(cond, what = 'condition', ms = 3000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
const settle = () => new Promise((r) => setTimeout(r, 50));

// The done memory in sessionStorage, per user and thread. Tokens that are not
// JWTs (most tests' 'tok1') have no user: ''.
const doneKey = (user, thread) => `toolgate:done:${JSON.stringify([user, thread])}`;
const b64url = (s) => Buffer.from(s).toString('base64url');
// A page token as the client reads it (unverified): a JWT whose payload names sub.
const pageJWT = (claims) => `${b64url('{"alg":"HS256","typ":"JWT"}')}.${b64url(JSON.stringify(claims))}.c2ln`;

class MemoryStorage {
  #m = new Map();
  getItem(k) { return this.#m.has(k) ? this.#m.get(k) : null; }
  setItem(k, v) { this.#m.set(k, String(v)); }
  removeItem(k) { this.#m.delete(k); }
}

/** A fake toolgate. streamStatus(n) answers the n-th stream request; claim/result(id, req) give a status or an Error to throw. */
function fakeServer({ streamStatus = () => 200, streamHeaders = {}, claim = () => 200, result = () => 200 } = {}) {
  const reqs = [];
  const streams = [];
  const fetch = async (url, init = {}) => {
    const u = new URL(url);
    const req = { url, path: u.pathname, method: init.method ?? 'GET', headers: new Headers(init.headers), body: init.body };
    reqs.push(req);
    if (u.pathname.endsWith('/client/calls')) {
      const status = streamStatus(streams.length);
      streams.push(null);
      if (status !== 200) return new Response('{"error":{"code":"x","message":"no"}}', { status, headers: streamHeaders });
      let ctrl;
      const body = new ReadableStream({ start(c) { ctrl = c; } });
      const s = {
        req,
        signal: init.signal,
        send: (text) => ctrl.enqueue(encoder.encode(text)),
        end: () => ctrl.close(),
      };
      init.signal?.addEventListener('abort', () => {
        try { ctrl.error(new DOMException('aborted', 'AbortError')); } catch { /* closed */ }
      });
      streams[streams.length - 1] = s;
      return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
    }
    const m = u.pathname.match(/\/client\/calls\/([^/]+)\/(claim|result)$/);
    assert.ok(m, `unexpected request ${url}`);
    const id = decodeURIComponent(m[1]);
    const status = (m[2] === 'claim' ? claim : result)(id, req);
    if (status instanceof Error) throw status;
    return new Response(status === 200 ? '{}' : '{"error":{"code":"conflict","message":"call already has a result"}}', { status });
  };
  const of = (id, kind) => reqs.filter((r) => r.path.endsWith(`/${encodeURIComponent(id)}/${kind}`));
  return { fetch, reqs, streams, claims: (id) => of(id, 'claim'), results: (id) => of(id, 'result') };
}

let server;
let el;
let events;
const realFetch = globalThis.fetch;

function client({ threadId = 'th_1', getToken = () => 'tok1', tools } = {}) {
  el = new ToolgateClient();
  events = [];
  el.addEventListener('toolgate.tool.change', (e) => events.push({ type: 'change', ...e.detail, ev: e }));
  el.addEventListener('toolgate.log', (e) => events.push({ type: 'log', ...e.detail }));
  el.setOptions({ api: { url: 'http://gw.test/toolgate/', getToken }, threadId, tools });
  return el;
}
const changes = () => events.filter((e) => e.type === 'change').map(({ id, name, status, isError }) => (
  status === 'end' ? { id, name, status, isError } : { id, name, status }));
const logs = (level) => events.filter((e) => e.type === 'log' && (!level || e.level === level));

beforeEach(() => {
  globalThis.sessionStorage = new MemoryStorage();
});
afterEach(() => {
  el?.disconnectedCallback();
  el = null;
  globalThis.fetch = realFetch;
  delete globalThis.sessionStorage;
});

function start(opts, clientOpts) {
  server = fakeServer(opts);
  globalThis.fetch = server.fetch;
  client(clientOpts);
  return server;
}

test('stream request: token in the header only, thread in the query, trailing slash stripped', async () => {
  start({}, { threadId: 'th 1/é', getToken: async () => 'secret-token' });
  await until(() => server.streams[0], 'stream');
  const { req } = server.streams[0];
  assert.equal(req.url, 'http://gw.test/toolgate/client/calls?threadId=th%201%2F%C3%A9');
  assert.equal(req.headers.get('authorization'), 'Bearer secret-token');
  assert.equal(req.headers.get('accept'), 'text/event-stream');
  assert.ok(!req.url.includes('secret'));
});

test('a call runs once: claim, start, handler, result with the page key order, end', async () => {
  start();
  const id = newId();
  const order = [];
  el.onClientTool = async (call) => {
    order.push('handler');
    assert.deepEqual(call, { id, name: 'read_progress', input: { q: 1 } });
    assert.deepEqual(changes(), [{ id, name: 'read_progress', status: 'start' }]);
    return { zeta: 83, alpha: ['é', null] };
  };
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(': ping\n\n' + callEvent(id, 'read_progress', { q: 1 }));
  await until(() => changes().length === 2, 'end event');
  assert.deepEqual(order, ['handler']);
  assert.equal(server.claims(id).length, 1);
  const [res] = server.results(id);
  assert.equal(res.body, '{"result":{"zeta":83,"alpha":["é",null]}}');
  assert.equal(res.headers.get('content-type'), 'application/json');
  assert.equal(res.headers.get('authorization'), 'Bearer tok1');
  assert.ok(server.reqs.indexOf(server.claims(id)[0]) < server.reqs.indexOf(res));
  assert.deepEqual(changes(), [
    { id, name: 'read_progress', status: 'start' },
    { id, name: 'read_progress', status: 'end', isError: false },
  ]);
  const ev = events.find((e) => e.type === 'change').ev;
  assert.ok(ev instanceof CustomEvent && ev.bubbles && ev.composed);
  assert.deepEqual(JSON.parse(sessionStorage.getItem(doneKey('', 'th_1'))), [id]);
  // offered again on the same stream: not run again
  server.streams[0].send(callEvent(id, 'read_progress'));
  await settle();
  assert.equal(server.claims(id).length, 1);
});

test('with tools, a call of another tool is left unclaimed for the page that implements it', async () => {
  start({}, { tools: ['read_progress'] });
  el.onClientTool = async ({ name }) => ({ ran: name });
  const mine = newId();
  const theirs = newId();
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(theirs, 'read_draft') + callEvent(mine, 'read_progress'));
  await until(() => server.results(mine).length === 1, 'the result of its own tool');
  await settle();
  assert.equal(server.claims(theirs).length, 0, 'another page\'s tool was claimed');
  assert.equal(server.results(theirs).length, 0);
  assert.ok(logs('info').some((l) => l.message.includes('left for a page that implements it')));
  // Offered again (a reconnect), still not taken.
  server.streams[0].send(callEvent(theirs, 'read_draft'));
  await settle();
  assert.equal(server.claims(theirs).length, 0);
});

test('handler outcomes map to result bodies', async () => {
  start();
  const cases = [
    ['str', () => 'plain text', '{"result":"plain text"}', false],
    ['empty', () => '', '{"result":""}', false],
    ['num', () => 42, '{"result":42}', false],
    ['nul', () => null, '{"result":null}', false],
    ['undef', () => undefined, '{}', false],
    ['sync-throw', () => { throw new Error('boom'); }, '{"error":"boom"}', true],
    ['reject', () => Promise.reject(new TypeError('nope')), '{"error":"nope"}', true],
    ['throw-string', () => { throw 'raw'; }, '{"error":"raw"}', true], // eslint-disable-line no-throw-literal
    ['function', () => () => 1, null, true],
    ['bigint', () => 5n, null, true],
    ['cyclic', () => { const o = {}; o.o = o; return o; }, null, true],
  ];
  const ids = new Map(cases.map(([label]) => [label, newId()]));
  const byName = new Map(cases.map((c) => [c[0], c[1]]));
  el.onClientTool = ({ name }) => byName.get(name)();
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(cases.map(([label]) => callEvent(ids.get(label), label)).join(''));
  await until(() => changes().filter((c) => c.status === 'end').length === cases.length, 'all ends');
  for (const [label, , body, isError] of cases) {
    const id = ids.get(label);
    const [res] = server.results(id);
    if (body) assert.equal(res.body, body, label);
    else assert.equal(typeof JSON.parse(res.body).error, 'string', label);
    assert.deepEqual(changes().find((c) => c.id === id && c.status === 'end'), { id, name: label, status: 'end', isError }, label);
  }
});

test('no handler: claim, then the not-available error at once', async () => {
  start();
  const id = newId();
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(id, 'read_progress'));
  await until(() => server.results(id).length === 1, 'result');
  assert.equal(server.claims(id).length, 1);
  assert.deepEqual(JSON.parse(server.results(id)[0].body), { error: 'tool read_progress is not available on this page' });
});

test('claim 409 or 404: the handler does not run and nothing is posted', async () => {
  const taken = newId();
  const foreign = newId();
  start({ claim: (id) => (id === taken ? 409 : 404) });
  let ran = 0;
  el.onClientTool = () => { ran++; };
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(taken, 't') + callEvent(foreign, 't'));
  await until(() => server.claims(foreign).length === 1 && server.claims(taken).length === 1, 'claims');
  await settle();
  assert.equal(ran, 0);
  assert.equal(server.results(taken).length + server.results(foreign).length, 0);
  assert.deepEqual(changes(), []);
  assert.equal(logs('error').length, 0);
});

for (const [label, failure] of [['500', 500], ['409', 409], ['network error', new TypeError('fetch failed')]]) {
  test(`write-back failure (${label}): error log, no end event, not run again`, async () => {
    start({ result: () => failure });
    const id = newId();
    let ran = 0;
    el.onClientTool = () => { ran++; return 'ok'; };
    await until(() => server.streams[0], 'stream');
    server.streams[0].send(callEvent(id, 't'));
    await until(() => logs('error').length === 1, 'error log');
    const [log] = logs('error');
    assert.equal(log.data.id, id);
    assert.equal(log.data.name, 't');
    if (typeof failure === 'number') assert.equal(log.data.status, failure);
    assert.deepEqual(changes(), [{ id, name: 't', status: 'start' }]);
    server.streams[0].send(callEvent(id, 't'));
    await settle();
    assert.equal(ran, 1);
    assert.equal(server.claims(id).length, 1);
  });
}

test('the same id offered twice at once runs once', async () => {
  start();
  const id = newId();
  let ran = 0;
  el.onClientTool = async () => { ran++; await settle(); return 1; };
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(id, 't') + callEvent(id, 't'));
  await until(() => changes().length === 2, 'end');
  await settle();
  assert.equal(ran, 1);
  assert.equal(server.claims(id).length, 1);
});

test('an id answered before a reload is skipped; one only claimed before runs again', async () => {
  const answered = newId();
  const claimedOnly = newId();
  sessionStorage.setItem(doneKey('', 'th_1'), JSON.stringify([answered]));
  sessionStorage.setItem(doneKey('', 'th_other'), JSON.stringify([claimedOnly]));
  start();
  const ranIds = [];
  el.onClientTool = ({ id }) => { ranIds.push(id); };
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(answered, 't') + callEvent(claimedOnly, 't'));
  await until(() => server.results(claimedOnly).length === 1, 'result');
  await settle();
  assert.deepEqual(ranIds, [claimedOnly]);
  assert.equal(server.claims(answered).length, 0);
  assert.deepEqual(JSON.parse(sessionStorage.getItem(doneKey('', 'th_1'))), [answered, claimedOnly]);
});

test('the done list is bounded to the last 500 ids', async () => {
  sessionStorage.setItem(doneKey('', 'th_1'), JSON.stringify(Array.from({ length: 500 }, (_, i) => `old${i}`)));
  start();
  const id = newId();
  el.onClientTool = () => 'x';
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(id, 't'));
  await until(() => changes().length === 2, 'end');
  const list = JSON.parse(sessionStorage.getItem(doneKey('', 'th_1')));
  assert.equal(list.length, 500);
  assert.equal(list[0], 'old1');
  assert.equal(list.at(-1), id);
});

test('storage that throws does not break running calls', async () => {
  Object.defineProperty(globalThis, 'sessionStorage', { configurable: true, get() { throw new Error('SecurityError'); } });
  start();
  const id = newId();
  el.onClientTool = () => 'x';
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(id, 't'));
  await until(() => changes().length === 2, 'end');
  server.streams[0].send(callEvent(id, 't'));
  await settle();
  assert.equal(server.claims(id).length, 1);
});

for (const status of [401, 404]) test(`${status} on the stream: a new token is fetched before retrying`, async () => {
  let n = 0;
  start({ streamStatus: (i) => (i === 0 ? status : 200) }, { getToken: () => `tok${++n}` });
  await until(() => server.streams[1], 'second stream', 3000);
  assert.equal(server.reqs[0].headers.get('authorization'), 'Bearer tok1');
  assert.equal(server.streams[1].req.headers.get('authorization'), 'Bearer tok2');
  assert.equal(logs('warn').length, 1);
  await until(() => logs('info').length === 1, 'reconnected log');
});

test('401 on a claim: a new token, the claim retried once', async () => {
  let n = 0;
  const id = newId();
  start({ claim: (_, req) => (req.headers.get('authorization') === 'Bearer tok1' ? 401 : 200) }, { getToken: () => `tok${++n}` });
  el.onClientTool = () => 'x';
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(id, 't'));
  await until(() => changes().length === 2, 'end');
  assert.deepEqual(server.claims(id).map((r) => r.headers.get('authorization')), ['Bearer tok1', 'Bearer tok2']);
  assert.equal(server.results(id)[0].headers.get('authorization'), 'Bearer tok2');
});

test('a 5xx on the stream keeps the token and retries', async () => {
  let n = 0;
  start({ streamStatus: (i) => (i === 0 ? 503 : 200) }, { getToken: () => `tok${++n}` });
  await until(() => server.streams[1], 'second stream', 3000);
  assert.equal(server.streams[1].req.headers.get('authorization'), 'Bearer tok1');
  assert.equal(n, 1);
});

test('a stream that ends is reopened', async () => {
  start();
  await until(() => server.streams[0], 'stream');
  server.streams[0].end();
  await until(() => server.streams[1], 'reconnect', 3000);
  const id = newId();
  el.onClientTool = () => 'again';
  server.streams[1].send(callEvent(id, 't'));
  await until(() => changes().length === 2, 'end');
});

test('switching threads closes the old stream and opens one for the new thread', async () => {
  start();
  await until(() => server.streams[0], 'stream');
  el.setOptions({ api: { url: 'http://gw.test/toolgate', getToken: () => 'tok' }, threadId: 'th_2' });
  await until(() => server.streams[1], 'new stream');
  assert.ok(server.streams[0].signal.aborted);
  assert.ok(server.streams[1].req.url.endsWith('/client/calls?threadId=th_2'));
  el.disconnectedCallback();
  assert.ok(server.streams[1].signal.aborted);
  await new Promise((r) => setTimeout(r, 700));
  assert.equal(server.streams.length, 2);
});

test('a call running while the thread switches still posts its result', async () => {
  start();
  const id = newId();
  let release;
  el.onClientTool = () => new Promise((r) => { release = r; });
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(id, 't'));
  await until(() => release, 'handler started');
  el.setOptions({ api: { url: 'http://gw.test/toolgate', getToken: () => 'tok' }, threadId: 'th_2' });
  release('late');
  await until(() => changes().length === 2, 'end');
  assert.equal(server.results(id)[0].body, '{"result":"late"}');
  assert.deepEqual(JSON.parse(sessionStorage.getItem(doneKey('', 'th_1'))), [id]);
});

test('setOptions and onClientTool reject bad arguments', () => {
  const c = new ToolgateClient();
  assert.throws(() => c.setOptions({ threadId: 't' }), TypeError);
  assert.throws(() => c.setOptions({ api: { url: 'http://x' }, threadId: 't' }), TypeError);
  assert.throws(() => c.setOptions({ api: { url: 'http://x', getToken: () => 't' } }), TypeError);
  for (const tools of ['read_draft', [''], [1], {}]) {
    assert.throws(() => c.setOptions({ api: { url: 'http://x', getToken: () => 't' }, threadId: 't', tools }), TypeError);
  }
  assert.throws(() => { c.onClientTool = 'nope'; }, TypeError);
  c.onClientTool = () => 1;
  c.onClientTool = null;
  assert.equal(c.onClientTool, null);
});

test('pageContext returns the items and logs dropped names as a warning', () => {
  const c = new ToolgateClient();
  const seen = [];
  c.addEventListener('toolgate.log', (e) => seen.push(e.detail));
  c.setReadable('lesson', 'Watching lesson 3');
  c.setReadable('playback', { positionSeconds: 83 });
  assert.deepEqual(c.pageContext(), [
    { name: 'lesson', value: 'Watching lesson 3' },
    { name: 'playback', value: { positionSeconds: 83 } },
  ]);
  assert.deepEqual(seen, []);
  assert.throws(() => c.setReadable('bad name', 1), TypeError);
  c.setReadable('huge', 'x'.repeat(4090));
  assert.deepEqual(c.pageContext(), [{ name: 'huge', value: 'x'.repeat(4090) }]);
  assert.equal(seen.length, 1);
  assert.equal(seen[0].level, 'warn');
  assert.deepEqual(seen[0].data, { names: ['lesson', 'playback'] });
  assert.equal(c.removeReadable('huge'), true);
  assert.equal(c.pageContext().length, 2);
});

test('end to end with the real fetch against an HTTP server', async () => {
  const posted = [];
  let streamReq;
  const srv = http.createServer((req, res) => {
    if (req.url.startsWith('/tg/client/calls?')) {
      streamReq = req;
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(': toolgate\n\n');
      // CRLF, multi-line data, a multi-byte character split across writes
      const event = Buffer.from('event: call\r\ndata: {"callId":"e2e-1","name":"t",\r\ndata: "input":{"q":"€"}}\r\n\r\n');
      const cut = event.indexOf(Buffer.from('€')) + 1;
      setTimeout(() => res.write(event.subarray(0, cut)), 20);
      setTimeout(() => res.write(event.subarray(cut)), 40);
      return;
    }
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      posted.push({ url: req.url, auth: req.headers.authorization, body });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"ok":true}');
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    el = new ToolgateClient();
    events = [];
    el.addEventListener('toolgate.tool.change', (e) => events.push({ type: 'change', ...e.detail }));
    el.onClientTool = async ({ input }) => ({ echo: input.q });
    el.setOptions({ api: { url: `http://127.0.0.1:${srv.address().port}/tg/`, getToken: async () => 'T' }, threadId: 'th' });
    await until(() => changes().length === 2, 'end');
    assert.equal(streamReq.headers.authorization, 'Bearer T');
    assert.equal(streamReq.headers.accept, 'text/event-stream');
    assert.deepEqual(posted, [
      { url: '/tg/client/calls/e2e-1/claim', auth: 'Bearer T', body: '' },
      { url: '/tg/client/calls/e2e-1/result', auth: 'Bearer T', body: '{"result":{"echo":"€"}}' },
    ]);
  } finally {
    el.close();
    srv.closeAllConnections();
    srv.close();
  }
});

test('the memory of calls run is per user, thread and call id', async () => {
  let user = 'u_a';
  start({}, { getToken: () => pageJWT({ sub: user, thread: 'th_1' }) });
  const id = newId();
  const ran = [];
  el.onClientTool = ({ id: callId }) => { ran.push([user, callId]); return 'x'; };
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(id, 't'));
  await until(() => server.results(id).length === 1, 'result');
  assert.deepEqual(JSON.parse(sessionStorage.getItem(doneKey('u_a', 'th_1'))), [id]);
  assert.equal(sessionStorage.getItem(doneKey('', 'th_1')), null);

  // The same user and thread: offered again, not run again.
  server.streams[0].send(callEvent(id, 't'));
  await settle();
  assert.equal(server.claims(id).length, 1);

  // Another user signs in on this page, same thread, same call id: it is
  // another call, and it runs.
  user = 'u_b';
  el.setOptions({ api: { url: 'http://gw.test/toolgate', getToken: () => pageJWT({ sub: user, thread: 'th_1' }) }, threadId: 'th_1' });
  await until(() => server.streams[1], 'second stream');
  server.streams[1].send(callEvent(id, 't'));
  await until(() => server.results(id).length === 2, 'second result');
  assert.deepEqual(ran, [['u_a', id], ['u_b', id]]);
  assert.deepEqual(JSON.parse(sessionStorage.getItem(doneKey('u_b', 'th_1'))), [id]);

  // The same call id in another thread of the same user runs too.
  el.setOptions({ api: { url: 'http://gw.test/toolgate', getToken: () => pageJWT({ sub: user, thread: 'th_2' }) }, threadId: 'th_2' });
  await until(() => server.streams[2], 'third stream');
  server.streams[2].send(callEvent(id, 't'));
  await until(() => server.results(id).length === 3, 'third result');
  assert.equal(ran.length, 3);
});

test('a reload keeps the memory per user: another user\'s answered id runs', async () => {
  const id = newId();
  sessionStorage.setItem(doneKey('u_a', 'th_1'), JSON.stringify([id]));
  start({}, { getToken: () => pageJWT({ sub: 'u_b', thread: 'th_1' }) });
  el.onClientTool = () => 'x';
  await until(() => server.streams[0], 'stream');
  server.streams[0].send(callEvent(id, 't'));
  await until(() => server.results(id).length === 1, 'result');
  el.setOptions({ api: { url: 'http://gw.test/toolgate', getToken: () => pageJWT({ sub: 'u_a', thread: 'th_1' }) }, threadId: 'th_1' });
  await until(() => server.streams[1], 'second stream');
  server.streams[1].send(callEvent(id, 't'));
  await settle();
  assert.equal(server.claims(id).length, 1, 'u_a answered it before the reload');
});

test('429 on the stream: waits Retry-After and keeps the token', async () => {
  let n = 0;
  const begin = Date.now();
  start({ streamStatus: (i) => (i === 0 ? 429 : 200), streamHeaders: { 'Retry-After': '1' } }, { getToken: () => `tok${++n}` });
  await until(() => server.streams[1], 'second stream', 3000);
  assert.ok(Date.now() - begin >= 950, `retried after ${Date.now() - begin}ms, before Retry-After`);
  assert.equal(server.streams[1].req.headers.get('authorization'), 'Bearer tok1');
});

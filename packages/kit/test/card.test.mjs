// Cards, buttons and results: what toolgate would refuse is refused here
// first (apptools' card_test.go, case for case, and more).

import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';

import {
  AnswerError,
  button,
  card,
  cardAnswer,
  cardResponse,
  domainError,
  errorResponse,
  NotThreadError,
  result,
  resultResponse,
  writeCard,
  writeError,
  writeResult,
  writeText,
} from '@toolgate/kit';

const thread = { source: 'thread', threadId: 'th_1' };
const api = { source: 'api' };

const good = {
  type: 'action_required',
  title: 'Send the email?',
  description: 'To ada@example.com',
  elements: [
    { type: 'button', id: 'send', label: 'Send', variant: 'primary', input: { content: 'sent' } },
    { type: 'button', id: 'edit', label: 'Edit', target: { type: 'app', component: 'mail', method: 'POST', path: '/drafts/${input.id}', body: '${input}' } },
  ],
};

const withTarget = (target) => ({ type: 'action_required', title: 't', elements: [{ type: 'button', id: 'ok', label: 'OK' }, { type: 'button', id: 'x', label: 'X', target }] });
const withButton = (b) => ({ type: 'action_required', title: 't', elements: [{ type: 'button', id: 'x', label: 'X', ...b }] });

test('cardAnswer refuses what toolgate would refuse', async (t) => {
  const cases = [
    ['thread call', thread, good, null],
    ['api call', api, good, NotThreadError],
    ['no title', thread, { ...good, title: '' }, /invalid card: title is required/],
    ['no buttons', thread, { ...good, elements: [] }, /at least one button is required/],
    ['elements missing', thread, { type: 'action_required', title: 't' }, /at least one button is required/],
    ['duplicate ids', thread, { ...good, elements: [good.elements[0], { ...good.elements[1], id: 'send' }] }, /button id "send" is used twice/],
    ['no id', thread, withButton({ id: '' }), /elements\[0\]: id is required/],
    ['no label', thread, withButton({ label: '' }), /button "x": label is required/],
    ['not a button', thread, withButton({ type: 'link' }), /elements\[0\]: type "link", want "button"/],
    ['wrong card type', thread, { ...good, type: 'card' }, /type "card", want "action_required"/],
    ['unknown card field', thread, { ...good, footer: 'x' }, /invalid card: unknown field "footer"/],
    ['unknown button field', thread, withButton({ href: 'https://x' }), /unknown field "href"/],
    ['assignee without computerId', thread, { ...good, assignee: {} }, /assignee needs a computerId/],
    ['assignee with more', thread, { ...good, assignee: { computerId: 'pc', user: 'u' } }, /assignee: unknown field "user"/],
    ['input not JSON', thread, withButton({ input: { at: new Date(0) } }), /input\.at: is not plain JSON/],
    ['input NaN', thread, withButton({ input: [NaN] }), /input\[0\]: NaN is not a JSON number/],
    ['url target', thread, withTarget({ type: 'url', method: 'GET', url: 'http://localhost:2019/config/' }), /button "x": target: a button runs an app target .*not a "url" target/],
    ['client tool', thread, withTarget({ type: 'kazzle', name: 'where' }), /not a "kazzle" target/],
    ['env reference', thread, withTarget({ type: 'app', component: 'mail', method: 'POST', path: '/send', headers: { 'X-Key': '${env.API_KEY}' } }), /\$\{env\.API_KEY\}: a button may reference \$\{input…\} only, never env/],
    ['env in body', thread, withTarget({ type: 'app', component: 'mail', method: 'POST', path: '/send', body: { deep: ['${env.API_KEY}'] } }), /never env/],
    ['env in path', thread, withTarget({ type: 'app', component: 'mail', method: 'POST', path: '/send/${env.ID}' }), /never env/],
    ['escaped env is text', thread, withTarget({ type: 'app', component: 'mail', method: 'POST', path: '/send', body: '$${env.API_KEY}' }), null],
    ['unknown root', thread, withTarget({ type: 'app', component: 'mail', method: 'POST', path: '/send', query: { q: '${secrets.x}' } }), /unknown reference \$\{secrets\.x\}/],
    ['unterminated reference', thread, withTarget({ type: 'app', component: 'mail', method: 'POST', path: '/send', body: '${input' }), /unterminated reference/],
    ['result mapping', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: '/x', result: 'body' }), /no result mapping/],
    ['url on an app target', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: '/x', url: 'http://localhost:2019/' }), /unknown field "url"/],
    ['no component', thread, withTarget({ type: 'app', method: 'GET', path: '/x' }), /component is required/],
    ['bad method', thread, withTarget({ type: 'app', component: 'mail', method: 'get', path: '/x' }), /method "get" is not one of/],
    ['relative path', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: 'x' }), /path must start with \//],
    ['query in path', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: '/x?y=1' }), /must not hold \? or #/],
    ['dot segment', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: '/a/../admin' }), /dot segments/],
    ['encoded dot segment', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: '/a/%252e%252e/admin' }), /dot segments/],
    ['Authorization header', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: '/x', headers: { authorization: 'Bearer x' } }), /header "authorization" belongs to the gateway/],
    ['context header', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: '/x', headers: { 'Kazzle-Tool-Context': '{}' } }), /belongs to the gateway/],
    ['header with CRLF', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: '/x', headers: { 'X-A': 'a\r\nX-B: b' } }), /invalid value/],
    ['bad header name', thread, withTarget({ type: 'app', component: 'mail', method: 'GET', path: '/x', headers: { 'X A': 'a' } }), /not a valid header name/],
  ];
  for (const [name, ctx, c, want] of cases) {
    await t.test(name, () => {
      if (want === null) {
        assert.equal(cardAnswer(ctx, c), c);
      } else if (want === NotThreadError) {
        assert.throws(() => cardAnswer(ctx, c), NotThreadError);
      } else {
        assert.throws(() => cardAnswer(ctx, c), (err) => err instanceof AnswerError && want.test(err.message));
      }
    });
  }
});

test('a verified component: a button runs on it and on no other', () => {
  const c = (component) => withTarget({ type: 'app', component, method: 'DELETE', path: '/data' });
  assert.throws(() => cardAnswer(thread, c('files'), { component: 'mail' }), /component "files": a button runs on component "mail", the one that answered the card/);
  assert.equal(cardAnswer(thread, c('mail'), { component: 'mail' }).title, 't');
});

test('card() and button() build a component\'s card and refuse bad ones', () => {
  const connect = button({
    id: 'connect',
    label: 'Connect Gmail',
    variant: 'primary',
    input: { scope: 'gmail.readonly' },
    target: { type: 'app', component: 'api', path: '/oauth/start', method: 'POST', body: '${input}' },
  });
  const c = card({ title: 'Connect Gmail', description: 'Connect Gmail before Kazzle can search messages.', elements: [connect] });
  assert.deepEqual(JSON.parse(JSON.stringify(c)), {
    type: 'action_required',
    title: 'Connect Gmail',
    description: 'Connect Gmail before Kazzle can search messages.',
    elements: [{ type: 'button', id: 'connect', label: 'Connect Gmail', variant: 'primary', input: { scope: 'gmail.readonly' }, target: { type: 'app', component: 'api', path: '/oauth/start', method: 'POST', body: '${input}' } }],
  });
  assert.throws(() => button({ id: 'x', label: '' }), /label is required/);
  assert.throws(() => card({ title: 'x', elements: [] }), /at least one button/);
  assert.throws(() => card({ title: 'x', elements: [connect] }, { component: 'mail' }), /a button runs on component "mail"/);
});

test('the request itself may stand for the context', () => {
  const req = (ctx) => new Request('http://component.test/', { headers: { 'Kazzle-Tool-Context': JSON.stringify(ctx) } });
  assert.equal(cardAnswer(req(thread), good), good);
  assert.throws(() => cardAnswer(req(api), good), NotThreadError);
  assert.throws(() => cardAnswer(new Request('http://component.test/'), good), NotThreadError);
});

// serve runs handler on a real node:http server and returns the answer
// to one request.
async function serve(handler) {
  const server = http.createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${server.address().port}/`);
    return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

test('writeCard writes the card, and nothing on a refusal', async () => {
  let got = await serve((req, res) => writeCard(res, thread, good));
  assert.equal(got.status, 200);
  assert.equal(got.type, 'application/json');
  assert.deepEqual(JSON.parse(got.body), good);

  let thrown;
  got = await serve((req, res) => {
    try {
      writeCard(res, api, good);
    } catch (err) {
      thrown = err;
      assert.equal(res.headersSent, false, 'nothing written');
      writeError(res, 409, 'connect_required', 'Gmail must be connected before this tool can run.');
    }
  });
  assert.ok(thrown instanceof NotThreadError);
  assert.equal(got.status, 409);
  assert.deepEqual(JSON.parse(got.body), { code: 'connect_required', error: 'Gmail must be connected before this tool can run.' });
});

test('results and domain errors', async () => {
  assert.deepEqual(result({ content: 'ok', markdown: '**ok**', embedUrl: 'https://app.example.com/x' }), { content: 'ok', markdown: '**ok**', embedUrl: 'https://app.example.com/x' });
  assert.throws(() => result({ markdown: 'x' }), /content is required/);
  assert.throws(() => result({ content: 'x', embedUrl: '/relative' }), /embedUrl must be an absolute http\(s\) URL/);
  assert.throws(() => result({ content: 'x', embedUrl: 'javascript:alert(1)' }), /embedUrl must be an absolute http\(s\) URL/);
  assert.throws(() => result({ content: 'x', extra: 1 }), /unknown field "extra"/);
  assert.throws(() => domainError('', 'x'), /needs a code/);

  const r = resultResponse({ content: 'Saved' });
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { content: 'Saved' });
  const e = errorResponse(409, 'connect_required', 'no');
  assert.equal(e.status, 409);
  assert.deepEqual(await e.json(), { code: 'connect_required', error: 'no' });
  const c = cardResponse(thread, good);
  assert.deepEqual(await c.json(), good);

  let got = await serve((req, res) => writeResult(res, 200, { content: 'a<b>&c' }));
  assert.equal(got.body, '{"content":"a<b>&c"}');
  got = await serve((req, res) => writeText(res, 200, 'plain'));
  assert.equal(got.type, 'text/plain; charset=utf-8');
  assert.equal(got.body, 'plain');
});

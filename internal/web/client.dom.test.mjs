// With a (fake) DOM present, importing the module defines <toolgate-client>
// once, on HTMLElement; without one (the other test files) it defines nothing.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';

class FakeHTMLElement extends EventTarget {}
const defined = new Map();
globalThis.HTMLElement = FakeHTMLElement;
globalThis.customElements = {
  get: (name) => defined.get(name),
  define: (name, ctor) => {
    if (defined.has(name)) throw new DOMException(`${name} already defined`, 'NotSupportedError');
    defined.set(name, ctor);
  },
};
after(() => {
  delete globalThis.HTMLElement;
  delete globalThis.customElements;
});

test('defines toolgate-client once, extending HTMLElement', async () => {
  const first = await import('./client.js?dom=1');
  assert.equal(defined.get('toolgate-client'), first.ToolgateClient);
  assert.ok(new first.ToolgateClient() instanceof FakeHTMLElement);
  const second = await import('./client.js?dom=2'); // a second copy of the script must not throw
  assert.notEqual(second.ToolgateClient, first.ToolgateClient);
  assert.equal(defined.get('toolgate-client'), first.ToolgateClient);
});

test('connectedCallback reopens the stream closed by disconnectedCallback', async () => {
  const { ToolgateClient } = await import('./client.js?dom=1');
  const signals = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = (url, init) => {
    signals.push(init.signal);
    return new Promise((_, reject) => { // answers nothing until aborted
      init.signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
    });
  };
  try {
    const el = new ToolgateClient();
    el.connectedCallback(); // no options yet: nothing
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(signals.length, 0);
    el.setOptions({ api: { url: 'http://gw.test', getToken: () => 't' }, threadId: 'th' });
    await new Promise((r) => setTimeout(r, 20));
    el.connectedCallback(); // already open: no second stream
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(signals.length, 1);
    el.disconnectedCallback();
    assert.ok(signals[0].aborted);
    el.connectedCallback();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(signals.length, 2);
    assert.ok(!signals[1].aborted);
    el.disconnectedCallback();
  } finally {
    globalThis.fetch = realFetch;
  }
});

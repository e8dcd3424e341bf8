/**
 * toolgate browser client: runs client tools in the page (docs/http-api.md,
 * "Client tools") and keeps the page context facts that go with each user
 * message (docs/http-api.md, "Page context").
 *
 * One dependency-free ES module, served by toolgate at `GET /client.js`:
 *
 * ```html
 * <toolgate-client id="tg"></toolgate-client>
 * <script type="module">
 *   import "/toolgate/client.js";
 *   const tg = document.querySelector("#tg");
 *   tg.setOptions({
 *     api: { url: "/toolgate", getToken: () => fetch("/api/page-token").then(r => r.text()) },
 *     threadId: "th_1",
 *     tools: ["read_playback_progress"], // optional: claim only these
 *   });
 *   tg.onClientTool = async ({ id, name, input }) => {
 *     if (name === "read_playback_progress") return { positionSeconds: video.currentTime };
 *     throw new Error(`unknown tool ${name}`);
 *   };
 *   tg.setReadable("lesson", "Watching lesson 3");
 *   tg.addEventListener("toolgate.tool.change", (e) => console.log(e.detail));
 *   tg.addEventListener("toolgate.log", (e) => console.warn(e.detail));
 * </script>
 * ```
 *
 * Importing it outside a browser (Node, for tests) touches no DOM: the custom
 * element is defined only where `customElements` exists.
 * @module toolgate/client
 */

/** At most this many page context items go with one message. */
export const MAX_READABLE_ITEMS = 32;
/**
 * At most this many bytes go with one message: each item's name plus its value as
 * toolgate renders it (see {@link renderedBytes}). toolgate applies the same limit
 * and is the authority; counting alike here means both drop the same items.
 */
export const MAX_READABLE_BYTES = 4096;
/** What a readable's name must match. */
export const READABLE_NAME_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 10_000;
const RETRY_AFTER_MAX_MS = 60_000;
// The server pings well inside this; silence this long means a dead connection.
const IDLE_TIMEOUT_MS = 60_000;
const MAX_DONE_IDS = 500;
const DONE_KEY = 'toolgate:done:';

const utf8 = new TextEncoder();

// What toolgate writes for a character of a value instead of the character.
const ENTITY_BYTES = new Map([
  ['<', 4], ['\uFF1C', 4], ['\uFE64', 4], // &lt;
  ['>', 4], ['\uFF1E', 4], ['\uFE65', 4], // &gt;
  ['&', 5], ['\uFF06', 5], ['\uFE60', 5], // &amp;
]);
const FORMAT_CHAR = /^\p{Cf}$/u;

/**
 * The bytes a value's text takes in the page context block as toolgate renders it:
 * format characters (Unicode Cf: bidi controls, zero-width characters) dropped,
 * `<` `>` `&` and their fullwidth and small forms written as `&lt;` `&gt;` `&amp;`,
 * a backslash before `u`, `U`, `x` or `X` written as `&#92;`, the rest as UTF-8.
 * @param {string} text a string value, or a JSON value's compact text
 * @returns {number}
 */
export function renderedBytes(text) {
  let n = 0;
  let afterBackslash = false; // the last character kept was a backslash
  for (const ch of text) {
    if (FORMAT_CHAR.test(ch)) continue;
    if (afterBackslash && (ch === 'u' || ch === 'U' || ch === 'x' || ch === 'X')) n += 4; // &#92; for its 1-byte \
    afterBackslash = ch === '\\';
    const cp = ch.codePointAt(0);
    n += ENTITY_BYTES.get(ch) ?? (cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
  }
  return n;
}

/**
 * Compact JSON text of a value that JSON can carry without loss, keys in the
 * order received. Throws a TypeError for what JSON.stringify would throw on,
 * drop or turn into null: undefined, functions, symbols, BigInt, non-finite
 * numbers and cycles, at any depth.
 * @param {unknown} value
 * @returns {string}
 */
function strictJSON(value) {
  const ancestors = new Set();
  const walk = (v, key, path) => {
    if (((typeof v === 'object' && v !== null) || typeof v === 'bigint') && typeof v.toJSON === 'function') {
      v = v.toJSON(key);
    }
    if (v instanceof Number || v instanceof String || v instanceof Boolean) v = v.valueOf();
    if (v === null || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw new TypeError(`${path} is ${v}, which JSON cannot carry`);
      return JSON.stringify(v);
    }
    if (typeof v !== 'object') throw new TypeError(`${path} is ${typeof v}, which JSON cannot carry`);
    if (ancestors.has(v)) throw new TypeError(`${path} is a cycle`);
    ancestors.add(v);
    let text;
    if (Array.isArray(v)) {
      const parts = [];
      for (let i = 0; i < v.length; i++) parts.push(walk(v[i], String(i), `${path}[${i}]`));
      text = `[${parts.join(',')}]`;
    } else {
      const parts = Object.keys(v).map((k) => `${JSON.stringify(k)}:${walk(v[k], k, `${path}.${k}`)}`);
      text = `{${parts.join(',')}}`;
    }
    ancestors.delete(v);
    return text;
  };
  try {
    return walk(value, '', 'value');
  } catch (err) {
    if (err instanceof TypeError) throw err;
    throw new TypeError(`value cannot be serialized: ${err?.message ?? err}`); // e.g. too deep
  }
}

/**
 * The page's registered facts (readables), in registration order.
 * Each value is serialized when it is set, so later changes to an object the
 * page passed in do not leak into snapshots.
 */
export class ReadableRegistry {
  /** @type {Map<string, {text: string, isString: boolean, bytes: number}>} */
  #entries = new Map();

  /**
   * Registers or updates a fact. Updating keeps its position.
   * @param {string} name matches {@link READABLE_NAME_PATTERN}
   * @param {unknown} value a string or a JSON value
   * @throws {TypeError} for a bad name or value; the previous value stays
   */
  set(name, value) {
    if (typeof name !== 'string' || !READABLE_NAME_PATTERN.test(name)) {
      throw new TypeError(`readable name ${JSON.stringify(String(name))} must match ${READABLE_NAME_PATTERN}`);
    }
    const isString = typeof value === 'string';
    let text;
    try {
      text = isString ? value : strictJSON(value);
    } catch (err) {
      throw new TypeError(`readable ${name}: ${err.message}`);
    }
    this.#entries.set(name, { text, isString, bytes: utf8.encode(name).length + renderedBytes(text) });
  }

  /**
   * Removes a fact; registering it again puts it last.
   * @param {string} name
   * @returns {boolean} whether it was there
   */
  remove(name) {
    return this.#entries.delete(name);
  }

  /** @returns {number} how many facts are registered (before limits) */
  get size() {
    return this.#entries.size;
  }

  /**
   * The facts to send now: oldest registered dropped first until at most
   * {@link MAX_READABLE_ITEMS} items and {@link MAX_READABLE_BYTES} bytes remain.
   * The registry itself is unchanged.
   * @returns {{items: Array<{name: string, value: unknown}>, dropped: string[]}}
   */
  snapshot() {
    const all = [...this.#entries];
    let total = all.reduce((sum, [, e]) => sum + e.bytes, 0);
    let start = 0;
    while (start < all.length && (all.length - start > MAX_READABLE_ITEMS || total > MAX_READABLE_BYTES)) {
      total -= all[start++][1].bytes;
    }
    return {
      items: all.slice(start).map(([name, e]) => ({ name, value: e.isString ? e.text : JSON.parse(e.text) })),
      dropped: all.slice(0, start).map(([name]) => name),
    };
  }
}

/**
 * An incremental Server-Sent Events parser (the WHATWG event stream format):
 * feed it decoded text in any chunking; it returns the events completed so far.
 * Lines end in LF, CRLF or CR; `:` lines are comments; an event is emitted only
 * at its terminating blank line, and one without `data` is not emitted.
 */
export class SSEParser {
  #buffer = '';
  #skipLF = false; // the last chunk ended in CR: a leading LF belongs to it
  #type = '';
  /** @type {string[]} */
  #data = [];
  /** The last `id:` seen, carried by every event after it. */
  lastEventId = '';

  /**
   * @param {string} chunk
   * @returns {Array<{event: string, data: string, id: string}>}
   */
  push(chunk) {
    const out = [];
    let text = this.#buffer + chunk;
    if (this.#skipLF && text) {
      if (text[0] === '\n') text = text.slice(1);
      this.#skipLF = false;
    }
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.#line(text.slice(start, i), out);
      if (c === 13) {
        if (i + 1 === text.length) this.#skipLF = true;
        else if (text.charCodeAt(i + 1) === 10) i++;
      }
      start = i + 1;
    }
    this.#buffer = text.slice(start);
    return out;
  }

  #line(line, out) {
    if (line === '') {
      if (this.#data.length) out.push({ event: this.#type || 'message', data: this.#data.join('\n'), id: this.lastEventId });
      this.#type = '';
      this.#data = [];
      return;
    }
    if (line[0] === ':') return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'event') this.#type = value;
    else if (field === 'data') this.#data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.lastEventId = value;
  }
}

/**
 * The result request body for what a client tool returned: a string
 * as is, another value as the JSON text JSON.stringify gives it (the page's key
 * order kept), undefined as `{}`.
 * @param {unknown} value
 * @returns {string}
 * @throws {TypeError} when JSON.stringify throws or gives nothing (functions, symbols)
 */
export function resultBody(value) {
  if (value === undefined) return '{}';
  const json = JSON.stringify(value);
  if (json === undefined) throw new TypeError(`the result (${typeof value}) cannot be serialized`);
  return `{"result":${json}}`;
}

function errorText(err) {
  try {
    const text = String(err?.message ?? err);
    return text || String(err) || 'error';
  } catch {
    return 'error';
  }
}

function storage() {
  try {
    return globalThis.sessionStorage ?? null;
  } catch {
    return null; // storage blocked (sandboxed frame, privacy settings)
  }
}

/**
 * The `sub` claim of a page token, read without verifying it (toolgate verifies);
 * '' when the token is not a JWT with a string `sub`.
 * @param {string} token
 * @returns {string}
 */
export function tokenSubject(token) {
  try {
    const b64 = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const bin = atob(b64.padEnd(b64.length + ((4 - (b64.length % 4)) % 4), '='));
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
    return typeof claims?.sub === 'string' ? claims.sub : '';
  } catch {
    return '';
  }
}

// The memory of calls already run is keyed by user, thread and call id: call ids
// come from the agent runtime, and two users (a switched session in one tab) or
// two threads may well share one.
const callKey = (user, threadId, id) => JSON.stringify([user, threadId, id]);
const doneKey = (user, threadId) => DONE_KEY + JSON.stringify([user, threadId]);

function doneIds(user, threadId) {
  try {
    const list = JSON.parse(storage()?.getItem(doneKey(user, threadId)) ?? '[]');
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}

function rememberDone(user, threadId, id) {
  try {
    const list = doneIds(user, threadId).filter((x) => x !== id);
    list.push(id);
    storage()?.setItem(doneKey(user, threadId), JSON.stringify(list.slice(-MAX_DONE_IDS)));
  } catch {
    // Full or blocked storage: the server still refuses a second result.
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}

async function serverMessage(res) {
  const text = await res.text().catch(() => '');
  try {
    const e = JSON.parse(text).error; // toolgate answers {"error": {"code", "message"}}
    if (e) return String(e.message ?? e);
  } catch {
    // not JSON: show the start of the text
  }
  return text.slice(0, 200);
}

// Calls claimed or run in this page's life, by callKey, shared by every element so
// a remount or a second element never runs a call again.
const started = new Set();

const Base = globalThis.HTMLElement ?? globalThis.EventTarget ?? class {};

/**
 * `<toolgate-client>`: a headless element that takes this page's client tool
 * calls from toolgate, runs them with {@link ToolgateClient#onClientTool}, and
 * holds the page context. It renders nothing.
 *
 * Events (CustomEvents that bubble and cross shadow roots):
 * - `toolgate.tool.change` `{id, name, status: "start"|"end", isError?}`: `start`
 *   before the handler runs, `end` once the server confirmed the result.
 * - `toolgate.log` `{level: "info"|"warn"|"error", message, data?}`.
 */
export class ToolgateClient extends Base {
  /** @type {null | ((call: {id: string, name: string, input: any}) => unknown)} */
  #handler = null;
  #readables = new ReadableRegistry();
  /** @type {null | {url: string, getToken: () => string | Promise<string>, threadId: string, tools: Set<string> | null}} */
  #options = null;
  /** @type {null | {url: string, getToken: Function, threadId: string, tools: Set<string> | null, ctrl: AbortController, token: Promise<string> | null}} */
  #session = null;

  constructor() {
    super();
    // A handler assigned before the element was upgraded is an own property
    // hiding the accessor: move it behind the accessor.
    if (Object.hasOwn(this, 'onClientTool')) {
      const handler = this.onClientTool;
      delete this.onClientTool;
      this.onClientTool = handler;
    }
  }

  /**
   * The page's one client tool handler, `async ({id, name, input}) => result`.
   * It must throw for a name it does not know. With none, every call is answered
   * at once with the error `tool <name> is not available on this page`.
   */
  get onClientTool() {
    return this.#handler;
  }

  set onClientTool(handler) {
    if (handler != null && typeof handler !== 'function') throw new TypeError('onClientTool must be a function');
    this.#handler = handler ?? null;
  }

  /**
   * Points the client at toolgate and a thread and (re)opens the call stream,
   * closing any previous one. Calls already running finish and post their results.
   * `tools`, when given, names the client tools this page implements: a call
   * of another is left unclaimed for a page of the same thread that does
   * implement it (or to time out), where without it every call is claimed
   * and one the handler does not know answered with its error.
   * @param {{api: {url: string, getToken: () => string | Promise<string>}, threadId: string, tools?: string[]}} options
   *   `api.url` is where toolgate is mounted; `getToken` gives the page token for the thread.
   */
  setOptions({ api, threadId, tools } = {}) {
    if (typeof api?.url !== 'string' || !api.url) throw new TypeError('api.url must be a non-empty string');
    if (typeof api.getToken !== 'function') throw new TypeError('api.getToken must be a function');
    if (typeof threadId !== 'string' || !threadId) throw new TypeError('threadId must be a non-empty string');
    if (tools !== undefined && (!Array.isArray(tools) || !tools.every((t) => typeof t === 'string' && t))) {
      throw new TypeError('tools must be an array of client tool names');
    }
    this.#options = { url: api.url.replace(/\/+$/, ''), getToken: api.getToken, threadId, tools: tools ? new Set(tools) : null };
    this.close();
    this.#open();
  }

  /**
   * Closes the call stream until the next {@link setOptions} or until the
   * element is attached to a document again. `disconnectedCallback` calls it.
   */
  close() {
    this.#session?.ctrl.abort();
    this.#session = null;
  }

  connectedCallback() {
    if (this.#options && !this.#session) this.#open();
  }

  disconnectedCallback() {
    this.close();
  }

  /**
   * Registers or updates a page fact (a readable).
   * @param {string} name
   * @param {unknown} value
   * @throws {TypeError} for a bad name or value; the previous value stays
   */
  setReadable(name, value) {
    this.#readables.set(name, value);
  }

  /**
   * @param {string} name
   * @returns {boolean} whether it was registered
   */
  removeReadable(name) {
    return this.#readables.remove(name);
  }

  /**
   * The page context to send with a user message, within the limits; an empty
   * array means nothing is attached. Dropped names are reported in a `warn` log.
   * @returns {Array<{name: string, value: unknown}>}
   */
  pageContext() {
    const { items, dropped } = this.#readables.snapshot();
    if (dropped.length) {
      this.#log('warn', `page context over its limits: ${dropped.length} item(s) dropped`, { names: dropped });
    }
    return items;
  }

  #emit(type, detail) {
    if (typeof this.dispatchEvent !== 'function' || typeof CustomEvent !== 'function') return;
    this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true, composed: true }));
  }

  #log(level, message, data) {
    this.#emit('toolgate.log', data === undefined ? { level, message } : { level, message, data });
  }

  #open() {
    const session = { ...this.#options, ctrl: new AbortController(), token: null };
    this.#session = session;
    this.#stream(session);
  }

  async #token(session, fresh) {
    if (fresh || !session.token) session.token = Promise.resolve().then(() => session.getToken());
    const pending = session.token;
    try {
      const token = await pending;
      if (typeof token !== 'string' || !token) throw new Error('getToken gave no token');
      return token;
    } catch (err) {
      if (session.token === pending) session.token = null;
      throw err;
    }
  }

  /** POSTs with the page token, fetching a fresh token once on 401. */
  async #post(session, path, body) {
    for (let fresh = false; ; fresh = true) {
      const headers = { Authorization: `Bearer ${await this.#token(session, fresh)}` };
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      const res = await fetch(session.url + path, { method: 'POST', headers, body });
      if (res.status !== 401 || fresh) return res;
    }
  }

  async #stream(session) {
    const { signal } = session.ctrl;
    const url = `${session.url}/client/calls?threadId=${encodeURIComponent(session.threadId)}`;
    let delay = BACKOFF_MIN_MS;
    let fresh = false;
    let failing = false;
    while (!signal.aborted) {
      const conn = new AbortController();
      const stop = () => conn.abort();
      signal.addEventListener('abort', stop);
      let timer;
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(stop, IDLE_TIMEOUT_MS);
      };
      let retryAfterMs = 0;
      try {
        const token = await this.#token(session, fresh);
        const user = tokenSubject(token);
        fresh = false;
        arm();
        const res = await fetch(url, {
          headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' },
          cache: 'no-store',
          signal: conn.signal,
        });
        // 401: the token expired or is bad; 404: it names another thread. Ask for a new one.
        // 429: too many streams open (for this token, its thread, or the gateway); wait as told, keep the token.
        if (res.status === 429) retryAfterMs = Math.min(Number(res.headers.get('Retry-After')) * 1000 || 0, RETRY_AFTER_MAX_MS);
        else if (res.status >= 400 && res.status < 500) fresh = true;
        if (!res.ok || !res.body) throw new Error(`call stream answered ${res.status} ${await serverMessage(res)}`.trim());
        delay = BACKOFF_MIN_MS;
        if (failing) this.#log('info', 'call stream reconnected', { threadId: session.threadId });
        failing = false;
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        const parser = new SSEParser();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          arm();
          for (const ev of parser.push(decoder.decode(value, { stream: true }))) {
            if (ev.event === 'call') this.#offer(session, user, ev.data);
          }
        }
      } catch (err) {
        if (signal.aborted) break;
        if (!failing) this.#log('warn', `call stream failed, retrying: ${errorText(err)}`, { threadId: session.threadId });
        failing = true;
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', stop);
      }
      await sleep(Math.max(delay, retryAfterMs), signal);
      delay = Math.min(delay * 2, BACKOFF_MAX_MS);
    }
  }

  #offer(session, user, data) {
    let call;
    try {
      call = JSON.parse(data);
    } catch {
      this.#log('warn', 'call event with malformed data ignored', { data });
      return;
    }
    const { callId: id, name, input } = call ?? {};
    if (typeof id !== 'string' || !id || typeof name !== 'string') {
      this.#log('warn', 'call event without callId or name ignored', { data });
      return;
    }
    if (session.tools && !session.tools.has(name)) {
      // Another page of the thread may implement it: not claimed here.
      this.#log('info', `call ${id} of ${name} left for a page that implements it`, { id, name });
      return;
    }
    const key = callKey(user, session.threadId, id);
    if (started.has(key)) return; // running or ran in this page's life
    if (doneIds(user, session.threadId).includes(id)) {
      this.#log('info', `call ${id} already answered from this page, skipped`, { id, name });
      return;
    }
    started.add(key);
    this.#run(session, user, id, name, input).catch((err) => {
      this.#log('error', `call ${id} failed unexpectedly: ${errorText(err)}`, { id, name });
    });
  }

  async #run(session, user, id, name, input) {
    const key = callKey(user, session.threadId, id);
    const base = `/client/calls/${encodeURIComponent(id)}`;
    let res;
    try {
      res = await this.#post(session, `${base}/claim`);
    } catch (err) {
      started.delete(key); // unclaimed: the server may offer it again
      this.#log('warn', `claim of call ${id} failed: ${errorText(err)}`, { id, name });
      return;
    }
    if (!res.ok) {
      started.delete(key);
      const why = res.status === 409 ? 'claimed elsewhere or already answered' : res.status === 404 ? 'not for this page' : 'refused';
      const level = res.status === 409 || res.status === 404 ? 'info' : 'warn';
      this.#log(level, `call ${id} skipped: ${why}`, { id, name, status: res.status });
      return;
    }
    res.body?.cancel().catch(() => {});

    const handler = this.#handler;
    let body;
    let isError = false;
    if (!handler) {
      isError = true;
      body = JSON.stringify({ error: `tool ${name} is not available on this page` });
      this.#log('warn', `no onClientTool handler: tool ${name} is not available on this page`, { id, name });
    } else {
      this.#emit('toolgate.tool.change', { id, name, status: 'start' });
      try {
        body = resultBody(await handler({ id, name, input }));
      } catch (err) {
        isError = true;
        body = JSON.stringify({ error: errorText(err) });
      }
    }

    let out;
    try {
      out = await this.#post(session, `${base}/result`, body);
    } catch (err) {
      this.#log('error', `write-back of call ${id} failed: ${errorText(err)}`, { id, name });
      return;
    }
    if (out.ok) {
      out.body?.cancel().catch(() => {});
      rememberDone(user, session.threadId, id);
      if (handler) this.#emit('toolgate.tool.change', { id, name, status: 'end', isError });
      return;
    }
    if (out.status === 409) rememberDone(user, session.threadId, id); // it has a result (or timed out) already
    const detail = await serverMessage(out);
    this.#log('error', `write-back of call ${id} failed: ${out.status} ${detail}`.trim(), { id, name, status: out.status });
  }
}

if (globalThis.customElements && !customElements.get('toolgate-client')) {
  customElements.define('toolgate-client', ToolgateClient);
}

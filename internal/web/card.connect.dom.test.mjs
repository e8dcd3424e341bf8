// <toolgate-card>'s connect cards (docs/connections.md) in a DOM (jsdom,
// from the root npm workspace) with a stubbed fetch and mocked timers: the
// link button, what opening it starts (asking for the call every 2 s while
// the page is visible, until the link expires) and "I've connected —
// continue". The browser tests (examples/browser/card-link.test.mjs,
// connect-real.test.mjs) do the same in Chromium.
import { test, beforeEach, afterEach, mock } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><html><body></body></html>", { url: "http://app.test/" });
for (const name of ["window", "document", "HTMLElement", "customElements", "CustomEvent", "Event"]) {
  globalThis[name] = name === "window" ? dom.window : dom.window[name];
}
const { CONNECT_POLL, linkURL } = await import("./card.js");

const gateway = "http://gw.test/toolgate";
const authorize = "https://accounts.example/authorize?client_id=gw&state=s1";

/** connectAnswer is the gateway's connect card for call c1, its link lasting ms. */
function connectAnswer({ url = authorize, ms = 10 * 60e3, callId = "c1" } = {}) {
  return {
    callId,
    tool: "list_mail",
    status: "action_required",
    card: {
      type: "action_required",
      title: "Connect Gmail",
      description: "list_mail acts on your Gmail account. Connect it, and the call goes on by itself.",
      connection: { name: "gmail", title: "Gmail", expires: new Date(Date.now() + ms).toISOString() },
      elements: [{ type: "button", id: "connect", label: "Connect Gmail", variant: "primary", url }],
    },
  };
}

const done = { callId: "c1", tool: "list_mail", status: "done", isError: false, content: "3 new messages" };

let sent; // what reached fetch: {url, method, body}
let replies; // what fetch answers, in turn: {status, json}; none left: the card as it is

beforeEach(() => {
  sent = [];
  replies = [];
  document.body.replaceChildren();
  setVisibility("visible");
  globalThis.fetch = async (url, init) => {
    sent.push({ url: String(url), method: init.method, body: init.body && JSON.parse(init.body) });
    const r = replies.shift() ?? { status: 200, json: connectAnswer() };
    return new Response(JSON.stringify(r.json), { status: r.status, headers: { "Content-Type": "application/json" } });
  };
  mock.timers.enable({ apis: ["setTimeout"] });
});

afterEach(() => mock.timers.reset());

/** setVisibility makes the page hidden or visible, as a browser tab does, and says so. */
function setVisibility(state) {
  Object.defineProperty(document, "visibilityState", { configurable: true, get: () => state });
  document.dispatchEvent(new Event("visibilitychange"));
}

/** mount shows an answer in a new card on the page; events are recorded. */
function mount(answer, props = {}) {
  const card = document.createElement("toolgate-card");
  card.gateway = gateway;
  card.identity = { user: "u_1", install: "in_1" };
  Object.assign(card, props);
  const events = [];
  for (const type of ["toolgate.card.resolved", "toolgate.card.error"]) card.addEventListener(type, (e) => events.push({ type, detail: e.detail }));
  // jsdom opens no window: the test stands in for the browser.
  card.addEventListener("click", (e) => e.preventDefault());
  document.body.append(card);
  card.answer = answer;
  return { card, root: card.shadowRoot, events };
}

/** settle lets the stubbed fetch and the card's promises run (timers are mocked). */
async function settle() {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

/** tick moves the mocked clock of setTimeout by ms and lets what it ran settle. */
async function tick(ms) {
  mock.timers.tick(ms);
  await settle();
}

const button = (root, name) => [...root.querySelectorAll("button")].find((b) => b.textContent === name);
const gets = () => sent.filter((s) => s.method === "GET");
const posts = () => sent.filter((s) => s.method === "POST");

test("linkURL opens absolute http(s) URLs only", () => {
  assert.equal(linkURL("https://a.example/x?y=1"), "https://a.example/x?y=1");
  assert.equal(linkURL("http://127.0.0.1:9/authorize"), "http://127.0.0.1:9/authorize");
  for (const bad of ["javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,<script>1</script>", "mailto:a@b.example",
    "/relative", "//no-scheme.example/x", "https://", "file:///etc/passwd", "blob:https://a.example/1", "", null, undefined, 5, {}]) {
    assert.equal(linkURL(bad), "", String(bad));
  }
});

test("the link button is a link to a new window, beside continue, Skip and Cancel; showing it sends nothing", async () => {
  const { root } = mount(connectAnswer());
  const a = root.querySelector("a[part~=link]");
  assert.equal(a.textContent, "Connect Gmail");
  assert.equal(a.getAttribute("href"), authorize);
  assert.equal(a.getAttribute("target"), "_blank");
  assert.equal(a.getAttribute("rel"), "noopener noreferrer");
  assert.equal(a.getAttribute("part"), "button link primary");
  assert.deepEqual([...root.querySelector("[part=actions]").children].map((e) => `${e.tagName} ${e.textContent}`),
    ["A Connect Gmail", "BUTTON I've connected — continue", "BUTTON Skip", "BUTTON Cancel"]);
  assert.equal(button(root, "I've connected — continue").getAttribute("part"), "button continue");
  assert.equal(root.querySelector("[part=expires]").textContent, "The link expires in 9 min.");
  await tick(5 * CONNECT_POLL);
  assert.deepEqual(sent, [], "nothing is asked before the link is opened");
});

test("a link that is no http(s) URL is a disabled button, and pressing it sends nothing", async () => {
  for (const url of ["javascript:window.__pwned=1", "data:text/html,<script>parent.__pwned=1</script>", "mailto:a@b.example", "/connections/x", 42]) {
    const { root } = mount(connectAnswer({ url }));
    assert.equal(root.querySelectorAll("a").length, 0, String(url));
    const b = button(root, "Connect Gmail");
    assert.equal(b.disabled, true);
    assert.equal(b.getAttribute("part"), "button link primary");
    b.click();
    await tick(CONNECT_POLL);
  }
  assert.deepEqual(sent, []);
  assert.equal(window.__pwned, undefined);
});

test("opened, the card asks for its call every 2 s and shows the answer once the call went on", async () => {
  const { root, events } = mount(connectAnswer());
  root.querySelector("a").click();
  await settle();
  assert.deepEqual(sent, [], "opening the link resumes nothing");
  assert.match(root.querySelector("[part=notice]").textContent, /Connect Gmail in the window that opened: the call goes on by itself/);
  await tick(CONNECT_POLL - 1);
  assert.equal(gets().length, 0);
  await tick(1);
  assert.equal(gets().length, 1);
  assert.equal(gets()[0].url, `${gateway}/calls/c1?user=u_1&install=in_1`);
  // A second press of the link starts no second round of asking.
  root.querySelector("a").click();
  await tick(CONNECT_POLL);
  assert.equal(gets().length, 2);
  replies.push({ status: 200, json: done });
  await tick(CONNECT_POLL);
  assert.equal(gets().length, 3);
  assert.equal(root.querySelector("[part=content]").textContent, "3 new messages");
  assert.equal(events.at(-1).type, "toolgate.card.resolved");
  assert.equal(events.at(-1).detail.content, "3 new messages");
  await tick(5 * CONNECT_POLL);
  assert.equal(gets().length, 3, "nothing asked once the call settled");
  assert.deepEqual(posts(), []);
});

test("with a caller token, asking carries it and no identity", async () => {
  const { root } = mount(connectAnswer(), { identity: undefined, getToken: async () => "tok_1" });
  root.querySelector("a").click();
  replies.push({ status: 200, json: done });
  await tick(CONNECT_POLL);
  assert.equal(gets()[0].url, `${gateway}/calls/c1`);
  assert.equal(root.querySelector("[part=content]").textContent, "3 new messages");
});

test("a hidden page asks nothing; shown again it asks at once", async () => {
  const { root } = mount(connectAnswer());
  root.querySelector("a").click();
  setVisibility("hidden"); // the person is in the service's window
  await tick(5 * CONNECT_POLL);
  assert.equal(gets().length, 0);
  replies.push({ status: 200, json: done });
  setVisibility("visible");
  await tick(0);
  assert.equal(gets().length, 1);
  assert.equal(root.querySelector("[part=content]").textContent, "3 new messages");
});

test("a card taken off the page asks nothing until it is back", async () => {
  const { card, root } = mount(connectAnswer());
  root.querySelector("a").click();
  card.remove();
  await tick(3 * CONNECT_POLL);
  assert.equal(gets().length, 0);
  document.body.append(card);
  await tick(0);
  assert.equal(gets().length, 1);
});

test("asking stops when the link expires, and says how to go on", async () => {
  const answer = connectAnswer({ ms: 400 });
  const { root } = mount(answer);
  root.querySelector("a").click();
  await tick(CONNECT_POLL);
  assert.equal(gets().length, 1);
  // Date is not mocked (Node 20's mock timers cannot): wait out the link for real.
  const until = Date.parse(answer.card.connection.expires) + 10;
  while (Date.now() < until) await new Promise((r) => setImmediate(r));
  await tick(CONNECT_POLL);
  await tick(5 * CONNECT_POLL);
  assert.equal(gets().length, 1);
  assert.match(root.querySelector("[part=notice]").textContent, /The link has expired: press “I've connected — continue”/);
});

test("a link opened after it expired asks nothing", async () => {
  const { root } = mount(connectAnswer({ ms: -60e3 }));
  assert.equal(root.querySelector("[part=expires]").textContent, "The link expired 1 min ago.");
  root.querySelector("a").click();
  await tick(5 * CONNECT_POLL);
  assert.deepEqual(sent, []);
  assert.match(root.querySelector("[part=notice]").textContent, /expired/);
});

test("a new card for the call (a new link) is shown; the same card is not shown anew", async () => {
  const { root } = mount(connectAnswer());
  root.querySelector("a").click();
  const typed = root.querySelector("a");
  await tick(CONNECT_POLL);
  assert.equal(root.querySelector("a"), typed, "the same card stays as it is");
  replies.push({ status: 200, json: connectAnswer({ url: "https://accounts.example/authorize?state=s2" }) });
  await tick(CONNECT_POLL);
  assert.equal(root.querySelector("a").getAttribute("href"), "https://accounts.example/authorize?state=s2");
  await tick(3 * CONNECT_POLL);
  assert.equal(gets().length, 2, "the new card waits for its own link to be opened");
});

test("a refusal stops the asking and is shown; a network failure is asked again", async () => {
  const { root, events } = mount(connectAnswer());
  root.querySelector("a").click();
  globalThis.fetch = async (url, init) => {
    sent.push({ url: String(url), method: init.method });
    throw new TypeError("failed to fetch");
  };
  await tick(CONNECT_POLL);
  await tick(CONNECT_POLL);
  assert.equal(gets().length, 2);
  globalThis.fetch = async (url, init) => {
    sent.push({ url: String(url), method: init.method });
    return new Response(JSON.stringify({ error: { code: "not_found", message: "no call c1" } }), { status: 404 });
  };
  await tick(CONNECT_POLL);
  assert.equal(gets().length, 3);
  assert.equal(root.querySelector("[part=notice]").textContent, "no call c1");
  assert.deepEqual(events.at(-1), { type: "toolgate.card.error", detail: { status: 404, code: "not_found", message: "no call c1" } });
  await tick(5 * CONNECT_POLL);
  assert.equal(gets().length, 3);
});

test("continue resumes with the link's button; Skip and Cancel as on every card", async () => {
  const fresh = connectAnswer({ url: "https://accounts.example/authorize?state=s2" });
  replies.push({ status: 200, json: fresh });
  const { root } = mount(connectAnswer());
  button(root, "I've connected — continue").click();
  await settle();
  assert.deepEqual(posts().map((p) => [p.url, p.body]), [
    [`${gateway}/calls/c1/resume`, { buttonId: "connect", identity: { user: "u_1", install: "in_1" } }],
  ]);
  assert.equal(root.querySelector("a").getAttribute("href"), "https://accounts.example/authorize?state=s2");
  for (const action of ["skip", "cancel"]) {
    replies.push({ status: 200, json: { ...done, content: `${action}ped` } });
    const { root: r } = mount(connectAnswer());
    button(r, action === "skip" ? "Skip" : "Cancel").click();
    await settle();
    assert.deepEqual(posts().at(-1).body, { action, identity: { user: "u_1", install: "in_1" } });
  }
});

test("without a gateway (a page's resume hook), opening asks nothing and continue goes through the hook", async () => {
  const choices = [];
  const { card, root } = mount(connectAnswer(), { resume: async (a, choice) => (choices.push(choice), done) });
  card.gateway = undefined;
  root.querySelector("a").click();
  await tick(5 * CONNECT_POLL);
  assert.deepEqual(sent, []);
  assert.match(root.querySelector("[part=notice]").textContent, /then press “I've connected — continue”/);
  button(root, "I've connected — continue").click();
  await settle();
  assert.deepEqual(choices, [{ buttonId: "connect" }]);
  assert.equal(root.querySelector("[part=content]").textContent, "3 new messages");
});

test("a card that is no connect card gets no continue; its link opens and asks nothing", async () => {
  const a = connectAnswer();
  delete a.card.connection;
  const { root } = mount(a);
  assert.equal(button(root, "I've connected — continue"), undefined);
  root.querySelector("a").click();
  await tick(5 * CONNECT_POLL);
  assert.deepEqual(sent, []);
});

test("a hostile connection title is text", () => {
  const a = connectAnswer();
  a.card.connection.title = "<img src=x onerror=alert(1)>";
  const { root } = mount(a);
  root.querySelector("a").click();
  assert.equal(root.querySelectorAll("img").length, 0);
  assert.match(root.querySelector("[part=notice]").textContent, /<img src=x onerror=alert\(1\)>/);
});

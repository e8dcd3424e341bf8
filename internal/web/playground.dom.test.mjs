// The playground's "Waiting for you" and "Connections" panels in a DOM (jsdom, from the root
// npm workspace): playground.html with playground.js against a stubbed
// fetch standing in for the gateway. The browser test
// (examples/browser/playground.test.mjs) runs the page in Chromium.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { JSDOM } from "jsdom";

const page = "http://gw.test/toolgate/playground";
const dom = new JSDOM(readFileSync(new URL("./playground.html", import.meta.url), "utf8"), { url: page });
for (const name of ["window", "document", "location", "HTMLElement", "customElements", "CustomEvent", "Event"]) {
  globalThis[name] = name === "window" ? dom.window : dom.window[name];
}
const $ = (id) => document.getElementById(id);

/** An approval card waiting, and an app's card, as GET /waiting lists them. */
const approval = {
  callId: "c1",
  tool: "pay",
  status: "action_required",
  card: {
    type: "action_required",
    title: "Approve payment",
    approval: {
      tool: "pay",
      input: { amount: 250, to: "<img src=x onerror=alert(1)>" },
      schema: { type: "object", properties: { amount: { type: "number" }, to: { type: "string" } }, required: ["amount", "to"] },
      expires: new Date(Date.now() + 3 * 3600e3 + 60e3).toISOString(),
    },
    elements: [
      { type: "button", id: "approve", label: "Approve", variant: "primary" },
      { type: "button", id: "reject", label: "Reject", variant: "danger" },
    ],
  },
};
const appCard = {
  callId: "c2",
  tool: "clear_bookmarks",
  status: "action_required",
  card: { type: "action_required", title: "Clear all?", elements: [{ type: "button", id: "yes", label: "Yes" }] },
};

// The stubbed gateway: each request is recorded; routes answer by
// "METHOD path?query", the waiting list from `waiting` as it is now.
const sent = [];
let waiting = [approval, appCard];
/** The connections as GET /connections lists them; a stray token field is never shown. */
let connections = [
  { name: "gmail", title: "Gmail", connected: true, scope: "mail.read", since: "2026-12-02T10:00:00Z", expires: "2026-12-02T11:00:00Z", access_token: "at_never_shown" },
  { name: "drive", title: "<img src=x onerror=alert(1)>", connected: false },
];
const routes = {
  "GET /toolgate/connections": () => ({ status: 200, json: { connections } }),
  "DELETE /toolgate/connections/gmail": () => {
    connections = connections.map((c) => (c.name === "gmail" ? { name: "gmail", title: "Gmail", connected: false } : c));
    return { status: 204 };
  },
  "DELETE /toolgate/connections/drive": () => ({ status: 503, json: { error: { code: "unavailable", message: "the store is down" } } }),
  "GET /toolgate/tools": () => ({ status: 200, json: [] }),
  "GET /toolgate/waiting": () => ({ status: 200, json: { calls: waiting } }),
  "POST /toolgate/calls/c1/resume": () => {
    waiting = waiting.filter((c) => c.callId !== "c1");
    return { status: 200, json: { callId: "c1", tool: "pay", status: "done", isError: false, content: "Paid 300." } };
  },
  "POST /toolgate/calls/c2/resume": () => ({ status: 409, json: { error: { code: "already_resumed", message: "the card was answered" } } }),
};
globalThis.fetch = async (url, init = {}) => {
  const u = new URL(String(url));
  const r = { method: init.method ?? "GET", path: u.pathname, query: u.search, headers: init.headers ?? {}, body: init.body && JSON.parse(init.body) };
  sent.push(r);
  const route = routes[`${r.method} ${r.path}`];
  const { status, json } = route ? route(r) : { status: 404, json: { error: { code: "not_found", message: "no route" } } };
  if (status === 204) return new Response(null, { status });
  return new Response(JSON.stringify(json), { status, headers: { "Content-Type": "application/json" } });
};

await import("./playground.js");

const settle = () => new Promise((r) => setTimeout(r, 20));
const waitingGets = () => sent.filter((r) => r.method === "GET" && r.path === "/toolgate/waiting");
const cards = () => [...$("waiting-list").querySelectorAll("toolgate-card")];
const button = (card, name) => [...card.shadowRoot.querySelectorAll("button")].find((b) => b.textContent === name);

test("on load, the calls waiting for the playground's user, oldest first, each a card", async () => {
  await settle();
  assert.equal(waitingGets().length, 1);
  assert.equal(waitingGets()[0].query, "?user=u_1&install=in_1");
  assert.equal(waitingGets()[0].headers.Authorization, undefined);
  assert.deepEqual([...$("waiting-list").querySelectorAll(".caption")].map((p) => p.textContent), ["pay · c1", "clear_bookmarks · c2"]);
  const [pay, clear] = cards();
  assert.equal(pay.answer.card.title, "Approve payment");
  assert.equal(pay.shadowRoot.querySelector("dl.sent dd:nth-of-type(2)").textContent, "<img src=x onerror=alert(1)>");
  assert.equal(document.querySelectorAll("img").length + pay.shadowRoot.querySelectorAll("img").length, 0);
  assert.equal(pay.shadowRoot.querySelector("[part=expires]").textContent, "expires in 3 h");
  assert.ok(button(clear, "Yes"));
  assert.equal($("waiting-empty").textContent, "");
});

test("a card answered there moves to Result and the list is loaded again", async () => {
  const [pay] = cards();
  button(pay, "Approve with changes").click();
  const amount = pay.shadowRoot.getElementById(
    [...pay.shadowRoot.querySelectorAll("form.changes label")].find((l) => l.textContent === "amount").htmlFor);
  amount.value = "300";
  const before = waitingGets().length;
  button(pay, "Approve with these changes").click();
  await settle();
  const resume = sent.find((r) => r.path === "/toolgate/calls/c1/resume");
  assert.deepEqual(resume.body, {
    buttonId: "approve", input: { amount: 300, to: "<img src=x onerror=alert(1)>" }, identity: { user: "u_1", install: "in_1" },
  });
  assert.equal(waitingGets().length, before + 1);
  assert.deepEqual(cards().map((c) => c.answer.callId), ["c2"]);
  const result = $("cards").querySelector("toolgate-card");
  assert.equal(result, pay);
  assert.equal(result.shadowRoot.querySelector(".content").textContent, "Paid 300.");
});

test("a refresh keeps a card still waiting as it is; one answered elsewhere (409) reloads the list", async () => {
  const [clear] = cards();
  $("waiting-refresh").click();
  await settle();
  assert.equal(cards()[0], clear, "the same element: nothing typed into it is lost");
  waiting = [];
  const before = waitingGets().length;
  button(clear, "Yes").click();
  await settle();
  assert.equal(waitingGets().length, before + 1);
  assert.deepEqual(cards(), []);
  assert.equal($("waiting-empty").textContent, "Nothing waits for you.");
});

test("Refresh lists what waits now; a refusal is shown", async () => {
  waiting = [appCard];
  $("waiting-refresh").click();
  await settle();
  assert.deepEqual(cards().map((c) => c.answer.callId), ["c2"]);
  assert.equal($("waiting-empty").textContent, "");

  routes["GET /toolgate/waiting"] = () => ({ status: 401, json: { error: { code: "unauthorized", message: "a caller token is required" } } });
  $("waiting-refresh").click();
  await settle();
  assert.equal($("waiting-error").textContent, "unauthorized: a caller token is required (type a caller token)");
  routes["GET /toolgate/waiting"] = () => ({ status: 200, json: { calls: waiting } });
});

test("with a caller token, the token says who: no user in the query, and the cards are made anew", async () => {
  const [old] = cards();
  $("token").value = "tok_1";
  $("token").dispatchEvent(new Event("change"));
  await settle();
  const get = waitingGets().at(-1);
  assert.equal(get.query, "");
  assert.equal(get.headers.Authorization, "Bearer tok_1");
  assert.equal($("waiting-error").textContent, "");
  assert.notEqual(cards()[0], old);
  assert.equal(cards()[0].identity, undefined);
  $("token").value = "";
  $("token").dispatchEvent(new Event("change"));
  await settle();
});

test("a tool run from the playground that answers action_required loads the list again", async () => {
  routes["GET /toolgate/tools"] = () => ({ status: 200, json: [{ name: "pay", input_schema: { type: "object", properties: {} } }] });
  routes["POST /toolgate/tools/pay"] = () => ({ status: 200, json: { ...approval, callId: "c3" } });
  $("token").dispatchEvent(new Event("change")); // loads the tools again
  await settle();
  $("tools").querySelector("button").click();
  waiting = [appCard, { ...approval, callId: "c3" }];
  const before = waitingGets().length;
  $("tool-form").dispatchEvent(new Event("submit", { cancelable: true }));
  await settle();
  assert.equal(waitingGets().length, before + 1);
  assert.deepEqual(cards().map((c) => c.answer.callId), ["c2", "c3"]);
});

const connectionGets = () => sent.filter((r) => r.method === "GET" && r.path === "/toolgate/connections");
const connectionItems = () => [...$("connection-list").children].map((li) => [li.dataset.name, li.textContent]);

test("the Connections panel lists the user's connections, connected or not, never a token", async () => {
  await settle();
  assert.ok(connectionGets().length >= 1);
  assert.equal(connectionGets()[0].query, "?user=u_1&install=in_1");
  assert.deepEqual(connectionItems(), [
    ["gmail", "Gmailconnectedconnection gmailscope mail.readsince 2026-12-02 10:00 UTCexpires 2026-12-02 11:00 UTCDisconnect"],
    ["drive", "<img src=x onerror=alert(1)>not connectedconnection drive"],
  ]);
  assert.deepEqual([...$("connection-list").querySelectorAll(".detail[title]")].map((p) => p.title), ["2026-12-02T10:00:00Z", "2026-12-02T11:00:00Z"]);
  assert.equal($("connections").querySelectorAll("img").length, 0);
  assert.doesNotMatch($("connections").textContent, /at_never_shown/);
  // Only a connection that is made can be undone.
  assert.deepEqual([...$("connection-list").querySelectorAll("button")].map((b) => b.getAttribute("aria-label")), ["Disconnect Gmail"]);
});

test("Disconnect deletes the user's connection and lists them again; a refusal is shown", async () => {
  const before = connectionGets().length;
  $("connection-list").querySelector("button").click();
  await settle();
  const del = sent.find((r) => r.method === "DELETE");
  assert.equal(del.path, "/toolgate/connections/gmail");
  assert.equal(del.query, "?user=u_1&install=in_1");
  assert.equal(connectionGets().length, before + 1);
  assert.equal(connectionItems()[0][1], "Gmailnot connectedconnection gmail");
  assert.equal($("connections-error").textContent, "");

  connections = [{ name: "drive", title: "Drive", connected: true }];
  $("connections-refresh").click();
  await settle();
  const b = $("connection-list").querySelector("button");
  b.click();
  await settle();
  assert.equal($("connections-error").textContent, "unavailable: the store is down");
  assert.equal(b.disabled, false, "a refused disconnect can be tried again");
  assert.equal(connectionItems()[0][1], "Driveconnectedconnection driveDisconnect");
});

test("with a caller token, the token says whose connections; a refusal is shown", async () => {
  $("token").value = "tok_2";
  $("token").dispatchEvent(new Event("change"));
  await settle();
  const get = connectionGets().at(-1);
  assert.equal(get.query, "");
  assert.equal(get.headers.Authorization, "Bearer tok_2");
  routes["GET /toolgate/connections"] = () => ({ status: 401, json: { error: { code: "unauthorized", message: "a caller token is required" } } });
  $("connections-refresh").click();
  await settle();
  assert.equal($("connections-error").textContent, "unauthorized: a caller token is required (type a caller token)");
  $("token").value = "";
});

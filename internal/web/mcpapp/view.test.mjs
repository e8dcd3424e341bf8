// The MCP Apps view's protocol with a fake window and card: what it sends
// the host, and what it takes from whom. The browser test
// (examples/browser/mcpapp.test.mjs) runs it in a real host frame.
import { test } from "node:test";
import assert from "node:assert/strict";
import { safeURL } from "../card.js";
import { View, answerOf, stateOf, answerArgs, themeOf, PROTOCOL_VERSION } from "./view.js";

/** fakeWindow is a window whose parent records what the view posts. */
function fakeWindow() {
  const listeners = [];
  const sent = [];
  const props = {};
  const win = {
    parent: { postMessage: (m, origin) => sent.push({ m: structuredClone(m), origin }) },
    addEventListener: (type, f) => type === "message" && listeners.push(f),
    document: { documentElement: { getBoundingClientRect: () => ({ height: 42.2 }), style: { setProperty: (k, v) => (props[k] = v) } } },
    ResizeObserver: class {
      observe() {}
    },
  };
  const deliver = (data, source = win.parent) => listeners.forEach((f) => f({ data, source }));
  return { win, sent, deliver, props };
}

/** fakeCard records the answers it is given. */
function fakeCard() {
  const answers = [];
  const listeners = {};
  return {
    answers,
    listeners,
    addEventListener(type, f) {
      (listeners[type] ??= []).push(f);
    },
    set answer(a) {
      answers.push(a);
    },
  };
}

/** started is a view past ui/initialize, with the host's result given. */
async function started(hostContext = {}) {
  const w = fakeWindow();
  const card = fakeCard();
  const view = new View(w.win, card);
  const done = view.start();
  const init = w.sent[0].m;
  w.deliver({ jsonrpc: "2.0", id: init.id, result: { protocolVersion: PROTOCOL_VERSION, hostInfo: { name: "h", version: "1" }, hostCapabilities: {}, hostContext } });
  await done;
  return { ...w, card, view, init };
}

const cardResult = (state) => ({
  content: [{ type: "text", text: "waits" }],
  structuredContent: { status: "action_required", callId: "c1", card: { type: "action_required", title: "T", elements: [] } },
  ...(state === undefined ? {} : { _meta: { "toolgate/state": state } }),
});

test("the handshake: ui/initialize, then initialized and the height, to the parent only", async () => {
  const { sent, init, card } = await started();
  assert.equal(init.method, "ui/initialize");
  assert.equal(init.params.protocolVersion, "2026-01-26");
  assert.equal(init.params.appInfo.name, "toolgate-card");
  assert.deepEqual(sent.slice(1).map((s) => s.m), [
    { jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} },
    { jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height: 43 } },
  ]);
  assert.equal(card.embedMaxShare, 0, "the host sizes the view: no viewport cap");
});

test("a tool-result from the parent is shown; from any other window it is not", async () => {
  const { deliver, card, win } = await started();
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: cardResult("s1") }, {});
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: cardResult("s1") }, win);
  assert.equal(card.answers.length, 0);
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: cardResult("s1") });
  assert.equal(card.answers.length, 1);
  assert.equal(card.answers[0].callId, "c1");
});

test("a press calls toolgate_card_answer through the host with the result's state, and keeps the next one", async () => {
  const { deliver, card, sent } = await started();
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: cardResult("s1") });
  const pressed = card.resume(card.answers[0], { buttonId: "go" });
  const req = sent.at(-1).m;
  assert.equal(req.method, "tools/call");
  assert.deepEqual(req.params, { name: "toolgate_card_answer", arguments: { state: "s1", button: "go" } });
  // A response from another window does not settle it.
  deliver({ jsonrpc: "2.0", id: req.id, result: { structuredContent: { status: "done", content: "forged" } } }, {});
  const next = { status: "action_required", callId: "c1", card: { type: "action_required", title: "Again", elements: [] } };
  deliver({ jsonrpc: "2.0", id: req.id, result: { content: [], structuredContent: next, _meta: { "toolgate/state": "s2" } } });
  assert.deepEqual(await pressed, next);
  card.resume(next, { action: "skip" });
  assert.deepEqual(sent.at(-1).m.params.arguments, { state: "s2", action: "skip" });
});

test("Approve with changes calls toolgate_card_answer with the approve button and the input", async () => {
  const { deliver, card, sent } = await started();
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: cardResult("s1") });
  const pressed = card.resume(card.answers[0], { buttonId: "approve", input: { amount: 300, to: "acme" } });
  const req = sent.at(-1).m;
  assert.deepEqual(req.params, {
    name: "toolgate_card_answer",
    arguments: { state: "s1", button: "approve", input: { amount: 300, to: "acme" } },
  });
  // The gateway's refusal of the input (with a fresh state, as the card still waits) is the press's error.
  deliver({ jsonrpc: "2.0", id: req.id, result: { isError: true, content: [{ type: "text", text: "amount: must be at most 200" }], _meta: { "toolgate/state": "s2" } } });
  await assert.rejects(pressed, /must be at most 200/);
  card.resume(card.answers[0], { buttonId: "approve", input: { amount: 150, to: "acme" } });
  assert.deepEqual(sent.at(-1).m.params.arguments, { state: "s2", button: "approve", input: { amount: 150, to: "acme" } });
});

test("a press without a state sends nothing; a refusal is an error with its text", async () => {
  const { deliver, card, sent } = await started();
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: cardResult(undefined) });
  const n = sent.length;
  await assert.rejects(card.resume(card.answers[0], { buttonId: "go" }), /cannot be answered here/);
  assert.equal(sent.length, n, "nothing posted");

  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: cardResult("s1") });
  const pressed = card.resume(card.answers[1], { buttonId: "go" });
  const req = sent.at(-1).m;
  deliver({ jsonrpc: "2.0", id: req.id, result: { isError: true, content: [{ type: "text", text: "the card's state was already used" }] } });
  await assert.rejects(pressed, /already used/);
  // The state is kept: the gateway refuses a used one itself.
  const again = card.resume(card.answers[1], { buttonId: "go" });
  assert.equal(sent.at(-1).m.params.arguments.state, "s1");
  deliver({ jsonrpc: "2.0", id: sent.at(-1).m.id, error: { code: -32000, message: "host says no" } });
  await assert.rejects(again, /host says no/);

  // A refusal of a card that still waits brings a fresh state: the next
  // press uses it.
  const refused = card.resume(card.answers[1], { buttonId: "gone" });
  deliver({ jsonrpc: "2.0", id: sent.at(-1).m.id, result: { isError: true, content: [{ type: "text", text: 'the card has no button "gone"' }], _meta: { "toolgate/state": "s3" } } });
  await assert.rejects(refused, /no button/);
  card.resume(card.answers[1], { action: "skip" });
  assert.deepEqual(sent.at(-1).m.params.arguments, { state: "s3", action: "skip" });
});

test("a cancelled call is shown as such, and its card can no longer be pressed", async () => {
  const { deliver, card, sent } = await started();
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: cardResult("s1") });
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: { reason: "<b>user</b> action" } });
  assert.deepEqual(card.answers.at(-1), { status: "done", tool: "", isError: true, content: "The call was cancelled: <b>user</b> action" });
  const n = sent.length;
  await assert.rejects(card.resume(card.answers[0], { buttonId: "go" }), /cannot be answered here/);
  assert.equal(sent.length, n);
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: { reason: 5 } });
  assert.equal(card.answers.at(-1).content, "The call was cancelled.");
});

test("the host's requests: ping answered, others not found", async () => {
  const { deliver, sent } = await started();
  deliver({ jsonrpc: "2.0", id: "p", method: "ping" });
  assert.deepEqual(sent.at(-1).m, { jsonrpc: "2.0", id: "p", result: {} });
  deliver({ jsonrpc: "2.0", id: 9, method: "tools/call", params: {} });
  assert.equal(sent.at(-1).m.error.code, -32601);
});

test("the host's style variables: known keys with string values only", async () => {
  const { props, deliver } = await started({ theme: "dark", styles: { variables: { "--color-text-primary": "#eee", "--x": "red" } } });
  assert.deepEqual(props, { "--color-text-primary": "#eee" });
  deliver({ jsonrpc: "2.0", method: "ui/notifications/host-context-changed", params: { styles: { variables: { "--color-border-primary": "#333" } } } });
  assert.equal(props["--color-border-primary"], "#333");
  assert.deepEqual(themeOf({ theme: "neon", styles: { variables: { "--font-sans": 3, "--color-text-info": "x".repeat(201) } } }), { variables: {}, theme: "" });
  assert.deepEqual(themeOf(null), { variables: {}, theme: "" });
});

test("answerOf, stateOf and answerArgs on results of any shape", () => {
  const sc = { status: "done", content: "x" };
  assert.equal(answerOf({ structuredContent: sc }), sc);
  for (const bad of [undefined, null, [], "s", { content: "no status" }, { status: 3 }]) {
    assert.deepEqual(answerOf({ structuredContent: bad, content: [{ type: "text", text: "a" }, { type: "image" }, { type: "text", text: "b" }], isError: true }),
      { status: "done", tool: "", isError: true, content: "a\nb" }, JSON.stringify(bad));
  }
  assert.deepEqual(answerOf(null), { status: "done", tool: "", isError: false, content: "" });
  assert.equal(stateOf({ _meta: { "toolgate/state": 5 } }), "");
  assert.equal(stateOf({}), "");
  assert.deepEqual(answerArgs("s", { buttonId: "b" }), { state: "s", button: "b" });
  // "Approve with changes": the approve button with the changed input.
  assert.deepEqual(answerArgs("s", { buttonId: "approve", input: { amount: 300, to: "acme" }, device: "d" }),
    { state: "s", button: "approve", input: { amount: 300, to: "acme" } });
  assert.deepEqual(answerArgs("s", { action: "skip", input: { amount: 1 } }), { state: "s", action: "skip" });
  assert.deepEqual(answerArgs("s", { action: "cancel" }), { state: "s", action: "cancel" });
  assert.throws(() => answerArgs("s", { action: "delete" }));
  assert.throws(() => answerArgs("s", {}));
});

test("a click on a card's link asks the host to open it; other hrefs and clicks send nothing", async () => {
  const { card, sent } = await started();
  const click = (path) => {
    let prevented = false;
    card.listeners.click.forEach((f) => f({ composedPath: () => path, preventDefault: () => (prevented = true) }));
    return prevented;
  };
  assert.equal(click([{ tagName: "SPAN" }, { tagName: "A", href: "https://docs.example/a?b=1" }, { tagName: "DIV" }]), true);
  assert.deepEqual(sent.at(-1).m.method, "ui/open-link");
  assert.deepEqual(sent.at(-1).m.params, { url: "https://docs.example/a?b=1" });
  const n = sent.length;
  assert.equal(click([{ tagName: "A", href: "javascript:alert(1)" }]), true, "the default is prevented, nothing asked");
  assert.equal(click([{ tagName: "BUTTON" }]), false);
  assert.equal(sent.length, n);
  assert.equal(safeURL("mailto:a@b.example"), "mailto:a@b.example");
  assert.equal(safeURL("data:text/html,x"), "");
  assert.equal(safeURL("/relative"), "");
});

test("tool-input shows the call running until its result; a later input does not hide the result", async () => {
  const { deliver, card } = await started();
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-input", params: { arguments: {} } });
  assert.deepEqual(card.answers.at(-1), { status: "running", tool: "" });
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: { content: [], structuredContent: { status: "done", tool: "t", content: "ok" } } });
  const n = card.answers.length;
  deliver({ jsonrpc: "2.0", method: "ui/notifications/tool-input", params: { arguments: {} } });
  assert.equal(card.answers.length, n);
  assert.equal(card.answers.at(-1).content, "ok");
});

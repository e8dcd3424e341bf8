// <toolgate-card>'s approval cards in a DOM (jsdom, from the root npm
// workspace) with a stubbed fetch: what the card shows of the model's
// input, and what "Approve with changes" sends. The browser test
// (examples/browser/card.test.mjs) does the same in Chromium.
import { test, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><html><body></body></html>", { url: "http://app.test/" });
for (const name of ["window", "document", "HTMLElement", "customElements", "CustomEvent", "Event"]) {
  globalThis[name] = name === "window" ? dom.window : dom.window[name];
}
const { ToolgateCard } = await import("./card.js");

const gateway = "http://gw.test/toolgate";

/** The approval card of the docs, for call c1, lapsing in 23.5 h. */
function approvalAnswer(approval = {}) {
  return {
    callId: "c1",
    tool: "pay",
    status: "action_required",
    card: {
      type: "action_required",
      title: "Approve payment",
      description: "Payments over 100 need your approval.",
      approval: {
        tool: "pay",
        input: { amount: 250, to: "acme" },
        schema: {
          type: "object",
          properties: { amount: { type: "number", maximum: 100000 }, to: { type: "string" } },
          required: ["amount", "to"],
        },
        expires: new Date(Date.now() + 23.5 * 3600e3).toISOString(),
        ...approval,
      },
      elements: [
        { type: "button", id: "approve", label: "Approve", variant: "primary" },
        { type: "button", id: "reject", label: "Reject", variant: "danger" },
      ],
    },
  };
}

const done = { callId: "c1", tool: "pay", status: "done", isError: false, content: "Paid." };

let sent; // what reached fetch: {url, method, body}
let replies; // what fetch answers, in turn: {status, json} or a Promise of one

beforeEach(() => {
  sent = [];
  replies = [];
  document.body.replaceChildren();
  globalThis.fetch = async (url, init) => {
    sent.push({ url: String(url), method: init.method, headers: init.headers, body: init.body && JSON.parse(init.body) });
    const r = await (replies.shift() ?? { status: 500, json: {} });
    return new Response(JSON.stringify(r.json), { status: r.status, headers: { "Content-Type": "application/json" } });
  };
});

/** mount shows an answer in a new card on the page; events are recorded. */
function mount(answer) {
  const card = document.createElement("toolgate-card");
  card.gateway = gateway;
  const events = [];
  for (const type of ["toolgate.card.resolved", "toolgate.card.error"]) card.addEventListener(type, (e) => events.push({ type, detail: e.detail }));
  document.body.append(card);
  card.answer = answer;
  return { card, root: card.shadowRoot, events };
}

const button = (root, name) => [...root.querySelectorAll("button")].find((b) => b.textContent === name);
const settle = () => new Promise((r) => setTimeout(r, 10));

/** field is the control labelled name in the card's form. */
function field(root, name) {
  const label = [...root.querySelectorAll("form.changes label")].find((l) => l.textContent === name);
  return root.getElementById(label.htmlFor);
}

test("the input is shown field by field, as text", () => {
  const hostile = "<img src=x onerror=alert(1)>";
  const { root } = mount(approvalAnswer({
    input: { to: hostile, amount: 250, meta: { tags: ["a", "<b>"] }, [hostile]: true, memo: "ac\u202Eme" },
  }));
  assert.ok(root.querySelector("[part=approval]"));
  const rows = [...root.querySelectorAll("dl.sent dt")].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]);
  assert.deepEqual(rows, [
    ["to", hostile],
    ["amount", "250"],
    ["meta", '{"tags":["a","<b>"]}'],
    [hostile, "true"],
    ["memo", "ac\\u202Eme"], // a bidi override is shown, not obeyed
  ]);
  assert.equal(root.querySelectorAll("img, b").length, 0);
  assert.equal(root.querySelector("[part=approval] p").textContent, "Sent to pay:");
});

test("when the question lapses, in words, with the time as its title", () => {
  const answer = approvalAnswer();
  const { root } = mount(answer);
  const p = root.querySelector("[part=expires]");
  assert.equal(p.textContent, "expires in 23 h");
  assert.equal(p.title, new Date(answer.card.approval.expires).toISOString());
  const { root: late } = mount(approvalAnswer({ expires: new Date(Date.now() - 5.5 * 60e3).toISOString() }));
  assert.equal(late.querySelector("[part=expires]").textContent, "expired 5 min ago");
  const { root: never } = mount(approvalAnswer({ expires: "soon" }));
  assert.equal(never.querySelector("[part=expires]"), null);
});

test("Approve and Reject resume with their button alone", async () => {
  for (const name of ["Approve", "Reject"]) {
    replies.push({ status: 200, json: done });
    const { root, events } = mount(approvalAnswer());
    assert.deepEqual([...root.querySelectorAll("button")].map((b) => b.textContent),
      ["Approve", "Reject", "Approve with changes", "Skip", "Cancel"]);
    button(root, name).click();
    await settle();
    assert.deepEqual(sent.at(-1).body, { buttonId: name.toLowerCase() });
    assert.equal(events[0].type, "toolgate.card.resolved");
  }
});

test("Approve with changes opens a form filled with the input, and sends what was changed", async () => {
  const { root, events } = mount(approvalAnswer());
  assert.equal(root.querySelector("form.changes"), null);
  const toggle = button(root, "Approve with changes");
  toggle.click();
  assert.equal(toggle.getAttribute("aria-expanded"), "true");
  assert.equal(field(root, "amount").value, "250");
  assert.equal(field(root, "to").value, "acme");
  field(root, "amount").value = "300";
  replies.push({ status: 200, json: done });
  button(root, "Approve with these changes").click();
  await settle();
  assert.equal(sent.length, 1);
  assert.equal(sent[0].url, `${gateway}/calls/c1/resume`);
  assert.equal(sent[0].method, "POST");
  assert.deepEqual(sent[0].body, { buttonId: "approve", input: { amount: 300, to: "acme" } });
  assert.equal(events.length, 1);
  assert.equal(events[0].type, "toolgate.card.resolved");
  assert.equal(root.querySelector("form.changes"), null, "the answer replaced the card");
  assert.equal(root.querySelector(".content").textContent, "Paid.");
});

test("a refusal shows in the form, which stays open; a second try goes through", async () => {
  const { card, root, events } = mount(approvalAnswer());
  button(root, "Approve with changes").click();
  field(root, "amount").value = "100001";
  // The browser's own checks first: nothing is sent for a value over the schema's maximum.
  button(root, "Approve with these changes").click();
  await settle();
  assert.equal(sent.length, 0);
  field(root, "amount").value = "999";
  replies.push({ status: 400, json: { error: { code: "invalid_input", message: "amount: must be at most 500" } } });
  button(root, "Approve with these changes").click();
  await settle();
  assert.equal(sent.length, 1);
  const form = root.querySelector("form.changes");
  assert.equal(form.hidden, false);
  assert.equal(form.querySelector("[role=alert]").textContent, "amount: must be at most 500");
  assert.equal(root.querySelector("[part=notice]").textContent, "", "the card's own notice is unchanged");
  assert.equal(card.answer.status, "action_required");
  assert.equal(field(root, "amount").value, "999", "what was typed is kept");
  assert.deepEqual(events.map((e) => [e.type, e.detail.status, e.detail.code]), [["toolgate.card.error", 400, "invalid_input"]]);
  for (const b of root.querySelectorAll("button")) assert.equal(b.disabled, false, b.textContent);
  assert.equal(form.querySelector("fieldset").disabled, false);

  field(root, "amount").value = "400";
  replies.push({ status: 200, json: done });
  button(root, "Approve with these changes").click();
  await settle();
  assert.deepEqual(sent[1].body, { buttonId: "approve", input: { amount: 400, to: "acme" } });
  assert.equal(card.answer.status, "done");
});

test("nothing is sent twice while a resume is in flight", async () => {
  const { root } = mount(approvalAnswer());
  button(root, "Approve with changes").click();
  let answer;
  replies.push(new Promise((ok) => (answer = ok)));
  const send = button(root, "Approve with these changes");
  send.click();
  await settle();
  assert.equal(sent.length, 1);
  for (const b of root.querySelectorAll("button")) assert.equal(b.disabled, true, b.textContent);
  assert.equal(root.querySelector("form.changes fieldset").disabled, true);
  // Clicks on disabled buttons do nothing; a submit by Enter neither.
  send.click();
  button(root, "Approve").click();
  root.querySelector("form.changes").dispatchEvent(new Event("submit", { cancelable: true }));
  await settle();
  assert.equal(sent.length, 1);
  answer({ status: 200, json: done });
  await settle();
  assert.equal(sent.length, 1);
  assert.equal(root.querySelector(".content").textContent, "Paid.");
});

test("an input the schema's fields cannot hold is changed as JSON", async () => {
  const input = { amount: 250, to: "acme", note: "line one\nline two" }; // a property the schema does not name
  const { root } = mount(approvalAnswer({ input }));
  button(root, "Approve with changes").click();
  const form = root.querySelector("form.changes");
  assert.match(form.querySelector("p.hint:not(.field p)").textContent, /does not fit the tool's schema/);
  const json = field(root, "input");
  assert.equal(json.tagName, "TEXTAREA");
  assert.deepEqual(JSON.parse(json.value), input);
  json.value = JSON.stringify({ ...input, amount: 200 });
  replies.push({ status: 200, json: done });
  button(root, "Approve with these changes").click();
  await settle();
  assert.deepEqual(sent[0].body, { buttonId: "approve", input: { ...input, amount: 200 } });

  // Unreadable JSON is an error in the form, and nothing is sent.
  const { root: again } = mount(approvalAnswer({ input }));
  button(again, "Approve with changes").click();
  field(again, "input").value = "{";
  button(again, "Approve with these changes").click();
  await settle();
  assert.equal(sent.length, 1);
  assert.match(again.querySelector("form.changes [role=alert]").textContent, /^input: not valid JSON/);
});

test("the identity and device go with the changed input as with any press", async () => {
  const card = document.createElement("toolgate-card");
  card.gateway = gateway;
  card.identity = { user: "u_1", install: "in_1" };
  card.device = "laptop";
  document.body.append(card);
  card.answer = approvalAnswer();
  button(card.shadowRoot, "Approve with changes").click();
  replies.push({ status: 200, json: done });
  button(card.shadowRoot, "Approve with these changes").click();
  await settle();
  assert.deepEqual(sent[0].body, {
    buttonId: "approve", input: { amount: 250, to: "acme" }, device: "laptop", identity: { user: "u_1", install: "in_1" },
  });
});

test("no approve button, or another device's card: no changes to make here", () => {
  const rejectOnly = approvalAnswer();
  rejectOnly.card.elements = rejectOnly.card.elements.filter((e) => e.id !== "approve");
  assert.equal(button(mount(rejectOnly).root, "Approve with changes"), undefined);

  const assigned = approvalAnswer();
  assigned.card.assignee = { computerId: "phone" };
  const { root } = mount(assigned);
  assert.equal(button(root, "Approve with changes").disabled, true);
  assert.equal(button(root, "Skip").disabled, false);
});

test("a card without approval shows none", () => {
  const plain = approvalAnswer();
  delete plain.card.approval;
  const { root } = mount(plain);
  assert.equal(root.querySelector("[part=approval]"), null);
  assert.equal(button(root, "Approve with changes"), undefined);
  for (const bad of [null, "x", [1]]) {
    const a = approvalAnswer();
    a.card.approval = bad;
    assert.equal(mount(a).root.querySelector("[part=approval]"), null, JSON.stringify(bad));
  }
});

test("a page's resume hook gets the changed input in its choice", async () => {
  const card = document.createElement("toolgate-card");
  const choices = [];
  card.resume = async (answer, choice) => {
    choices.push(choice);
    return done;
  };
  document.body.append(card);
  card.answer = approvalAnswer();
  button(card.shadowRoot, "Approve with changes").click();
  field(card.shadowRoot, "to").value = "globex";
  button(card.shadowRoot, "Approve with these changes").click();
  await settle();
  assert.deepEqual(choices, [{ buttonId: "approve", input: { amount: 250, to: "globex" } }]);
  assert.equal(sent.length, 0);
  void ToolgateCard;
});

// The notes component behind a real toolgate that loads
// examples/notes/tools.ts itself (compiling it at load): the identity token
// toolgate signs verifies with the kit, add_note's body is the input,
// clear_notes' card passes toolgate's rules and its "Delete all" button runs,
// and export_notes tells a thread call from an api call.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack } from "../../stack.mjs";

let stack;
before(async () => {
  stack = await startStack({ name: "notes", notes: true });
});
after(() => stack?.stop());

const identity = { user: "u_1", install: "in_1" };
const thread = { source: "thread", threadId: "th_notes" };

async function invoke(tool, input, { callId, context, who = identity } = {}) {
  const res = await fetch(`${stack.gate}/tools/${tool}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ input, callId, context, identity: who }),
  });
  assert.equal(res.status, 200, `${tool}: ${res.status}`);
  return res.json();
}

test("the tools of tools.ts are served as compiled", async () => {
  const list = await (await fetch(`${stack.gate}/tools`)).json();
  const add = list.find((t) => t.name === "add_note");
  assert.ok(add, "add_note is listed");
  assert.equal(add.displayName, "Add note");
  assert.deepEqual(add.input_schema.required, ["text"]);
  assert.equal(add.input_schema.additionalProperties, false);
  assert.equal(add.input_schema.properties.text.description, "The note, as the user said it.");
  for (const name of ["clear_notes", "export_notes"]) assert.ok(list.some((t) => t.name === name), name);
});

test("add_note: the input is the body, the user is the token's", async () => {
  const a = await invoke("add_note", { text: "Buy *milk*", tags: ["home"] });
  assert.equal(a.isError, false, a.content);
  assert.equal(a.content, "Added note n1: Buy *milk* (tags: home)");
  assert.equal(a.markdown, "Noted: Buy \\*milk\\* — \\#home");
  // toolgate checks the input first: the component is not called.
  const bad = await invoke("add_note", { text: "x", owner: "u_2" });
  assert.equal(bad.isError, true);
  // Another user sees nothing of u_1's.
  const other = await invoke("export_notes", {}, { who: { user: "u_2", install: "in_1" } });
  assert.deepEqual(JSON.parse(other.content), { notes: [] });
});

test("export_notes: JSON on an api call, markdown on a thread", async () => {
  const api = await invoke("export_notes", {});
  assert.equal(api.isError, false, api.content);
  assert.equal(api.markdown, undefined);
  assert.deepEqual(JSON.parse(api.content).notes.map((n) => n.text), ["Buy *milk*"]);
  const onThread = await invoke("export_notes", {}, { context: thread });
  assert.equal(onThread.card, "markdown");
  assert.equal(onThread.markdown, "- Buy \\*milk\\* — \\#home");
});

test("clear_notes: an api call is refused, a thread call pauses on a card that deletes when pressed", async () => {
  const api = await invoke("clear_notes", {});
  assert.equal(api.isError, true);
  assert.match(api.content, /confirmation_required/);

  const paused = await invoke("clear_notes", {}, { callId: "clear_notes_1", context: thread });
  assert.equal(paused.status, "action_required", JSON.stringify(paused));
  assert.equal(paused.card.title, "Delete the only note?");
  assert.deepEqual(paused.card.elements.map((b) => b.id), ["delete", "keep"]);

  const res = await fetch(`${stack.gate}/calls/clear_notes_1/resume`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ buttonId: "delete", identity }),
  });
  assert.equal(res.status, 200);
  const done = await res.json();
  assert.equal(done.status, "done");
  assert.equal(done.isError, false, done.content);
  assert.equal(done.content, "Deleted the only note.");
  assert.deepEqual(JSON.parse((await invoke("export_notes", {})).content), { notes: [] });
});

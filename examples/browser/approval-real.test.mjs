// Browser tests of an approval rule end to end: a real toolgate (built from
// this checkout) whose inline tool save_bookmark_approved reaches the
// bookmarks component's save endpoint only once a person approves, and the
// playground's "Waiting for you" panel in headless Chromium, where the
// person decides. Run with `node --test approval-real.test.mjs`. It keeps
// screenshots/approval-real.png, the panel with an approval card waiting
// beside an app's card (docs/playground-waiting.png).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { startStack, invoke } from "../stack.mjs";
import { launchChromium } from "./chromium.mjs";

const screenshots = join(import.meta.dirname, "screenshots");
const thread = "th_pw";
const who = { user: "u_1", install: "in_1" };

// save_bookmark's target, behind an approval rule that always holds.
const approvedTool = () => `			tool save_bookmark_approved {
				description "Save a web page as a bookmark, once the user approves."
				display_name "Save bookmark (approved)"
				input_schema \`{"type":"object","properties":{"url":{"type":"string","format":"uri"},"title":{"type":"string","minLength":1}},"required":["url","title"],"additionalProperties":false}\`
				target app bookmarks POST /bookmarks
				body \`\${input}\`
				approval {
					title "Save this bookmark?"
				}
			}`;

let stack, browser;

before(async () => {
  stack = await startStack({ name: "approval-real", toolgate: approvedTool });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  stack?.stop();
});

/** bookmarks is the component's own list for u_1/in_1, one line each. */
async function bookmarks() {
  const ans = await invoke(stack.gate, "list_bookmarks", { thread, callId: `list_${Date.now()}_${Math.random()}` });
  assert.equal(ans.status, "done");
  return ans.content.trim();
}

/** resume answers a waiting call through the Tools API, as a client does. */
async function resume(callId, body, identity = who) {
  const r = await fetch(`${stack.gate}/calls/${callId}/resume`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...body, identity }),
  });
  return { status: r.status, json: await r.json() };
}

/** waiting is GET /waiting's call ids for u_1/in_1. */
async function waiting() {
  const r = await fetch(`${stack.gate}/waiting?user=u_1&install=in_1`);
  assert.equal(r.status, 200);
  return (await r.json()).calls.map((c) => c.callId);
}

/** openPlayground opens the playground and records its errors and resumes. */
async function openPlayground() {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  const problems = [];
  const resumes = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/calls\/[^/]+\/resume$/.test(new URL(r.url()).pathname)) resumes.push(r);
  });
  await page.goto(`${stack.gate}/playground`);
  const panel = page.getByRole("region", { name: "Waiting for you" });
  return { page, panel, problems, resumes };
}

test("an approval waits in the panel across a reload, and Approve with changes runs the changed input once", async () => {
  const callId = "pw_approve_1";
  const asked = await invoke(stack.gate, "save_bookmark_approved", {
    thread, callId, input: { url: "https://go.dev", title: "Go" },
  });
  assert.equal(asked.status, "action_required");
  assert.equal(asked.card.title, "Save this bookmark?");
  assert.deepEqual(asked.card.approval.input, { url: "https://go.dev", title: "Go" });
  assert.deepEqual(asked.card.elements.map((e) => e.id), ["approve", "reject"]);
  // Nothing reached the component while the card waits.
  assert.equal(await bookmarks(), "No bookmarks.");
  assert.deepEqual(await waiting(), [callId]);

  // Refusals that leave the card waiting: a changed input the schema
  // refuses, and an answer from someone else's identity.
  const bad = await resume(callId, { buttonId: "approve", input: { url: "https://go.dev", title: "", evil: true } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.code, "invalid_input");
  const stranger = await resume(callId, { buttonId: "approve" }, { user: "u_2", install: "in_1" });
  assert.equal(stranger.status, 404);
  assert.equal(await bookmarks(), "No bookmarks.");
  assert.deepEqual(await waiting(), [callId]);

  const { page, panel, problems, resumes } = await openPlayground();
  await panel.getByRole("region", { name: "Save this bookmark?" }).waitFor();
  await page.reload();
  const card = panel.getByRole("region", { name: "Save this bookmark?" });
  await card.waitFor();
  assert.equal(await panel.getByRole("region").count(), 1);
  // What will be sent, field by field.
  assert.deepEqual(await card.getByRole("definition").allInnerTexts(), ["https://go.dev", "Go"]);

  await card.getByRole("button", { name: "Approve with changes" }).click();
  const form = card.getByRole("form", { name: "Approve with changes" });
  assert.equal(await form.getByLabel("title").inputValue(), "Go");
  await form.getByLabel("title").fill("Go, approved");
  await form.getByRole("button", { name: "Approve with these changes" }).click();

  // The answer shows in Result, and the panel, loaded again, is empty.
  const result = page.getByRole("region", { name: "Result" });
  await result.getByRole("link", { name: "Go, approved" }).waitFor();
  await panel.getByText("Nothing waits for you.").waitFor();
  assert.equal(resumes.length, 1);
  assert.deepEqual(resumes[0].postDataJSON(), {
    buttonId: "approve",
    input: { url: "https://go.dev", title: "Go, approved" },
    identity: who,
  });

  // The call ran once, with the approved input.
  assert.equal(await bookmarks(), "b1 Go, approved https://go.dev");
  const done = await (await fetch(`${stack.gate}/calls/${callId}?user=u_1&install=in_1`)).json();
  assert.equal(done.status, "done");
  assert.equal(done.isError, false);
  assert.equal(done.content, "Saved bookmark b1: Go, approved (https://go.dev)");
  // The same answer again gets the recorded result; another answer is too late.
  const again = await resume(callId, { buttonId: "approve", input: { url: "https://go.dev", title: "Go, approved" } });
  assert.equal(again.status, 200);
  assert.equal(again.json.content, done.content);
  const late = await resume(callId, { buttonId: "reject" });
  assert.equal(late.status, 409);
  // A repeat of the call id is the recorded call, not a second question.
  const repeat = await invoke(stack.gate, "save_bookmark_approved", {
    thread, callId, input: { url: "https://go.dev", title: "Go" },
  });
  assert.equal(repeat.status, "done");
  assert.equal(await bookmarks(), "b1 Go, approved https://go.dev");
  assert.deepEqual(await waiting(), []);
  assert.deepEqual(problems, []);
  await page.close();
});

test("an approval rejected from the panel sends nothing, beside an app's card answered there too", async () => {
  // A bookmark of its own, so that clear_bookmarks has one to ask about.
  const own = await invoke(stack.gate, "save_bookmark", {
    thread, callId: "pw_plain_1", input: { url: "https://go.dev/doc", title: "Docs" },
  });
  assert.equal(own.status, "done");
  const saved = await bookmarks();
  assert.match(saved, /^b\d+ Docs https:\/\/go\.dev\/doc$/m);
  const callId = "pw_reject_1";
  const asked = await invoke(stack.gate, "save_bookmark_approved", {
    thread, callId, input: { url: "https://pkg.go.dev", title: "Packages" },
  });
  assert.equal(asked.status, "action_required");
  // An app's own card waits too: clear_bookmarks asks before deleting.
  const clear = await invoke(stack.gate, "clear_bookmarks", { thread, callId: "pw_clear_1" });
  assert.equal(clear.status, "action_required");

  const { page, panel, problems, resumes } = await openPlayground();
  const card = panel.getByRole("region", { name: "Save this bookmark?" });
  await card.waitFor();
  const appCard = panel.getByRole("region", { name: clear.card.title });
  await appCard.waitFor();
  // The screenshot of the docs: the changes form open, with a change typed.
  await card.getByRole("button", { name: "Approve with changes" }).click();
  await card.getByRole("form", { name: "Approve with changes" }).getByLabel("title").fill("Go packages");
  mkdirSync(screenshots, { recursive: true });
  await panel.screenshot({ path: join(screenshots, "approval-real.png") });

  await card.getByRole("button", { name: "Reject" }).click();
  await page.getByRole("region", { name: "Result" })
    .getByText("The user rejected this call; nothing was sent.").waitFor();
  await card.waitFor({ state: "detached" });
  await appCard.getByRole("button", { name: "Keep them" }).click();
  await panel.getByText("Nothing waits for you.").waitFor();
  assert.deepEqual(resumes.map((r) => r.postDataJSON()), [
    { buttonId: "reject", identity: who },
    { buttonId: "keep", identity: who },
  ]);

  const rejected = await (await fetch(`${stack.gate}/calls/${callId}?user=u_1&install=in_1`)).json();
  assert.equal(rejected.status, "done");
  assert.equal(rejected.isError, true);
  // Nothing was saved (nor cleared).
  assert.equal(await bookmarks(), saved);
  assert.deepEqual(await waiting(), []);
  assert.deepEqual(problems, []);
  await page.close();
});

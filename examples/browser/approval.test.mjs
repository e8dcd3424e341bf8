// Browser tests of approval cards in headless Chromium: <toolgate-card>
// on a page, and the playground's "Waiting for you" panel. The files are
// internal/web's, served as they are by a small loopback server that
// stands in for the gateway's card endpoints (GET /waiting, POST
// /calls/{id}/resume, and GET /connections, with none) and records what reached it. Run with
// `node --test approval.test.mjs`. It keeps screenshots/approval-card.png
// and screenshots/playground-waiting.png; approval-real.test.mjs runs the
// panel against the real gateway.
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { freePort, root } from "../stack.mjs";
import { launchChromium } from "./chromium.mjs";

const web = join(root, "internal", "web");
const screenshots = join(import.meta.dirname, "screenshots");

/** The approval card of docs/browser.md, waiting as call c1. */
const payCall = () => ({
  callId: "c1",
  tool: "pay",
  status: "action_required",
  card: {
    type: "action_required",
    title: "Approve payment",
    description: "Payments over 100 need your approval.",
    approval: {
      tool: "pay",
      input: { amount: 250, to: "acme", memo: "<img src=x onerror=\"window.__xss = 1\">" },
      schema: {
        type: "object",
        properties: { amount: { type: "number" }, to: { type: "string" }, memo: { type: "string" } },
        required: ["amount", "to"],
      },
      expires: new Date(Date.now() + 23.5 * 3600e3).toISOString(),
    },
    elements: [
      { type: "button", id: "approve", label: "Approve", variant: "primary" },
      { type: "button", id: "reject", label: "Reject", variant: "danger" },
    ],
  },
});

const clearCall = {
  callId: "c2",
  tool: "clear_bookmarks",
  status: "action_required",
  card: {
    type: "action_required",
    title: "Clear all bookmarks?",
    description: "This removes **3** bookmarks.",
    elements: [{ type: "button", id: "clear", label: "Clear", variant: "danger" }, { type: "button", id: "keep", label: "Keep" }],
  },
};

let server, base, browser;
let resumes; // the resume bodies that reached the server, by call id
let resumeAnswer; // (callId, body) => {status, json}
let waiting; // GET /waiting's calls

function send(res, status, type, body) {
  res.writeHead(status, { "Content-Type": type });
  res.end(body);
}

before(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = createServer(async (req, res) => {
    const url = new URL(req.url, base);
    const p = url.pathname;
    let m;
    if (req.method === "GET" && (m = /^\/toolgate\/([a-z]+\.js)$/.exec(p))) {
      return send(res, 200, "text/javascript; charset=utf-8", readFileSync(join(web, m[1])));
    }
    if (req.method === "GET" && p === "/toolgate/playground") {
      return send(res, 200, "text/html; charset=utf-8", readFileSync(join(web, "playground.html")));
    }
    if (p === "/favicon.ico") return send(res, 204, "image/x-icon", "");
    if (req.method === "GET" && p === "/host") return send(res, 200, "text/html; charset=utf-8", "<!doctype html><html><body></body></html>");
    if (req.method === "GET" && p === "/toolgate/tools") return send(res, 200, "application/json", "[]");
    // The playground's Connections panel: this stand-in declares none.
    if (req.method === "GET" && p === "/toolgate/connections") return send(res, 200, "application/json", '{"connections":[]}');
    if (req.method === "GET" && p === "/toolgate/waiting") {
      return send(res, 200, "application/json", JSON.stringify({ calls: waiting }));
    }
    if (req.method === "POST" && (m = /^\/toolgate\/calls\/([^/]+)\/resume$/.exec(p))) {
      let text = "";
      for await (const chunk of req) text += chunk;
      const body = JSON.parse(text);
      (resumes[m[1]] ??= []).push(body);
      const { status, json } = resumeAnswer(m[1], body);
      return send(res, status, "application/json", JSON.stringify(json));
    }
    send(res, 404, "application/json", JSON.stringify({ error: { code: "not_found", message: "no such thing" } }));
  });
  await new Promise((ok) => server.listen(port, "127.0.0.1", ok));
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  server?.close();
});

beforeEach(() => {
  resumes = {};
  waiting = [];
  resumeAnswer = (callId) => {
    waiting = waiting.filter((c) => c.callId !== callId);
    return { status: 200, json: { callId, tool: "pay", status: "done", isError: false, content: "Paid." } };
  };
});

/** watch records the page's errors: there must be none. */
function watch(page) {
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  return problems;
}

test("Approve with changes: the form starts from the input, a refusal shows in it, the changed input is sent", async () => {
  const page = await browser.newPage({ viewport: { width: 700, height: 800 } });
  const problems = watch(page);
  await page.goto(`${base}/host`);
  await page.evaluate(async ({ base, answer }) => {
    await import(`${base}/toolgate/card.js`);
    const card = document.createElement("toolgate-card");
    card.gateway = `${base}/toolgate`;
    document.body.append(card);
    card.answer = answer;
  }, { base, answer: payCall() });
  const card = page.getByRole("region", { name: "Approve payment" });
  const sent = card.getByRole("definition");
  assert.deepEqual(await sent.allInnerTexts(), ["250", "acme", "<img src=x onerror=\"window.__xss = 1\">"]);
  assert.equal(await card.locator("[part=expires]").innerText(), "expires in 23 h");

  // The first answer refuses the input as the gateway would, the second takes it.
  let calls = 0;
  resumeAnswer = (callId) => (++calls === 1
    ? { status: 400, json: { error: { code: "invalid_input", message: "amount: must be at most 500" } } }
    : { status: 200, json: { callId, tool: "pay", status: "done", isError: false, content: "Paid 300 to acme." } });

  await card.getByRole("button", { name: "Approve with changes" }).click();
  const form = card.getByRole("form", { name: "Approve with changes" });
  assert.equal(await form.getByLabel("amount").inputValue(), "250");
  assert.equal(await form.getByLabel("to").inputValue(), "acme");
  await form.getByLabel("amount").fill("900");
  await form.getByRole("button", { name: "Approve with these changes" }).click();
  const alert = form.getByRole("alert");
  await alert.filter({ hasText: "must be at most" }).waitFor();
  assert.equal(await alert.innerText(), "amount: must be at most 500");
  assert.equal(await form.isVisible(), true);
  mkdirSync(screenshots, { recursive: true });
  await card.screenshot({ path: join(screenshots, "approval-card.png") });

  await form.getByLabel("amount").fill("300");
  await form.getByRole("button", { name: "Approve with these changes" }).click();
  // The answer replaces the card (a region named by the tool now).
  await page.getByRole("region", { name: "pay" }).getByText("Paid 300 to acme.").waitFor();
  assert.deepEqual(resumes.c1, [
    { buttonId: "approve", input: { amount: 900, to: "acme", memo: "<img src=x onerror=\"window.__xss = 1\">" } },
    { buttonId: "approve", input: { amount: 300, to: "acme", memo: "<img src=x onerror=\"window.__xss = 1\">" } },
  ]);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.equal(await page.evaluate(() => document.querySelector("toolgate-card").shadowRoot.querySelectorAll("img").length), 0);
  // The 400 is the one console error: the browser logs the failed request.
  assert.deepEqual(problems.filter((p) => !/status of 400/.test(p)), []);
  await page.close();
});

test("the playground's Waiting for you panel: answered in place, then loaded again", async () => {
  waiting = [payCall(), clearCall];
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  const problems = watch(page);
  await page.goto(`${base}/toolgate/playground`);
  const panel = page.getByRole("region", { name: "Waiting for you" });
  const pay = panel.getByRole("region", { name: "Approve payment" });
  await pay.waitFor();
  await panel.getByRole("region", { name: "Clear all bookmarks?" }).waitFor();
  await pay.getByRole("button", { name: "Approve with changes" }).click();
  await pay.getByLabel("amount").fill("120");
  mkdirSync(screenshots, { recursive: true });
  await panel.screenshot({ path: join(screenshots, "playground-waiting.png") });

  await pay.getByRole("button", { name: "Approve with these changes" }).click();
  // Answered: the answer moves to Result, and the panel lists what still waits.
  await page.getByRole("region", { name: "Result" }).getByText("Paid.").waitFor();
  assert.deepEqual(resumes.c1, [{
    buttonId: "approve",
    input: { amount: 120, to: "acme", memo: "<img src=x onerror=\"window.__xss = 1\">" },
    identity: { user: "u_1", install: "in_1" },
  }]);
  await panel.getByRole("region", { name: "Approve payment" }).waitFor({ state: "detached" });
  assert.equal(await panel.getByRole("region").count(), 1);

  await panel.getByRole("region", { name: "Clear all bookmarks?" }).getByRole("button", { name: "Keep" }).click();
  await panel.getByText("Nothing waits for you.").waitFor();
  assert.deepEqual(resumes.c2, [{ buttonId: "keep", identity: { user: "u_1", install: "in_1" } }]);

  // Refresh shows what waits now.
  waiting = [clearCall];
  await panel.getByRole("button", { name: "Refresh" }).click();
  await panel.getByRole("region", { name: "Clear all bookmarks?" }).waitFor();
  assert.equal(await panel.getByText("Nothing waits for you.").count(), 0);
  assert.deepEqual(problems, []);
  await page.close();
});

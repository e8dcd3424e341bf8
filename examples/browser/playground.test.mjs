// Browser tests: the playground (GET /toolgate/playground) in headless
// Chromium, driven by its labels, against a real toolgate in loopback mode
// and the bookmarks component, both built from this checkout. Run with
// `node --test playground.test.mjs` in this folder. It keeps a screenshot
// in screenshots/playground.png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { startStack } from "../stack.mjs";
import { launchChromium } from "./chromium.mjs";

const screenshots = join(import.meta.dirname, "screenshots");

let stack, browser;

before(async () => {
  stack = await startStack({ name: "playground" });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  stack?.stop();
});

/**
 * openPlayground opens the playground and records every request it sends
 * to the Tools API, and any error the page throws or CSP reports.
 */
async function openPlayground({ tools } = {}) {
  const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  const sent = [];
  const problems = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && new URL(r.url()).pathname.startsWith("/toolgate/tools/")) sent.push(r);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  if (tools) {
    // GET /tools as the gateway answers it, changed by the test.
    await page.route(`${stack.gate}/tools`, async (route) => {
      const res = await route.fetch();
      await route.fulfill({ response: res, json: tools(await res.json()) });
    });
  }
  await page.goto(`${stack.gate}/playground`);
  await page.getByRole("navigation", { name: "Tools" }).getByRole("button").first().waitFor();
  return { page, sent, problems };
}

/** invoke calls a tool through the Tools API, as an agent runtime does. */
async function invoke(tool, input) {
  const r = await fetch(`${stack.gate}/tools/${tool}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ input, identity: { user: "u_1", install: "in_1" } }),
  });
  assert.equal(r.status, 200, `invoke ${tool}`);
  const ans = await r.json();
  assert.equal(ans.isError, false, ans.content);
  return ans;
}

test("a tool with a nested schema, run from its form, shows its card and its call", async () => {
  await invoke("save_bookmark", { url: "https://go.dev/doc/effective_go", title: "Effective Go" });
  const { page, sent, problems } = await openPlayground();

  await page.getByRole("button", { name: "Share bookmark" }).click();
  await page.getByRole("heading", { name: "Share bookmark" }).waitFor();
  await page.getByLabel("id", { exact: true }).fill("b1");
  const withGroup = page.getByRole("group", { name: "with" });
  await withGroup.getByLabel("email").fill("ana@example.com");
  await withGroup.getByLabel("note").fill("for the reading group");
  await page.getByLabel("permission").selectOption("comment");
  await page.getByLabel("expiresInDays").fill("7");
  await page.getByLabel("notify").check();
  await page.getByRole("button", { name: "Run" }).click();

  // The markdown answer, rendered by <toolgate-card>: the email is a mailto link.
  const card = page.locator("toolgate-card").first();
  const link = card.getByRole("link", { name: "ana@example.com" });
  await link.waitFor();
  assert.equal(await link.getAttribute("href"), "mailto:ana@example.com");

  // What was sent is exactly what was typed, no more.
  assert.equal(sent.length, 1);
  assert.match(sent[0].url(), /\/toolgate\/tools\/share_bookmark$/);
  assert.equal(sent[0].headers()["content-type"], "application/json");
  const body = sent[0].postDataJSON();
  assert.match(body.callId, /^pg_[0-9a-f]{24}$/);
  assert.deepEqual(body, {
    input: {
      id: "b1",
      with: { email: "ana@example.com", note: "for the reading group" },
      permission: "comment",
      expiresInDays: 7,
      notify: true,
    },
    callId: body.callId,
    context: { source: "api" },
    identity: { user: "u_1", install: "in_1" },
  });

  // The Calls list has the call, done.
  const entry = page.getByRole("list", { name: "Calls" }).getByRole("listitem").filter({ hasText: body.callId });
  assert.match(await entry.textContent(), new RegExp(`^share_bookmark ${body.callId} done$`));

  // The same call as the Tools API records it.
  const again = await (await fetch(`${stack.gate}/calls/${body.callId}?user=u_1&install=in_1`)).json();
  assert.equal(again.status, "done");
  assert.match(again.content, /^Shared b1 .*ana@example\.com/);

  // One row of page context, so the screenshot shows every panel at work.
  const panel = page.getByRole("region", { name: "Page context" });
  await panel.getByLabel("Name 1").fill("lesson");
  await panel.getByLabel("Value 1").fill("Effective Go, <b>chapter 3</b>");
  await panel.getByRole("button", { name: "Render" }).click();
  await panel.locator("pre").waitFor();
  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, "playground.png"), fullPage: true });
  assert.deepEqual(problems, []);
  await page.close();
});

test("a card resumed on the page updates its entry in Calls, on the device it names", async () => {
  await invoke("save_bookmark", { url: "https://go.dev/ref/spec", title: "The Go spec" });
  const { page, sent, problems } = await openPlayground();
  await page.getByLabel("Thread id").fill("th_device");
  await page.getByLabel("Device").fill("laptop");
  await page.getByRole("button", { name: "Open on device" }).click();
  await page.getByLabel("id", { exact: true }).fill("b1");
  await page.getByLabel("computerId").fill("laptop");
  await page.getByRole("button", { name: "Run" }).click();

  const card = page.locator("toolgate-card").first();
  const open = card.getByRole("button", { name: "Open", exact: true });
  await open.waitFor();
  const { callId } = sent[0].postDataJSON();
  const entry = page.getByRole("list", { name: "Calls" }).getByRole("listitem").filter({ hasText: callId });
  assert.equal(await entry.textContent(), `open_on_device ${callId} action_required`);
  // The card was given the Device field: its own buttons are enabled here.
  assert.equal(await open.isEnabled(), true);
  await open.click();
  await page.waitForFunction(
    (id) => [...document.querySelectorAll("#call-list li")].some((li) => li.textContent === `open_on_device ${id} done`),
    callId);
  assert.deepEqual(problems, []);
  await page.close();
});

test("a caller token goes with every request, in place of the identity", async () => {
  const { page, sent } = await openPlayground();
  const listed = page.waitForRequest((r) => r.method() === "GET" && r.url() === `${stack.gate}/tools`);
  await page.getByLabel("Caller token").fill("tok_123");
  await page.getByLabel("Caller token").press("Tab"); // change: the list is loaded again with it
  assert.equal((await listed).headers().authorization, "Bearer tok_123");
  await page.getByRole("button", { name: "Who am I" }).click();
  await page.getByRole("button", { name: "Run" }).click();
  // Without callers the gateway reads no token: the envelope names no user,
  // and the gateway says so; the page shows its code and message.
  const alert = page.locator("#tool").getByRole("alert");
  await alert.waitFor();
  assert.match(await alert.textContent(), /^identity_required: /);
  assert.equal(sent[0].headers().authorization, "Bearer tok_123");
  assert.equal("identity" in sent[0].postDataJSON(), false);
  const { callId } = sent[0].postDataJSON();
  assert.equal(await page.locator("#call-list li").textContent(), `whoami ${callId} refused (400)`);
  await page.close();
});

test("a list refused for want of a token says so", async () => {
  const page = await browser.newPage();
  await page.route(`${stack.gate}/tools`, (route) => route.fulfill({
    status: 401,
    json: { error: { code: "unauthorized", message: "a caller token is required" } },
  }));
  await page.goto(`${stack.gate}/playground`);
  const alert = page.getByRole("navigation", { name: "Tools" }).getByRole("alert");
  await alert.waitFor();
  assert.equal(await alert.textContent(), "unauthorized: a caller token is required (type a caller token)");
  await page.close();
});

test("an optional field left empty is left out, and a thread id makes a thread call", async () => {
  const { page, sent } = await openPlayground();
  await page.getByLabel("Thread id").fill("th_pg");
  await page.getByRole("button", { name: "Save bookmark" }).click();
  await page.getByLabel("url").fill("https://pkg.go.dev");
  await page.getByLabel("title").fill("Packages");
  await page.getByRole("button", { name: "Run" }).click();
  await page.locator("toolgate-card").first().waitFor();
  const body = sent[0].postDataJSON();
  const entry = page.getByRole("list", { name: "Calls" }).getByRole("listitem");
  assert.equal(await entry.textContent(), `save_bookmark ${body.callId} done`);
  assert.deepEqual(body.input, { url: "https://pkg.go.dev", title: "Packages" });
  assert.deepEqual(body.context, { source: "thread", threadId: "th_pg" });
  await page.close();
});

test("a field the browser knows is wrong sends nothing", async () => {
  const { page, sent } = await openPlayground();
  await page.getByRole("button", { name: "Show bookmark" }).click();
  await page.getByLabel("id", { exact: true }).fill("not-an-id"); // the schema's pattern ^b[0-9]+$
  await page.getByRole("button", { name: "Run" }).click();
  assert.equal(await page.getByLabel("id", { exact: true }).evaluate((e) => e.validity.patternMismatch), true);
  await page.waitForTimeout(300);
  assert.equal(sent.length, 0);
  await page.close();
});

// A tool that no form field can show, and a description written to be run
// as markup: neither is in the example, so the test adds it to GET /tools.
const probe = {
  name: "probe",
  displayName: "Probe <b>tool</b>",
  description: 'Takes <img src="x" data-probe="1"> any <script>window.__ran = 1</script> JSON & more.',
  input_schema: {
    type: "object",
    properties: { payload: { oneOf: [{ type: "object" }, { type: "array" }] } },
    required: ["payload"],
  },
};

test("bad raw JSON is an error naming the field, and nothing is sent", async () => {
  const { page, sent } = await openPlayground({ tools: (list) => [...list, probe] });
  await page.getByRole("button", { name: "Probe <b>tool</b>" }).click();
  await page.getByLabel("payload").fill('{"a": 1,');
  await page.getByRole("button", { name: "Run" }).click();
  const alert = page.locator("#tool").getByRole("alert");
  await alert.waitFor();
  assert.match(await alert.textContent(), /^payload: not valid JSON/);
  await page.waitForTimeout(300);
  assert.equal(sent.length, 0);
  assert.equal(await page.getByRole("list", { name: "Calls" }).getByRole("listitem").count(), 0);
  await page.close();
});

test("names and descriptions from the gateway are text, never markup", async () => {
  const { page, problems } = await openPlayground({ tools: (list) => [...list, probe] });
  await page.getByRole("button", { name: "Probe <b>tool</b>" }).click();
  const tool = page.locator("#tool");
  assert.equal(await tool.getByRole("heading").textContent(), "Probe <b>tool</b>");
  assert.equal(await page.locator("#tool-description").textContent(), probe.description);
  assert.equal(await page.locator("img, b, [data-probe]").count(), 0);
  assert.equal(await page.evaluate(() => window.__ran), undefined);

  // The example's own list_bookmarks description has "<id> <title> <url>".
  await page.getByRole("button", { name: "List bookmarks" }).click();
  assert.match(await page.locator("#tool-description").textContent(), /"<id> <title> <url>"/);
  assert.deepEqual(problems, []);
  await page.close();
});

test("the Page context panel shows what POST /page-context renders", async () => {
  const { page } = await openPlayground();
  const panel = page.getByRole("region", { name: "Page context" });
  await panel.getByLabel("Name 1").fill("lesson");
  await panel.getByLabel("Value 1").fill("Watching <b>lesson</b> 3 & </page_context>");
  await panel.getByRole("button", { name: "Add row" }).click();
  await panel.getByLabel("Name 2").fill("progress");
  await panel.getByLabel("Value 2").fill('{"seconds": 42}');
  await panel.getByRole("button", { name: "Render" }).click();
  const pre = panel.locator("pre");
  await pre.waitFor();
  assert.equal(await pre.textContent(), [
    '<page_context untrusted="true">',
    '<item name="lesson">Watching &lt;b&gt;lesson&lt;/b&gt; 3 &amp; &lt;/page_context&gt;</item>',
    '<item name="progress">{"seconds":42}</item>', // parsed as JSON, written compact
    "</page_context>",
  ].join("\n"));

  // A row removed is not sent; a name the gateway refuses is an error on the page.
  await panel.getByRole("button", { name: "Remove row 1" }).click();
  assert.equal(await panel.getByLabel("Name 1").inputValue(), "progress");
  await panel.getByLabel("Name 1").fill("not a name");
  await panel.getByRole("button", { name: "Render" }).click();
  const alert = panel.getByRole("alert");
  await alert.waitFor();
  assert.match(await alert.textContent(), /^invalid_items: /);
  assert.equal(await pre.textContent(), "");
  await page.close();
});

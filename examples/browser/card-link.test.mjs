// <toolgate-card>'s link buttons (a connect card's, docs/connections.md)
// in headless Chromium, card.js alone: this test serves internal/web's
// card.js on a page of its own and plays the gateway's /calls endpoints,
// recording what the card sends. Run with `node --test card-link.test.mjs`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createServer } from "node:http";
import { freePort, root } from "../stack.mjs";
import { launchChromium } from "./chromium.mjs";

const web = join(root, "internal/web");
let browser, server, origin;
const seen = []; // the calls and authorize requests: {method, path, body, referer}
let callAnswer = null; // what GET /gw/calls/c1 answers: set per test

/** connectAnswer is the gateway's connect card for call c1 with link url. */
function connectAnswer(url) {
  return {
    callId: "c1", tool: "list_mail", status: "action_required",
    card: {
      type: "action_required", title: "Connect Gmail",
      description: "list_mail acts on your Gmail account. Connect it, and the call goes on by itself.",
      connection: { name: "gmail", title: "Gmail", expires: new Date(Date.now() + 600e3).toISOString() },
      elements: [{ type: "button", id: "connect", label: "Connect Gmail", variant: "primary", url }],
    },
  };
}

const done = { callId: "c1", tool: "list_mail", status: "done", isError: false, content: "mail for u_1" };

before(async () => {
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  server = createServer(async (req, res) => {
    const url = new URL(req.url, origin);
    let body = "";
    for await (const chunk of req) body += chunk;
    if (url.pathname.startsWith("/gw/calls/") || url.pathname === "/authorize") {
      seen.push({ method: req.method, path: url.pathname + url.search, body: body && JSON.parse(body), referer: req.headers.referer });
    }
    const json = (v) => {
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify(v));
    };
    if (url.pathname === "/page") {
      res.setHeader("Content-Type", "text/html; charset=utf-8");
      return res.end("<!doctype html><html><body></body></html>");
    }
    if (url.pathname === "/authorize") {
      res.setHeader("Content-Type", "text/html; charset=utf-8");
      return res.end("<!doctype html><title>Authorize</title><p>The service's authorization page.</p>");
    }
    const file = /^\/gw\/(card|form|marked)\.js$/.exec(url.pathname);
    if (file) {
      res.setHeader("Content-Type", "text/javascript; charset=utf-8");
      return res.end(readFileSync(join(web, `${file[1]}.js`)));
    }
    if (req.method === "GET" && url.pathname === "/gw/calls/c1") return json(callAnswer);
    if (req.method === "POST" && url.pathname === "/gw/calls/c1/resume") {
      return json(connectAnswer(`${origin}/authorize?state=s2`));
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise((ok) => server.listen(port, "127.0.0.1", ok));
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  server?.close();
});

/** open shows answer in a card with the test's gateway, as the user u_1. */
async function open(answer) {
  seen.length = 0;
  const page = await browser.newPage();
  page.on("pageerror", (e) => console.error("page error:", e));
  await page.goto(`${origin}/page`);
  await page.evaluate(async ({ answer, origin }) => {
    await import(`${origin}/gw/card.js`);
    window.__xss = undefined;
    const card = document.createElement("toolgate-card");
    card.gateway = `${origin}/gw`;
    card.identity = { user: "u_1", install: "in_1" };
    card.answer = answer;
    document.body.append(card);
  }, { answer, origin });
  return { page, card: page.getByRole("region", { name: "Connect Gmail" }) };
}

const resumes = () => seen.filter((s) => s.method === "POST");

test("a link that is javascript: or data: is a disabled button: pressing it opens nothing and sends nothing", async () => {
  for (const url of ["javascript:window.__xss=1", "data:text/html,<script>opener.__xss=2</script>"]) {
    const { page, card } = await open(connectAnswer(url));
    const b = card.getByRole("button", { name: "Connect Gmail" });
    assert.ok(await b.isDisabled(), url);
    assert.equal(await card.getByRole("link").count(), 0);
    let popups = 0;
    page.on("popup", () => popups++);
    await b.click({ force: true });
    await page.waitForTimeout(300);
    assert.equal(popups, 0);
    assert.deepEqual(seen, []);
    assert.equal(await page.evaluate(() => window.__xss), undefined);
    await page.close();
  }
});

test("an https link opens in a new window without opener or referrer, resumes nothing, and the card shows the call once it went on", async () => {
  callAnswer = connectAnswer(`${origin}/authorize?state=s1`);
  const { page, card } = await open(callAnswer);
  const link = card.getByRole("link", { name: "Connect Gmail" });
  assert.equal(await link.getAttribute("target"), "_blank");
  assert.equal(await link.getAttribute("rel"), "noopener noreferrer");
  const [popup] = await Promise.all([page.waitForEvent("popup"), link.click()]);
  await popup.waitForLoadState();
  assert.equal(popup.url(), `${origin}/authorize?state=s1`);
  assert.equal(await popup.evaluate(() => window.opener), null);
  const authorize = seen.find((s) => s.path.startsWith("/authorize"));
  assert.equal(authorize.referer, undefined, "the card's page is not told to the service");
  await card.getByText("Connect Gmail in the window that opened: the call goes on by itself.").waitFor();

  // The card asks for its call while it waits, and resumes nothing.
  const gets = () => seen.filter((s) => s.method === "GET" && s.path.startsWith("/gw/calls/c1"));
  const t0 = Date.now();
  while (gets().length < 2 && Date.now() - t0 < 8000) await new Promise((r) => setTimeout(r, 100));
  assert.ok(gets().length >= 2, "asked twice in 8 s");
  assert.equal(gets()[0].path, "/gw/calls/c1?user=u_1&install=in_1");
  assert.deepEqual(resumes(), []);
  // The gateway's callback ran the call: the card shows its answer.
  callAnswer = done;
  await page.getByRole("region", { name: "list_mail" }).getByText("mail for u_1").waitFor({ timeout: 5000 });
  assert.deepEqual(resumes(), []);
  await popup.close();
  await page.close();
});

test("\"I've connected — continue\" resumes with the connect button, and the new card's fresh link is shown", async () => {
  const { page, card } = await open(connectAnswer(`${origin}/authorize?state=s1`));
  await card.getByRole("button", { name: "I've connected — continue" }).click();
  await card.getByRole("link", { name: "Connect Gmail" }).and(page.locator(`[href="${origin}/authorize?state=s2"]`)).waitFor();
  assert.deepEqual(resumes().map((r) => [r.path, r.body]), [
    ["/gw/calls/c1/resume", { buttonId: "connect", identity: { user: "u_1", install: "in_1" } }],
  ]);
  await page.close();
});

// Browser tests of <toolgate-card> in headless Chromium, on an app's page
// origin (not the gateway's), against a real toolgate with caller tokens
// and the bookmarks component. Run with `node --test card.test.mjs`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createServer } from "node:http";
import { startStack, freePort, pagesBlock } from "../stack.mjs";
import { launchChromium } from "./chromium.mjs";

const callerSecret = "card-test-caller-secret-0123456789-abcdef";
const viewport = { width: 900, height: 800 }; // embeds get at most 560 px

let stack, browser, gate, host, hostServer;

/** callerToken signs a caller token (HS256) for the test's callers block. */
function callerToken(claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const head = b64({ alg: "HS256", typ: "JWT" });
  const body = b64({
    iss: "https://runtime.test", aud: "toolgate", sub: "u_1", install: "in_1",
    exp: Math.floor(Date.now() / 1000) + 600, ...claims,
  });
  const sig = createHmac("sha256", callerSecret).update(`${head}.${body}`).digest("base64url");
  return `${head}.${body}.${sig}`;
}

/** invoke calls a tool as the runtime does, with a caller token. */
async function invoke(tool, { user = "u_1", thread, callId, input = {} }) {
  const r = await fetch(`${gate}/tools/${tool}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${callerToken({ sub: user })}` },
    body: JSON.stringify({
      input, callId,
      context: thread ? { source: "thread", threadId: thread } : { source: "api" },
    }),
  });
  assert.equal(r.status, 200, `invoke ${tool}`);
  return r.json();
}

/**
 * serveHost serves the app page the cards are shown on (blank) and, under
 * /embed/, embed pages that post the height their query asks for. It is a
 * real loopback server, not a Playwright route: Chromium lets only a page
 * from the loopback address space call the loopback gateway.
 */
async function serveHost(port) {
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    res.setHeader("Content-Type", "text/html; charset=utf-8");
    if (url.pathname === "/card-host") {
      res.end("<!doctype html><html><body></body></html>");
    } else if (url.pathname.startsWith("/embed/")) {
      const h = Number(url.searchParams.get("h"));
      res.end(`<!doctype html><body style="margin:0"><div style="height:${h}px">tall</div>
<script>parent.postMessage({__kazzle_height: ${h}}, "*");</script></body>`);
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise((ok) => server.listen(port, "127.0.0.1", ok));
  return server;
}

before(async () => {
  const hostPort = await freePort();
  host = `http://127.0.0.1:${hostPort}`;
  hostServer = await serveHost(hostPort);
  stack = await startStack({
    name: "card",
    toolgate: (appPort) => `			callers {
				secret ${callerSecret}
				issuer https://runtime.test
				audience toolgate
			}
${pagesBlock(`http://127.0.0.1:${appPort}`, host)}`,
  });
  gate = stack.gate;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  stack?.stop();
  hostServer?.close();
});

/**
 * openHost opens a blank page on an app's origin (a page origin of the
 * gateway) with card.js imported from the gateway, as an app's chat UI
 * would.
 */
async function openHost() {
  const page = await browser.newPage({ viewport });
  page.on("pageerror", (e) => console.error("page error:", e));
  await page.goto(`${host}/card-host`);
  await page.evaluate(async (gate) => {
    await import(`${gate}/card.js`);
    window.__cardEvents = [];
    for (const type of ["toolgate.card.resolved", "toolgate.card.error"]) {
      document.addEventListener(type, (e) => window.__cardEvents.push({ type, detail: e.detail }));
    }
  }, gate);
  return page;
}

/** mount shows an answer in a new card; props: device, token, embedOrigins. */
async function mount(page, answer, { device, token, embedOrigins, id = "card" } = {}) {
  await page.evaluate(({ answer, device, token, embedOrigins, gate, id }) => {
    const card = document.createElement("toolgate-card");
    card.id = id;
    card.gateway = gate;
    if (token) card.getToken = async () => token;
    if (device) card.device = device;
    if (embedOrigins) card.embedOrigins = embedOrigins;
    card.answer = answer;
    document.body.append(card);
  }, { answer, device, token, embedOrigins, gate, id });
}

const events = (page) => page.evaluate(() => window.__cardEvents);

test("markdown: raw HTML is text, and only absolute http(s) and mailto are links", async () => {
  const page = await openHost();
  await mount(page, {
    callId: "c_md", tool: "show", status: "done", isError: false, content: "see card", card: "markdown",
    markdown: [
      "**Saved** <script>window.__xss = 1</script>",
      "",
      "<img src=x onerror=\"window.__xss = 2\">",
      "",
      "[go](https://go.dev) [bad](javascript:window.__xss=3) [rel](/bookmarks/b1) [mail](mailto:a@example.com)",
    ].join("\n"),
  });
  const card = page.getByRole("region", { name: "show" });
  await card.getByText("Saved").waitFor();
  assert.match(await card.innerText(), /<script>window.__xss = 1<\/script>/);
  assert.match(await card.innerText(), /<img src=x onerror="window.__xss = 2">/);
  const shadow = await page.evaluate(() => {
    const r = document.querySelector("toolgate-card").shadowRoot;
    return { scripts: r.querySelectorAll("script").length, imgs: r.querySelectorAll("img").length };
  });
  assert.deepEqual(shadow, { scripts: 0, imgs: 0 });

  const go = card.getByRole("link", { name: "go" });
  assert.equal(await go.getAttribute("href"), "https://go.dev/");
  assert.equal(await go.getAttribute("target"), "_blank");
  assert.equal(await go.getAttribute("rel"), "noopener noreferrer");
  assert.equal(await card.getByRole("link", { name: "mail" }).getAttribute("href"), "mailto:a@example.com");
  // The javascript: and the relative link are their text, no link.
  assert.match(await card.innerText(), /go bad rel mail/);
  for (const name of ["bad", "rel"]) {
    assert.equal(await card.getByRole("link", { name }).count(), 0, `${name} is a link`);
  }
  assert.deepEqual(await card.getByRole("link").evaluateAll((as) => as.map((a) => a.href)),
    ["https://go.dev/", "mailto:a@example.com"]);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  await page.close();
});

test("a hostile card and embed: markup in titles and labels is text, a variant names no attribute, a javascript: embed is no iframe", async () => {
  const page = await openHost();
  await mount(page, {
    callId: "c_h", tool: "evil", status: "action_required",
    card: {
      type: "action_required", title: "<img src=x onerror=\"window.__xss=1\">Title",
      elements: [{ type: "button", id: "b", label: "<b onmouseover=\"window.__xss=2\">Press</b>", variant: "x\" onclick=\"window.__xss=3" }],
    },
  }, { id: "hostile" });
  await mount(page, {
    callId: "c_j", tool: "embedder", status: "done", isError: false, content: "plain text instead",
    embedUrl: "javascript:window.__xss=4", card: "embed",
  }, { id: "jsembed" });
  const card = page.locator("#hostile").getByRole("region", { name: '<img src=x onerror="window.__xss=1">Title' });
  const button = card.getByRole("button", { name: '<b onmouseover="window.__xss=2">Press</b>' });
  await button.hover();
  await button.click();
  assert.deepEqual(await page.evaluate(() => {
    const r = document.getElementById("hostile").shadowRoot;
    const b = r.querySelector("button");
    return { imgs: r.querySelectorAll("img, b").length, cls: b.className, onclick: b.getAttribute("onclick") };
  }), { imgs: 0, cls: "", onclick: null });
  await page.locator("#jsembed").getByText("plain text instead").waitFor();
  assert.equal(await page.evaluate(() => document.getElementById("jsembed").shadowRoot.querySelectorAll("iframe").length), 0);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  await page.close();
});

test("a plain result and an error result", async () => {
  const page = await openHost();
  await mount(page, { callId: "c_p", tool: "list_bookmarks", status: "done", isError: false, content: "b1 Go <https://go.dev>" });
  await mount(page, { callId: "c_e", tool: "delete_bookmark", status: "done", isError: true, content: "not_found: no bookmark b9" }, { id: "err" });
  const plain = page.getByRole("region", { name: "list_bookmarks" });
  assert.equal(await plain.locator("[part=content]").innerText(), "b1 Go <https://go.dev>");
  const failed = page.getByRole("region", { name: "delete_bookmark" });
  assert.equal(await failed.locator("[part=error]").innerText(), "not_found: no bookmark b9");
  assert.match(await failed.getAttribute("class"), /error/);
  await page.close();
});

/** frameHeight is the card iframe's rendered height in px. */
const frameHeight = (page, id) =>
  page.evaluate((id) => document.getElementById(id).shadowRoot.querySelector("iframe").getBoundingClientRect().height, id);

test("an embed follows its own height messages, capped at 70% of the viewport", async () => {
  const page = await openHost();
  const embed = (h) => ({ callId: `c_${h}`, tool: "show_bookmark", status: "done", isError: false, content: "b1", embedUrl: `${host}/embed/x?h=${h}`, card: "embed" });
  await mount(page, embed(300), { id: "e300" });
  await mount(page, embed(5000), { id: "e5000" });
  const sandbox = await page.evaluate(() => document.getElementById("e300").shadowRoot.querySelector("iframe").getAttribute("sandbox"));
  assert.equal(sandbox, "allow-scripts allow-forms allow-popups");
  await page.waitForFunction(() => document.getElementById("e300").shadowRoot.querySelector("iframe").style.height === "300px");
  assert.equal(await frameHeight(page, "e300"), 300);
  await page.waitForFunction(() => document.getElementById("e5000").shadowRoot.querySelector("iframe").style.height !== "");
  assert.equal(await frameHeight(page, "e5000"), Math.floor(viewport.height * 0.7));

  // Messages from any other window change nothing: the host page itself,
  // and another frame that is not the card's.
  await page.evaluate(async (host) => {
    const seen = new Promise((ok) => {
      let n = 0;
      window.addEventListener("message", () => ++n === 2 && ok());
    });
    window.postMessage({ __kazzle_height: 20 }, "*");
    const other = document.createElement("iframe");
    other.src = `${host}/embed/other?h=40`;
    document.body.append(other);
    await seen;
  }, host);
  assert.equal(await frameHeight(page, "e300"), 300);
  assert.equal(await frameHeight(page, "e5000"), Math.floor(viewport.height * 0.7));
  await page.close();
});

test("with embedOrigins, a card frames only embeds on those origins", async () => {
  const page = await openHost();
  const embed = (url) => ({ callId: "c_o", tool: "show_bookmark", status: "done", isError: false, content: "the bookmark, as text", embedUrl: url, card: "embed" });
  // The gateway's origin is another loopback port: a real, reachable page
  // that this card was not told it may frame.
  await mount(page, embed(`${gate}/client.js`), { id: "foreign", embedOrigins: [host] });
  await mount(page, embed(`${host}/embed/x?h=120`), { id: "listed", embedOrigins: [host] });
  await page.locator("#foreign").getByText("the bookmark, as text").waitFor();
  assert.equal(await page.evaluate(() => document.getElementById("foreign").shadowRoot.querySelectorAll("iframe").length), 0);
  await page.waitForFunction(() => document.getElementById("listed").shadowRoot.querySelector("iframe")?.style.height === "120px");
  await page.close();
});

/** cardFor saves two bookmarks for user and asks to clear them on a thread. */
async function clearCard(user, callId) {
  for (const [url, title] of [["https://go.dev", "Go"], ["https://caddyserver.com", "Caddy"]]) {
    await invoke("save_bookmark", { user, input: { url, title } });
  }
  const ans = await invoke("clear_bookmarks", { user, thread: `th_${user}`, callId });
  assert.equal(ans.status, "action_required", JSON.stringify(ans));
  return ans;
}

test("a card resumed by its button, by Skip and by Cancel", async () => {
  const page = await openHost();
  const cases = [
    ["u_btn", "Delete all", "Deleted all 2 bookmarks.", false],
    ["u_skip", "Skip", "The user skipped this step.", false],
    ["u_cancel", "Cancel", "The user cancelled this step.", true],
  ];
  for (const [user, press, content, isError] of cases) {
    const ans = await clearCard(user, `clr_${user}`);
    await mount(page, ans, { id: user, token: callerToken({ sub: user }) });
    const card = page.locator(`#${user}`).getByRole("region", { name: "Delete all 2 bookmarks?" });
    await card.getByText("It cannot be undone.").waitFor();
    const names = await card.getByRole("button").allInnerTexts();
    assert.deepEqual(names, ["Delete all", "Keep them", "Skip", "Cancel"]);
    await card.getByRole("button", { name: press }).click();
    const done = page.locator(`#${user}`).getByRole("region", { name: "clear_bookmarks" });
    await done.getByText(content).waitFor();
    const resolved = (await events(page)).find((e) => e.type === "toolgate.card.resolved" && e.detail.callId === `clr_${user}`);
    assert.equal(resolved?.detail.status, "done");
    assert.equal(resolved.detail.content, content);
    assert.equal(resolved.detail.isError, isError);
  }
  // A second card of the skipped call, pressed after: the gateway's 409 is
  // shown on it, and nothing runs.
  const stale = await invoke("clear_bookmarks", { user: "u_skip", thread: "th_u_skip", callId: "clr_u_skip" });
  assert.equal(stale.content, "The user skipped this step.");
  const open = { callId: "clr_u_skip", tool: "clear_bookmarks", status: "action_required", card: (await clearCard("u_late", "clr_u_late")).card };
  await mount(page, open, { id: "stale", token: callerToken({ sub: "u_skip" }) });
  const card = page.locator("#stale").getByRole("region", { name: "Delete all 2 bookmarks?" });
  await card.getByRole("button", { name: "Delete all" }).click();
  await card.getByText(/was already answered \(skip/).waitFor();
  const conflict = (await events(page)).find((e) => e.type === "toolgate.card.error" && e.detail.status === 409);
  assert.equal(conflict?.detail.code, "conflict");
  assert.equal((await invoke("list_bookmarks", { user: "u_skip" })).content.split("\n").filter(Boolean).length, 2);

  // The button's target ran: u_btn has nothing left.
  assert.equal((await invoke("list_bookmarks", { user: "u_btn" })).content, "No bookmarks.");
  await page.close();
});

test("an assignee's card: other devices may only skip or cancel, and the gateway refuses a press from one", async () => {
  await invoke("save_bookmark", { user: "u_dev", input: { url: "https://go.dev", title: "Go" } });
  const ask = () => invoke("open_on_device", { user: "u_dev", thread: "th_dev", callId: `open_${Date.now()}`, input: { id: "b1", computerId: "laptop" } });
  const page = await openHost();

  // On a phone: the card's own buttons are disabled, Skip and Cancel not.
  const first = await ask();
  assert.equal(first.status, "action_required", JSON.stringify(first));
  await mount(page, first, { id: "phone", device: "phone", token: callerToken({ sub: "u_dev", device: "phone" }) });
  const phone = page.locator("#phone").getByRole("region");
  await phone.getByText("Continue on laptop").waitFor();
  assert.ok(await phone.getByRole("button", { name: "Open" }).isDisabled());
  assert.ok(await phone.getByRole("button", { name: "Not now" }).isDisabled());
  assert.ok(await phone.getByRole("button", { name: "Skip" }).isEnabled());
  assert.ok(await phone.getByRole("button", { name: "Cancel" }).isEnabled());

  // A card that believes it is the laptop, on a phone's token: the token
  // decides, and the 403 is shown on the card, not thrown.
  await mount(page, first, { id: "liar", device: "laptop", token: callerToken({ sub: "u_dev", device: "phone" }) });
  const liar = page.locator("#liar").getByRole("region");
  await liar.getByRole("button", { name: "Open" }).click();
  await liar.getByText(/continue on laptop: only that device may press/).waitFor();
  const err = (await events(page)).find((e) => e.type === "toolgate.card.error");
  assert.equal(err?.detail.status, 403);
  assert.equal(err.detail.code, "forbidden");
  assert.match(err.detail.message, /^continue on laptop/);
  assert.ok(await liar.getByRole("button", { name: "Open" }).isEnabled(), "buttons enabled again after a refusal");

  // The laptop itself resolves it.
  await mount(page, first, { id: "laptop", device: "laptop", token: callerToken({ sub: "u_dev", device: "laptop" }) });
  const laptop = page.locator("#laptop").getByRole("region");
  assert.equal(await laptop.getByText("Continue on").count(), 0);
  await laptop.getByRole("button", { name: "Open" }).click();
  await page.locator("#laptop").getByText("Opened b1 on laptop.").waitFor();
  // What a person saw: kept by the run in screenshots/cards.png.
  const dir = join(import.meta.dirname, "screenshots");
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, "cards.png"), fullPage: true });
  await page.close();
});

test("a call in flight settles on its own", async () => {
  const token = callerToken({ sub: "u_1" });
  const pending = invoke("read_draft", { thread: "th_run", callId: "rd_run1" });
  // The call is recorded before its page runs it.
  let now;
  for (let i = 0; i < 50; i++) {
    const r = await fetch(`${gate}/calls/rd_run1`, { headers: { Authorization: `Bearer ${token}` } });
    if (r.status === 200) {
      now = await r.json();
      break;
    }
    await new Promise((ok) => setTimeout(ok, 100));
  }
  assert.equal(now?.status, "awaiting_client", JSON.stringify(now));
  const page = await openHost();
  await mount(page, now, { token });
  const card = page.getByRole("region", { name: "read_draft" });
  await card.getByText("Waiting for the page to run it…").waitFor();

  // The example page opens and runs the client tool; the card polls.
  const app = await browser.newPage();
  await app.goto(`http://127.0.0.1:${stack.appPort}/page?thread=th_run`);
  const ans = await pending;
  assert.equal(ans.status, "done");
  await card.getByText(/Effective Go/).waitFor({ timeout: 15000 });
  const resolved = (await events(page)).find((e) => e.type === "toolgate.card.resolved");
  assert.equal(resolved?.detail.content, ans.content);
  assert.equal(await card.getAttribute("aria-busy"), null);

  await app.close();
  await page.close();
});

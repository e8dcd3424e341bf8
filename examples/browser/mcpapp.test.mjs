// The MCP Apps view (docs/mcp-clients.md, "MCP Apps") in headless Chromium, against a real
// toolgate: the test is an MCP Apps host. It reads ui://toolgate/card
// through MCP (the official TypeScript SDK client, declaring the Apps
// extension), loads it into a sandboxed frame under the CSP of the
// resource's _meta.ui.csp, and plays the host side with the official
// AppBridge of @modelcontextprotocol/ext-apps (its ES modules served to the
// page through an import map). Tool calls go to toolgate from this
// process; the view's own tools/call comes back through the bridge.
// Run with `node --test mcpapp.test.mjs`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:http";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { startStack, freePort } from "../stack.mjs";
import { launchChromium } from "./chromium.mjs";
import { importMap, moduleFile } from "./importmap.mjs";

const appsCaps = { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } };
// Without a callers block, a loopback client names the identity in _meta.
const meta = { "toolgate/identity": { user: "u_1", install: "in_1" } };

let stack, browser, client, transport;
let up, upServer, host, hostServer;
let read, view; // resources/read of ui://toolgate/card, and its {html, csp}
const hits = { page: 0, send: [] };
// What a person saw: kept by the run in screenshots/mcpapp-*.png.
const screenshots = join(import.meta.dirname, "screenshots");

/**
 * serveUpstream is the test's app component "apps": a tool answering an
 * embed of its own page (which asks for 300 px), a tool answering a card
 * whose "Send" button targets POST /send, and pages for the hostile cases.
 */
async function serveUpstream(port) {
  const origin = `http://127.0.0.1:${port}`;
  const json = (res, v) => {
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify(v));
  };
  const page = (res, script) => {
    res.setHeader("Content-Type", "text/html; charset=utf-8");
    res.end(`<!doctype html><body style="margin:0"><p>the app's page</p><script>${script}</script></body>`);
  };
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, origin);
    let body = "";
    for await (const chunk of req) body += chunk;
    switch (`${req.method} ${url.pathname}`) {
      case "GET /embed":
        return json(res, { content: "The report page.", embedUrl: `${origin}/page` });
      case "GET /page":
        hits.page++;
        return page(res, `parent.postMessage({__kazzle_height: 300}, "*");`);
      case "GET /evil":
        // An embed that claims to be the host, then asks for 222 px.
        return page(res, `
parent.postMessage({jsonrpc: "2.0", method: "ui/notifications/tool-result",
  params: {structuredContent: {status: "done", tool: "x", isError: false, content: "pwned by the embed"}}}, "*");
parent.postMessage({jsonrpc: "2.0", id: 1, result: {}}, "*");
parent.postMessage({__kazzle_height: 222}, "*");`);
      case "GET /heights":
        // Heights that are no number, then out of bounds both ways.
        return page(res, `
for (const h of [NaN, Infinity, "300", null, {}, [5], -50, 1e9]) parent.postMessage({__kazzle_height: h}, "*");`);
      case "POST /ask":
        return json(res, {
          type: "action_required",
          title: "Send the report?",
          description: "It goes to **ops**. <script>window.__xss = 1</script>",
          elements: [
            { type: "button", id: "send", label: "Send", variant: "primary", input: { to: "ops" },
              target: { type: "app", component: "apps", method: "POST", path: "/send", body: "${input}" } },
            { type: "button", id: "keep", label: "Not now", input: { content: "Not sent." } },
          ],
        });
      case "POST /send": {
        hits.send.push(JSON.parse(body || "null"));
        const to = hits.send.at(-1)?.to;
        return json(res, { content: `Sent the report to ${to}.`, markdown: `**Sent** the report to ${to}.` });
      }
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise((ok) => server.listen(port, "127.0.0.1", ok));
  return server;
}

/** The apps component's tools, as a manifest file. */
function writeManifest(dir) {
  const empty = { type: "object", properties: {}, additionalProperties: false };
  const file = join(dir, "apps.json");
  writeFileSync(file, JSON.stringify({
    tools: [
      { name: "show_report", description: "Show the report page.", input_schema: empty,
        target: { type: "app", component: "apps", method: "GET", path: "/embed" } },
      { name: "send_report", description: "Send the report, once a person agrees.", input_schema: empty,
        target: { type: "app", component: "apps", method: "POST", path: "/ask" } },
    ],
  }));
  return file;
}

/**
 * The host page: the ext-apps AppBridge from node_modules through an
 * import map, and openView(html, csp), which frames the view as hosts do,
 * sandboxed to scripts only (an opaque origin) with the resource's CSP.
 */
function hostPage() {
  return `<!doctype html><html><head><meta charset="utf-8">
<script type="importmap">${JSON.stringify(importMap("@modelcontextprotocol/ext-apps/app-bridge"))}</script></head>
<body><script type="module">
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
window.sizes = [];
window.calls = [];
window.opened = [];
const list = (a) => (a?.length ? a.join(" ") : "'none'");
window.openView = async (html, csp, hostContext) => {
  const policy = ["default-src 'none'", "script-src 'unsafe-inline'", "style-src 'unsafe-inline'",
    "frame-src " + list(csp.frameDomains), "connect-src " + list(csp.connectDomains),
    "img-src " + list(csp.resourceDomains), "font-src " + list(csp.resourceDomains)].join("; ");
  const doc = html.replace("<head>", '<head><meta http-equiv="Content-Security-Policy" content="' + policy + '">');
  const frame = document.createElement("iframe");
  frame.id = "view";
  frame.setAttribute("sandbox", "allow-scripts");
  frame.style.cssText = "width: 600px; height: 10px; border: 0; display: block";
  document.body.append(frame);
  const bridge = new AppBridge(null, { name: "toolgate-test-host", version: "1.0.0" }, { serverTools: {} }, { hostContext });
  bridge.addEventListener("sizechange", ({ height }) => {
    window.sizes.push(height);
    if (typeof height === "number") frame.style.height = height + "px";
  });
  bridge.onopenlink = async ({ url }) => {
    window.opened.push(url);
    return {};
  };
  bridge.oncalltool = async (params) => {
    window.calls.push(params);
    return window.hostCallTool(params);
  };
  const initialized = new Promise((ok) => bridge.addEventListener("initialized", ok));
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  frame.srcdoc = doc;
  await initialized;
  window.bridge = bridge;
};
window.deliver = async (result) => {
  await window.bridge.sendToolInput({ arguments: {} });
  await window.bridge.sendToolResult(result);
};
</script></body></html>`;
}

/** serveHost serves the host page, node_modules for its imports, and a sibling page. */
async function serveHost(port) {
  const page = hostPage();
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (url.pathname === "/host") {
      res.setHeader("Content-Type", "text/html; charset=utf-8");
      return res.end(page);
    }
    if (url.pathname === "/favicon.ico") {
      res.statusCode = 204;
      return res.end();
    }
    if (url.pathname === "/sibling") {
      res.setHeader("Content-Type", "text/html; charset=utf-8");
      return res.end("<!doctype html><p>another frame of the host's page</p>");
    }
    const f = url.pathname.startsWith("/node_modules/") && moduleFile(url.pathname);
    if (f) {
      res.setHeader("Content-Type", "text/javascript; charset=utf-8");
      return res.end(readFileSync(f));
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise((ok) => server.listen(port, "127.0.0.1", ok));
  return server;
}

before(async () => {
  const upPort = await freePort();
  up = `http://127.0.0.1:${upPort}`;
  upServer = await serveUpstream(upPort);
  const hostPort = await freePort();
  host = `http://127.0.0.1:${hostPort}`;
  hostServer = await serveHost(hostPort);
  const manifest = writeManifest(mkdtempSync(join(tmpdir(), "toolgate-mcpapp-")));
  stack = await startStack({
    name: "mcpapp",
    toolgate: () => `\t\t\tmanifest ${manifest}\n\t\t\tcomponent apps ${up}`,
  });
  // An Apps host without form elicitation: cards come to the view.
  client = new Client({ name: "toolgate-test-host", version: "1.0.0" }, { capabilities: appsCaps });
  transport = new StreamableHTTPClientTransport(new URL(`${stack.gate}/mcp`));
  await client.connect(transport);
  const { contents } = await client.readResource({ uri: "ui://toolgate/card", _meta: meta });
  read = contents;
  view = { html: contents[0]?.text, csp: contents[0]?._meta?.ui?.csp };
  browser = await launchChromium();
});

after(async () => {
  try {
    await transport?.terminateSession();
  } catch {
    // the session may be gone already
  }
  await client?.close();
  await browser?.close();
  stack?.stop();
  upServer?.close();
  hostServer?.close();
});

/** call runs tools/call on toolgate as the host, with the identity. */
const call = (name, args = {}) => client.callTool({ name, arguments: args, _meta: meta });

/** openHost opens the host page with the view loaded and initialized. */
async function openHost(hostContext = {}) {
  const page = await browser.newPage({ viewport: { width: 900, height: 800 } });
  page.on("pageerror", (e) => console.error("page error:", e));
  // Errors in any frame, but for the CSP refusal the embed test provokes.
  page.on("console", (m) => m.type() === "error" && !/x\.png' violates/.test(m.text()) && console.error("console:", m.text()));
  await page.exposeFunction("hostCallTool", (params) => call(params.name, params.arguments));
  await page.goto(`${host}/host`);
  await page.waitForFunction(() => typeof window.openView === "function");
  await page.evaluate(({ html, csp, hostContext }) => window.openView(html, csp, hostContext), { ...view, hostContext });
  return page;
}

const viewFrame = (page) => page.frameLocator("#view");
const sizes = (page) => page.evaluate(() => window.sizes);
/** lastSize waits until the host's last size-changed height is h. */
const lastSize = (page, h) => page.waitForFunction((h) => window.sizes.at(-1) === h, h);

test("the view is ui://toolgate/card, read through MCP with its CSP, and app tools point at it", async () => {
  const { tools } = await client.listTools({ _meta: meta });
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const name of ["show_report", "send_report", "show_bookmark"]) {
    assert.equal(byName[name]?._meta?.ui?.resourceUri, "ui://toolgate/card", name);
  }
  assert.deepEqual(byName.toolgate_card_answer?._meta?.ui, { resourceUri: "ui://toolgate/card", visibility: ["app"] });

  assert.equal(read.length, 1);
  const [c] = read;
  assert.equal(c.mimeType, "text/html;profile=mcp-app");
  assert.match(c.text, /^<!doctype html>/);
  const csp = c._meta?.ui?.csp;
  // The bookmarks component's origin and this test's upstream, sorted.
  assert.deepEqual(csp?.frameDomains, [`http://127.0.0.1:${stack.appPort}`, up].sort());
  assert.deepEqual(csp.connectDomains, []);
  assert.deepEqual(csp.resourceDomains, []);
});

test("an embed loads in the view's inner frame, and its __kazzle_height of 300 is a size-change of 300", async () => {
  const res = await call("show_report");
  assert.equal(res.isError ?? false, false, JSON.stringify(res));
  assert.equal(res.structuredContent?.status, "done");
  assert.equal(res.structuredContent.card, "embed");
  assert.equal(res.structuredContent.embedUrl, `${up}/page`);
  assert.ok(!res.content.some((c) => c.type === "resource_link"), "no resource_link: the view shows the embed");

  const page = await openHost();
  const before = hits.page;
  await page.evaluate((r) => window.deliver(r), res);
  const inner = viewFrame(page).frameLocator("iframe");
  await inner.getByText("the app's page").waitFor();
  assert.equal(hits.page, before + 1, "the embed page was loaded once");
  assert.equal(await viewFrame(page).locator("iframe").getAttribute("sandbox"), "allow-scripts allow-forms allow-popups");
  await lastSize(page, 300);
  // The host sized the view to it; the view's document is the embed.
  assert.equal(await page.locator("#view").evaluate((f) => f.getBoundingClientRect().height), 300);
  const frame = page.frames().find((f) => f.url() === `${up}/page`);
  assert.ok(frame, "the embed is a frame of the page");
  assert.equal(await frame.evaluate(() => window.innerHeight), 300);

  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, "mcpapp-embed.png") });

  // The view runs under the resource's CSP, as a host applies it: an
  // image of the app's origin is refused (img-src 'none').
  const violated = await viewFrame(page).locator("body").evaluate((body, src) => new Promise((ok) => {
    document.addEventListener("securitypolicyviolation", (e) => ok(e.effectiveDirective));
    const img = document.createElement("img");
    img.src = src;
    body.append(img);
  }), `${up}/x.png`);
  assert.equal(violated, "img-src");

  await page.close();
});

test("a card's button, pressed in the view, resumes the call through the host once, and the view shows the answer", async () => {
  const res = await call("send_report");
  assert.equal(res.isError ?? false, false, JSON.stringify(res));
  assert.equal(res.structuredContent?.status, "action_required");
  const state = res._meta?.["toolgate/state"];
  assert.equal(typeof state, "string");
  assert.match(res.content[0].text, /waits for a person to answer the card "Send the report\?"/);

  // A host in dark mode, with its own colours; one value is no colour at
  // all, and one variable is none the view takes.
  const page = await openHost({
    theme: "dark",
    styles: { variables: { "--color-text-primary": "rgb(230, 237, 243)", "--color-background-primary": "rgb(13, 17, 23)",
      "--color-border-primary": "red; background: url(https://evil.example/)", "--color-ring-primary": "rgb(1, 2, 3)" } },
  });
  await page.evaluate((r) => window.deliver(r), res);
  const card = viewFrame(page).getByRole("region", { name: "Send the report?" });
  await card.getByText("It goes to").waitFor();
  assert.deepEqual(await card.evaluate((c) => {
    const s = getComputedStyle(c);
    return { color: s.color, background: s.backgroundColor, scheme: getComputedStyle(document.documentElement).colorScheme,
      ring: document.documentElement.style.getPropertyValue("--color-ring-primary") };
  }), { color: "rgb(230, 237, 243)", background: "rgb(13, 17, 23)", scheme: "dark", ring: "" });
  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, "mcpapp-card.png") });
  assert.deepEqual(await card.getByRole("button").allInnerTexts(), ["Send", "Not now", "Skip", "Cancel"]);
  // The description's raw HTML is text.
  assert.match(await card.innerText(), /<script>window.__xss = 1<\/script>/);
  assert.equal(await viewFrame(page).locator("script").evaluateAll((s) => s.length), 1, "only the view's own script");

  // A forged state (its signature broken) and a missing one run nothing.
  const forged = state.slice(0, -4) + (state.endsWith("AAAA") ? "BBBB" : "AAAA");
  for (const args of [{ state: forged, button: "send" }, { button: "send" }]) {
    const r = await call("toolgate_card_answer", args);
    assert.equal(r.isError, true, JSON.stringify(r));
  }
  assert.deepEqual(hits.send, []);
  await card.getByRole("button", { name: "Send" }).click();
  const done = viewFrame(page).getByRole("region", { name: "send_report" });
  await done.getByText("Sent").waitFor();
  assert.match(await done.innerText(), /^Sent the report to ops\.$/m);
  assert.equal(await done.locator("strong").innerText(), "Sent");
  assert.deepEqual(hits.send, [{ to: "ops" }], "the button's target ran once, with its input");
  // The view called toolgate_card_answer through the host with the state.
  assert.deepEqual(await page.evaluate(() => window.calls),
    [{ name: "toolgate_card_answer", arguments: { state, button: "send" } }]);
  // A size-change for the new answer's height.
  const h = await viewFrame(page).locator("html").evaluate((e) => Math.ceil(e.getBoundingClientRect().height));
  await lastSize(page, h);

  // The state is spent: the same press again, from anyone, runs nothing.
  const again = await call("toolgate_card_answer", { state, button: "send" });
  assert.equal(again.isError, true, JSON.stringify(again));
  assert.deepEqual(hits.send, [{ to: "ops" }]);
  assert.equal(await viewFrame(page).locator("body").evaluate(() => window.__xss), undefined);
  await page.close();
});

test("Skip in the view skips the call", async () => {
  const res = await call("send_report");
  const page = await openHost();
  await page.evaluate((r) => window.deliver(r), res);
  await viewFrame(page).getByRole("button", { name: "Skip" }).click();
  await viewFrame(page).getByText("The user skipped this step.").waitFor();
  assert.equal((await page.evaluate(() => window.calls))[0].arguments.action, "skip");
  assert.equal(hits.send.length, 1, "nothing sent");
  await page.close();
});

/** answer is a done answer of the test upstream's tool, as a result. */
const answer = (a) => ({ content: [{ type: "text", text: "for the model" }], structuredContent: { status: "done", tool: "show_report", isError: false, content: "plain text instead", ...a } });

test("an embedUrl that is javascript:, data: or relative is no frame; markdown's raw HTML is text", async () => {
  const page = await openHost();
  for (const embedUrl of ["javascript:parent.__xss=1", "data:text/html,<script>parent.__xss=2</script>", "/page", "//127.0.0.1/page"]) {
    await page.evaluate((r) => window.deliver(r), answer({ card: "embed", embedUrl, content: `plain ${embedUrl}` }));
    await viewFrame(page).getByText(`plain ${embedUrl}`).waitFor();
    assert.equal(await viewFrame(page).locator("iframe").count(), 0, embedUrl);
  }
  await page.evaluate((r) => window.deliver(r), answer({
    card: "markdown",
    markdown: "**Hi** <script>window.__xss = 3</script> <img src=x onerror=\"window.__xss = 4\"> [j](javascript:window.__xss=5)",
  }));
  const md = viewFrame(page).locator("[part=markdown]");
  await md.getByText("Hi").waitFor();
  assert.match(await md.innerText(), /<script>window.__xss = 3<\/script> <img src=x onerror="window.__xss = 4"> j/);
  assert.equal(await md.locator("script, img, a").count(), 0);
  assert.equal(await viewFrame(page).locator("body").evaluate(() => window.__xss), undefined);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.equal(page.frames().length, 2, "the host page and the view, nothing else");
  await page.close();
});

test("a markdown link clicked in the view is opened by the host (ui/open-link), not by the sandboxed view", async () => {
  const page = await openHost();
  await page.evaluate((r) => window.deliver(r), answer({ card: "markdown", markdown: "See [the docs](https://docs.example/guide?x=1)." }));
  const link = viewFrame(page).locator("[part=markdown] a");
  await link.click();
  await page.waitForFunction(() => window.opened.length > 0);
  assert.deepEqual(await page.evaluate(() => window.opened), ["https://docs.example/guide?x=1"]);
  assert.equal(page.context().pages().length, 1, "no window opened by the view itself");
  await page.close();
});

test("a connect card's link is opened by the host, resuming nothing; a javascript: one is a disabled button; continue asks the host", async () => {
  const page = await openHost();
  const connect = (url) => ({
    content: [{ type: "text", text: "Connect Gmail" }],
    structuredContent: {
      status: "action_required", callId: "c_connect", tool: "list_mail",
      card: {
        type: "action_required", title: "Connect Gmail",
        connection: { name: "gmail", title: "Gmail", expires: new Date(Date.now() + 600e3).toISOString() },
        elements: [{ type: "button", id: "connect", label: "Connect Gmail", variant: "primary", url }],
      },
    },
    _meta: { "toolgate/state": "st_not_the_gateways" },
  });
  await page.evaluate((r) => window.deliver(r), connect("javascript:parent.__xss=1"));
  const card = viewFrame(page).getByRole("region", { name: "Connect Gmail" });
  assert.ok(await card.getByRole("button", { name: "Connect Gmail" }).isDisabled());
  assert.equal(await card.getByRole("link").count(), 0);

  await page.evaluate((r) => window.deliver(r), connect("https://accounts.example/authorize?state=s1"));
  await card.getByRole("link", { name: "Connect Gmail" }).click();
  await page.waitForFunction(() => window.opened.length > 0);
  assert.deepEqual(await page.evaluate(() => window.opened), ["https://accounts.example/authorize?state=s1"]);
  assert.equal(page.context().pages().length, 1, "no window opened by the view itself");
  await card.getByText("then press “I've connected — continue”").waitFor();
  assert.deepEqual(await page.evaluate(() => window.calls), [], "opening the link resumes nothing");

  // Continue answers the card through the host; the gateway refuses a
  // state it did not sign, and the card says so.
  await card.getByRole("button", { name: "I've connected — continue" }).click();
  await page.waitForFunction(() => window.calls.length > 0);
  assert.deepEqual(await page.evaluate(() => window.calls), [
    { name: "toolgate_card_answer", arguments: { state: "st_not_the_gateways", button: "connect" } },
  ]);
  await card.locator("[part~=notice].failed").waitFor();
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  await page.close();
});

test("messages from windows that are not the host, or not the embed, change nothing", async () => {
  const page = await openHost();
  // An embed that posts a fake tool-result and a stray response, then 222 px.
  await page.evaluate((r) => window.deliver(r), answer({ card: "embed", embedUrl: `${up}/evil` }));
  await lastSize(page, 222);
  assert.equal(await viewFrame(page).getByText("pwned by the embed").count(), 0);

  // Another frame of the host's page, same origin as the host, posts a
  // tool-result and a height to the view: neither is taken.
  await page.evaluate(async (host) => {
    const sib = document.createElement("iframe");
    sib.src = `${host}/sibling`;
    document.body.append(sib);
    await new Promise((ok) => (sib.onload = ok));
    const view = document.getElementById("view").contentWindow;
    sib.contentWindow.eval(`parent.document.getElementById("view").contentWindow.postMessage(
      {jsonrpc: "2.0", method: "ui/notifications/tool-result",
       params: {structuredContent: {status: "done", tool: "x", isError: false, content: "pwned by a sibling"}}}, "*");
      parent.document.getElementById("view").contentWindow.postMessage({__kazzle_height: 999}, "*");`);
    // And the host page's own window posting a height as if it were the embed.
    view.postMessage({ __kazzle_height: 777 }, "*");
  }, host);
  // Then the real host shows another answer; the fakes were handled before.
  await page.evaluate((r) => window.deliver(r), answer({ content: "the real one" }));
  await viewFrame(page).getByText("the real one").waitFor();
  assert.equal(await viewFrame(page).getByText(/pwned/).count(), 0);
  for (const h of [999, 777]) assert.ok(!(await sizes(page)).includes(h), `size ${h} from a stranger`);
  await page.close();
});

test("an embed's heights that are no number are ignored; others are bounded to 1..10000 px", async () => {
  const page = await openHost();
  await page.evaluate((r) => window.deliver(r), answer({ card: "embed", embedUrl: `${up}/heights` }));
  await lastSize(page, 10000);
  const seen = await sizes(page);
  assert.ok(seen.every((h) => Number.isInteger(h) && h >= 0 && h <= 10000), JSON.stringify(seen));
  // -50 became 1 px, before 1e9 became 10000.
  assert.deepEqual(seen.slice(-2), [1, 10000]);
  assert.ok(!seen.includes(300), "the string \"300\" is no height");
  await page.close();
});

test("a card that came without its state shows its buttons, and a press says it cannot be answered here", async () => {
  const page = await openHost();
  await page.evaluate((r) => window.deliver(r), {
    content: [{ type: "text", text: "waits" }],
    structuredContent: {
      status: "action_required", callId: "c_nostate", tool: "send_report",
      card: { type: "action_required", title: "Stateless", elements: [{ type: "button", id: "send", label: "Send" }] },
    },
  });
  const card = viewFrame(page).getByRole("region", { name: "Stateless" });
  await card.getByRole("button", { name: "Send" }).click();
  await card.getByText(/cannot be answered here/).waitFor();
  assert.deepEqual(await page.evaluate(() => window.calls), [], "nothing was sent to the host");
  await page.close();
});

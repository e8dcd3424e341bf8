// Browser tests: the example page and the browser client in headless
// Chromium, against a real toolgate and the bookmarks component, both built
// from this checkout. Run with `node --test` in this folder.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, invoke as invokeTool, pagesBlock } from "../stack.mjs";
import { launchChromium } from "./chromium.mjs";


let stack, browser, gatePort, appPort;

const gate = () => `http://127.0.0.1:${gatePort}/toolgate`;

const invoke = (tool, opts) => invokeTool(gate(), tool, opts);

before(async () => {
  stack = await startStack({
    name: "browser",
    toolgate: (appPort) => `			client_tool_timeout 20s
${pagesBlock(`http://127.0.0.1:${appPort}`)}`,
  });
  ({ gatePort, appPort } = stack);
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  stack?.stop();
});

/**
 * openPage opens the example page for a thread and records the page's
 * toolgate events (in order) in window.__events.
 */
async function openPage(url) {
  const page = await browser.newPage();
  page.on("pageerror", (e) => console.error("page error:", e));
  await page.addInitScript(() => {
    window.__events = [];
    for (const name of ["toolgate.tool.change", "toolgate.log"]) {
      document.addEventListener(name, (e) => window.__events.push({ type: name, ...e.detail }));
    }
  });
  await page.goto(url);
  await page.waitForFunction(() => window.toolgateReady === true);
  return page;
}

const draft = { url: "https://go.dev/doc/effective_go", title: "Effective Go", tags: ["go", "style"] };

test("the example page answers a client tool invoked through the Tools API", async () => {
  const page = await openPage(`http://127.0.0.1:${gatePort}/app/page?thread=th_a`);
  await page.fill("#title", "Effective Go, again");
  const ans = await invoke("read_draft", { thread: "th_a", callId: "rd_a1" });
  assert.equal(ans.status, "done");
  assert.equal(ans.isError, false);
  // The JSON text is the page's own, keys in the page's order.
  assert.equal(ans.content, JSON.stringify({ ...draft, title: "Effective Go, again" }));

  await page.waitForFunction(() => window.__events.some((e) => e.status === "end"));
  const changes = await page.evaluate(() => window.__events.filter((e) => e.type === "toolgate.tool.change"));
  assert.deepEqual(
    changes.map((e) => [e.id, e.name, e.status, e.isError]),
    [["rd_a1", "read_draft", "start", undefined], ["rd_a1", "read_draft", "end", false]],
  );
  await page.close();
});

test("a reload after a call has its result never runs it again", async () => {
  const page = await openPage(`http://127.0.0.1:${gatePort}/app/page?thread=th_b`);
  const first = await invoke("read_draft", { thread: "th_b", callId: "rd_b1" });
  assert.equal(first.isError, false);
  await page.reload();
  await page.waitForFunction(() => window.toolgateReady === true);
  // A repeat of the call id answers from the ledger, and the page runs nothing.
  const again = await invoke("read_draft", { thread: "th_b", callId: "rd_b1" });
  assert.deepEqual(again, first);
  await new Promise((r) => setTimeout(r, 500));
  const starts = await page.evaluate(() => window.__events.filter((e) => e.status === "start").length);
  assert.equal(starts, 0);
  await page.close();
});

test("a reload mid-call still ends the call", async () => {
  const page = await openPage(`http://127.0.0.1:${gatePort}/app/page?thread=th_c`);
  // This page's handler never finishes.
  await page.evaluate(() => {
    document.querySelector("toolgate-client").onClientTool = () => new Promise(() => {});
  });
  const pending = invoke("read_draft", { thread: "th_c", callId: "rd_c1" });
  await page.waitForFunction(() => window.__events.some((e) => e.status === "start"));
  await page.reload(); // the example's own handler answers after the reload
  const ans = await pending;
  assert.equal(ans.isError, false);
  assert.equal(ans.content, JSON.stringify(draft));
  await page.close();
});

test("a page from another allowed origin works the same", async () => {
  const page = await openPage(`http://127.0.0.1:${appPort}/page?thread=th_d`);
  const ans = await invoke("read_draft", { thread: "th_d", callId: "rd_d1" });
  assert.equal(ans.isError, false);
  assert.equal(ans.content, JSON.stringify(draft));
  await page.close();
});

test("a handler that throws gives an error result", async () => {
  const page = await openPage(`http://127.0.0.1:${gatePort}/app/page?thread=th_e`);
  await page.evaluate(() => {
    document.querySelector("toolgate-client").onClientTool = async () => {
      throw new Error("the form is not ready");
    };
  });
  const ans = await invoke("read_draft", { thread: "th_e", callId: "rd_e1" });
  assert.equal(ans.isError, true);
  assert.equal(ans.content, "the form is not ready");
  await page.waitForFunction(() => window.__events.some((e) => e.status === "end"));
  const end = await page.evaluate(() => window.__events.find((e) => e.status === "end"));
  assert.equal(end.isError, true);
  await page.close();
});

test("readables over the limits drop the oldest and log a warning", async () => {
  const page = await openPage(`http://127.0.0.1:${gatePort}/app/page?thread=th_f`);
  const snapshot = await page.evaluate(() => {
    const c = document.querySelector("toolgate-client");
    for (let i = 0; i < 40; i++) c.setReadable(`extra.${i}`, i);
    return c.pageContext();
  });
  // 3 from the form plus 40: the 11 oldest go, the form's first.
  assert.equal(snapshot.length, 32);
  assert.equal(snapshot[0].name, "extra.8");
  assert.equal(snapshot[31].name, "extra.39");
  const warn = await page.evaluate(() => window.__events.find((e) => e.type === "toolgate.log" && e.level === "warn"));
  assert.deepEqual(warn.data.names, ["draft.url", "draft.title", "draft.tags", ...Array.from({ length: 8 }, (_, i) => `extra.${i}`)]);

  // The runtime renders the page's snapshot for the user message.
  const r = await fetch(`${gate()}/page-context`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ items: snapshot }),
  });
  const rendered = await r.json();
  assert.equal(r.status, 200);
  assert.deepEqual(rendered.dropped, []);
  assert.match(rendered.text, /^<page_context untrusted="true">\n<item name="extra.8">8<\/item>\n/);
  await page.close();
});

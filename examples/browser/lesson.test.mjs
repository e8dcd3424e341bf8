// The React lesson page (examples/lesson, built with @toolgate/react) in
// headless Chromium, served by the example site at /lesson/ beside a real
// toolgate and the bookmarks component. Run with `node --test lesson.test.mjs`;
// the page is built first when examples/lesson/dist is missing (that needs
// `npm ci` at the repository root).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { root, startStack, invoke as invokeTool, pagesBlock } from "../stack.mjs";
import { launchChromium } from "./chromium.mjs";

const dist = join(root, "examples/lesson/dist");
let stack, browser, site;

const invoke = (tool, opts) => invokeTool(stack.gate, tool, opts);

before(async () => {
  if (!existsSync(join(dist, "index.html"))) {
    execFileSync("npm", ["run", "build", "-w", "examples/lesson"], { cwd: root, stdio: "inherit" });
  }
  stack = await startStack({
    name: "lesson",
    toolgate: (appPort) => `			manifest examples/lesson/tools.json
			client_tool_timeout 20s
${pagesBlock(`http://127.0.0.1:${appPort}`)}`,
    site: `	handle_path /lesson/* {
		root * examples/lesson/dist
		file_server
	}`,
  });
  site = `http://127.0.0.1:${stack.gatePort}`;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  stack?.stop();
});

/** openLesson opens the lesson page for a thread, once its client has a page token. */
async function openLesson(thread) {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  await page.goto(`${site}/lesson/?thread=${thread}`);
  // The page fetched a page token: its call stream is open, or about to be.
  await page.waitForFunction(() => document.querySelector("toolgate-client") && window.showAnswer);
  return { page, errors };
}

/** seek moves the player's seek bar as a person would drag it. */
async function seek(page, seconds) {
  await page.getByRole("slider", { name: "Position" }).evaluate((input, s) => {
    Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set.call(input, String(s));
    input.dispatchEvent(new Event("input", { bubbles: true }));
  }, seconds);
  await page.getByText(`${seconds} s of`).waitFor();
}

test("a client tool invoked through the Tools API is answered by the page's useToolgateTool", async () => {
  const { page, errors } = await openLesson("th_l1");
  await seek(page, 83);
  const ans = await invoke("read_playback_progress", { thread: "th_l1", callId: "rpp_1" });
  assert.equal(ans.status, "done", JSON.stringify(ans));
  assert.equal(ans.isError, false, ans.content);
  assert.equal(ans.content, JSON.stringify({ positionSeconds: 83, durationSeconds: 605 }));

  // The hook's handler reads the player when called: another lesson, another answer.
  await page.getByRole("button", { name: "Lesson 2" }).click();
  await seek(page, 7);
  const again = await invoke("read_playback_progress", { thread: "th_l1", callId: "rpp_2" });
  assert.equal(again.content, JSON.stringify({ positionSeconds: 7, durationSeconds: 538 }));

  // onToolChange saw each call start and end.
  await page.locator("#events").getByText("tool read_playback_progress end (ok) rpp_2").waitFor();
  assert.deepEqual(errors, []);
  await page.close();
});

test("useToolgateReadable keeps the lesson in the page context, one item, following the lesson", async () => {
  const { page } = await openLesson("th_l2");
  const context = () => page.evaluate(() => document.querySelector("toolgate-client").pageContext());
  // StrictMode mounted the bridge twice: still one item.
  assert.deepEqual(await context(), [{ name: "lesson", value: "Watching lesson 3: Closures" }]);
  await page.getByRole("button", { name: "Lesson 1" }).click();
  assert.deepEqual(await context(), [{ name: "lesson", value: "Watching lesson 1: Values and variables" }]);

  // The runtime renders the page's snapshot into the user message.
  const r = await fetch(`${stack.gate}/page-context`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ items: await context() }),
  });
  assert.equal(r.status, 200);
  assert.equal((await r.json()).text,
    '<page_context untrusted="true">\n<item name="lesson">Watching lesson 1: Values and variables</item>\n</page_context>');
  await page.close();
});

test("a card shown by <ToolgateCard> is resolved by a button press, and onResolved fires", async () => {
  const { page, errors } = await openLesson("th_l3");
  for (const [url, title] of [["https://go.dev", "Go"], ["https://react.dev", "React"]]) {
    assert.equal((await invoke("save_bookmark", { thread: "th_l3", callId: `save_${title}`, input: { url, title } })).isError, false);
  }
  const ask = await invoke("clear_bookmarks", { thread: "th_l3", callId: "clr_l3" });
  assert.equal(ask.status, "action_required", JSON.stringify(ask));
  await page.evaluate((a) => window.showAnswer(a), ask);
  // The card resumes as the page token's user: the page has one once its client asked.
  await page.waitForFunction(() => document.querySelector("toolgate-card")?.identity?.user === "u_1");

  const card = page.getByRole("region", { name: "Delete all 2 bookmarks?" });
  await card.getByRole("button", { name: "Delete all" }).click();
  await page.locator("#resolved").getByText("Resolved: Deleted all 2 bookmarks.").waitFor();
  await page.getByRole("region", { name: "clear_bookmarks" }).getByText("Deleted all 2 bookmarks.").waitFor();

  // The gateway recorded the press: the call is done with the button's result.
  const done = await invoke("clear_bookmarks", { thread: "th_l3", callId: "clr_l3" });
  assert.equal(done.status, "done");
  assert.equal(done.content, "Deleted all 2 bookmarks.");
  assert.deepEqual(errors, []);
  await page.close();
});

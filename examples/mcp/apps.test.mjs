// MCP Apps tests: toolgate's /mcp endpoint with the official TypeScript SDK
// client declaring the MCP Apps extension (as a host that shows views
// does), against a real toolgate and the bookmarks component, both built
// from this checkout. Run with `node --test` in this folder.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack } from "../stack.mjs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const VIEW = "ui://toolgate/card";
const VIEW_MIME = "text/html;profile=mcp-app";

let stack, apps, plain;
const transports = [];

const meta = () => ({ "toolgate/identity": { user: "u_1", install: "in_1" } });

/** connect opens a session with the given capabilities. */
async function connect(name, capabilities) {
  const client = new Client({ name, version: "1.0.0" }, { capabilities });
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.gate}/mcp`));
  await client.connect(transport);
  transports.push([client, transport]);
  return client;
}

/** call runs tools/call as u_1 from client. */
const call = (client, name, args = {}) => client.callTool({ name, arguments: args, _meta: meta() });

/** status is the call's answer as GET /calls/{id} gives it. */
async function status(callId) {
  const r = await fetch(`${stack.gate}/calls/${callId}?user=u_1&install=in_1`);
  assert.equal(r.status, 200, `GET /calls/${callId}`);
  return r.json();
}

before(async () => {
  stack = await startStack({ name: "mcp-apps" });
  // A host with MCP Apps and without elicitation: cards are answered in
  // the view.
  apps = await connect("toolgate-apps-host", { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [VIEW_MIME] } } });
  plain = await connect("toolgate-plain-client", {});
});

after(async () => {
  for (const [client, transport] of transports) {
    try {
      await transport.terminateSession();
    } catch {
      // the session may be gone already
    }
    await client.close();
  }
  stack?.stop();
});

test("tools/list gives an Apps client the view on app tools and toolgate_card_answer; a plain client neither", async () => {
  const byName = Object.fromEntries((await apps.listTools({ _meta: meta() })).tools.map((t) => [t.name, t]));
  for (const name of ["save_bookmark", "show_bookmark", "clear_bookmarks"]) {
    assert.deepEqual(byName[name]._meta, { ui: { resourceUri: VIEW }, "ui/resourceUri": VIEW }, name);
  }
  // A client tool runs in the page, not in the view.
  assert.equal(byName.read_draft._meta, undefined);
  const answer = byName.toolgate_card_answer;
  assert.deepEqual(answer._meta, { ui: { resourceUri: VIEW, visibility: ["app"] } });
  assert.deepEqual(answer.inputSchema.required, ["state"]);
  assert.deepEqual(answer.inputSchema.properties.action, { enum: ["skip", "cancel"] });

  const plainTools = (await plain.listTools({ _meta: meta() })).tools;
  assert.equal(plainTools.length, Object.keys(byName).length - 1);
  assert.ok(!plainTools.some((t) => t.name === "toolgate_card_answer"));
  assert.ok(plainTools.every((t) => t._meta === undefined), JSON.stringify(plainTools.map((t) => t._meta)));
});

test("the server declares the extension; resources/read gives the view with its MIME type and CSP", async () => {
  assert.ok(apps.getServerCapabilities()?.extensions?.["io.modelcontextprotocol/ui"], JSON.stringify(apps.getServerCapabilities()));
  const { resources } = await apps.listResources();
  assert.deepEqual(
    resources.map((r) => [r.uri, r.name, r.mimeType]),
    [[VIEW, "toolgate-card", VIEW_MIME]],
  );
  const { contents } = await apps.readResource({ uri: VIEW });
  assert.equal(contents.length, 1);
  const [view] = contents;
  assert.equal(view.uri, VIEW);
  assert.equal(view.mimeType, VIEW_MIME);
  assert.match(view.text, /<html/i);
  assert.deepEqual(view._meta, {
    ui: {
      csp: { frameDomains: [`http://127.0.0.1:${stack.appPort}`], connectDomains: [], resourceDomains: [] },
      prefersBorder: true,
    },
  });
});

test("an Apps client's result carries the call's answer as structuredContent, the embed without a resource_link", async () => {
  let res = await call(apps, "save_bookmark", { url: "https://go.dev", title: "Go" });
  assert.ok(!res.isError, JSON.stringify(res));
  const saved = res.structuredContent;
  assert.equal(saved.status, "done");
  assert.equal(saved.tool, "save_bookmark");
  assert.equal(saved.card, "markdown");
  assert.equal(saved.markdown, "Saved **[Go](https://go.dev)**");
  assert.deepEqual(saved, await status(saved.callId));
  assert.equal(res.content[0].text, saved.content);

  res = await call(apps, "show_bookmark", { id: "b1" });
  assert.equal(res.structuredContent.card, "embed");
  assert.match(res.structuredContent.embedUrl, /\/app\/bookmarks\/b1\/card\?t=/);
  assert.ok(!res.content.some((c) => c.type === "resource_link"), JSON.stringify(res.content));

  // A plain client gets today's result.
  res = await call(plain, "show_bookmark", { id: "b1" });
  assert.equal(res.structuredContent, undefined);
  assert.equal(res.content.filter((c) => c.type === "resource_link").length, 1, JSON.stringify(res.content));
});

test("a card shows in the view; its button, pressed through toolgate_card_answer, runs once", async () => {
  const res = await call(apps, "clear_bookmarks");
  assert.equal(res.isError ?? false, false, JSON.stringify(res));
  const card = res.structuredContent;
  assert.equal(card.status, "action_required");
  assert.match(card.card.title, /^Delete the only bookmark\?/);
  assert.deepEqual(card.card.elements.map((b) => b.id), ["delete", "keep"]);
  assert.equal(res.content.length, 1);
  assert.match(res.content[0].text, /waits for a person to answer the card "Delete the only bookmark\?/);
  const state = res._meta?.["toolgate/state"];
  assert.equal(typeof state, "string", JSON.stringify(res._meta));
  assert.ok(!res.content[0].text.includes(state), "the model's text does not carry the state");

  // The plain client is not offered the tool, whatever state it holds.
  await assert.rejects(call(plain, "toolgate_card_answer", { state, button: "delete" }), (e) => e instanceof McpError && /unknown tool/.test(e.message));

  const done = await call(apps, "toolgate_card_answer", { state, button: "delete" });
  assert.ok(!done.isError, JSON.stringify(done));
  assert.equal(done.structuredContent.status, "done");
  assert.equal(done.structuredContent.callId, card.callId);
  assert.equal(done.content[0].text, "Deleted the only bookmark.");
  assert.deepEqual(done.structuredContent, await status(card.callId));
  assert.equal((await call(apps, "list_bookmarks")).content[0].text, "No bookmarks.");

  // Once: pressed again, refused, and nothing more runs.
  const again = await call(apps, "toolgate_card_answer", { state, button: "delete" });
  assert.equal(again.isError, true);
  assert.match(again.content[0].text, /already used/);
});

test("toolgate_card_answer refuses a bad answer as an error result, and the state still answers once", async () => {
  assert.ok(!(await call(apps, "save_bookmark", { url: "https://pkg.go.dev", title: "Packages" })).isError);
  const res = await call(apps, "clear_bookmarks");
  const state = res._meta["toolgate/state"];
  for (const [args, want] of [
    [{ state, button: "delete", action: "skip" }, /either "button" or "action"/],
    [{ state }, /either "button" or "action"/],
    [{ state, action: "delete" }, /is not skip or cancel/],
    [{ state: state.slice(0, -2) + "AA", button: "delete" }, /request state/],
  ]) {
    const r = await call(apps, "toolgate_card_answer", args);
    assert.equal(r.isError, true, JSON.stringify(args));
    assert.match(r.content[0].text, want);
  }
  // Another caller's state is refused.
  const stranger = await apps.callTool({ name: "toolgate_card_answer", arguments: { state, button: "delete" }, _meta: { "toolgate/identity": { user: "u_2", install: "in_1" } } });
  assert.equal(stranger.isError, true);
  assert.match(stranger.content[0].text, /another caller/);
  assert.match((await call(apps, "list_bookmarks")).content[0].text, /Packages/, "nothing was deleted");

  const skipped = await call(apps, "toolgate_card_answer", { state, action: "skip" });
  assert.ok(!skipped.isError, JSON.stringify(skipped));
  assert.equal(skipped.structuredContent.content, "The user skipped this step.");
  assert.match((await call(apps, "list_bookmarks")).content[0].text, /Packages/);
});

// MCP tests: toolgate's /mcp endpoint with the official TypeScript SDK
// client, against a real toolgate and the bookmarks component, both built
// from this checkout. Run with `node --test` in this folder.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack } from "../stack.mjs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, McpError, LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

let stack, gatePort, appPort, client, transport;

const gate = () => `http://127.0.0.1:${gatePort}/toolgate`;

// Without a callers block, a loopback client names the identity in _meta.
const identity = { user: "u_1", install: "in_1" };
const meta = { "toolgate/identity": identity };

/** call runs tools/call with the identity in _meta. */
const call = (name, args = {}) => client.callTool({ name, arguments: args, _meta: meta });

/** text is the first content item's text, checked to be the one text item for the model. */
function modelText(res) {
  assert.equal(res.content[0].type, "text");
  assert.equal(res.content[0].annotations, undefined, "the model's text item has no audience");
  return res.content[0].text;
}

/** invoke calls a tool through the Tools API, for comparison. */
async function invoke(tool, input) {
  const r = await fetch(`${gate()}/tools/${tool}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ input, identity }),
  });
  assert.equal(r.status, 200, `invoke ${tool}`);
  return r.json();
}

// The tests run in order and share one client, session and bookmark store.

// The elicitation requests the client received, and how it answers the
// next ones (a queue; an empty one cancels).
const elicitations = [];
const answers = [];

before(async () => {
  stack = await startStack({ name: "mcp" });
  ({ gatePort, appPort } = stack);

  client = new Client(
    { name: "toolgate-mcp-test", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    elicitations.push(req.params);
    return answers.shift() ?? { action: "cancel" };
  });
  transport = new StreamableHTTPClientTransport(new URL(`${gate()}/mcp`));
  await client.connect(transport);
});

after(async () => {
  try {
    await transport?.terminateSession();
  } catch {
    // the session may be gone already
  }
  await client?.close();
  stack?.stop();
});

test("the client negotiates the SDK's latest protocol revision", () => {
  console.log(`negotiated protocol version: ${transport.protocolVersion}; server: ${JSON.stringify(client.getServerVersion())}`);
  assert.equal(transport.protocolVersion, LATEST_PROTOCOL_VERSION);
  assert.equal(transport.protocolVersion, "2025-11-25");
  assert.equal(client.getServerVersion()?.name, "toolgate");
  assert.ok(client.getServerCapabilities()?.tools, "the server offers tools");
  assert.ok(transport.sessionId, "a session for a client of this revision");
});

test("tools/list gives every tool with its schema, title and annotations", async () => {
  const { tools } = await client.listTools({ _meta: meta });
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(
    Object.keys(byName).sort(),
    ["clear_bookmarks", "delete_bookmark", "find_by_tag", "list_bookmarks", "open_on_device", "read_draft", "save_bookmark", "share_bookmark", "show_bookmark", "whoami"],
  );

  const save = byName.save_bookmark;
  assert.equal(save.title, "Save bookmark");
  assert.match(save.description, /^Save a web page as a bookmark/);
  assert.equal(save.inputSchema.type, "object");
  assert.deepEqual(save.inputSchema.required, ["url", "title"]);
  // As tools.ts declares them, .describe() texts included.
  assert.deepEqual(save.inputSchema.properties.url, { type: "string", format: "uri", description: "The page's absolute URL." });
  assert.deepEqual(save.inputSchema.properties.title, { type: "string", minLength: 1, description: "A short title for the bookmark." });
  assert.equal(save.inputSchema.additionalProperties, false);

  assert.equal(byName.delete_bookmark.annotations?.destructiveHint, true);
  assert.equal(byName.clear_bookmarks.annotations?.destructiveHint, true);
  assert.equal(byName.list_bookmarks.annotations?.readOnlyHint, true);
});

test("a call that succeeds answers its content for the model and its markdown for the user", async () => {
  const res = await call("save_bookmark", { url: "https://go.dev", title: "Go" });
  assert.ok(!res.isError, JSON.stringify(res));
  assert.equal(modelText(res), "Saved bookmark b1: Go (https://go.dev)");
  assert.equal(res.content.length, 2, JSON.stringify(res.content));
  assert.deepEqual(res.content[1], {
    type: "text",
    text: "Saved **[Go](https://go.dev)**",
    annotations: { audience: ["user"] },
  });
});

test("invalid input is an isError result naming the missing property", async () => {
  const res = await call("save_bookmark", { url: "https://go.dev" });
  assert.equal(res.isError, true, JSON.stringify(res));
  assert.match(modelText(res), /missing property 'title'/);
  // Nothing was saved.
  assert.equal(modelText(await call("list_bookmarks")), "b1 Go https://go.dev\n");
});

test("an unknown tool is a protocol error", async () => {
  await assert.rejects(call("no_such_tool"), (e) => e instanceof McpError);
});

test("an embed answers a resource_link to the embedUrl", async () => {
  const res = await call("show_bookmark", { id: "b1" });
  assert.ok(!res.isError, JSON.stringify(res));
  assert.equal(modelText(res), "b1: Go (https://go.dev)");
  const links = res.content.filter((c) => c.type === "resource_link");
  assert.equal(links.length, 1, JSON.stringify(res.content));
  // The card page's URL carries a token the component signed for b1.
  const embedUrl = links[0].uri;
  assert.ok(embedUrl.startsWith(`http://127.0.0.1:${gatePort}/app/bookmarks/b1/card?t=`), embedUrl);
  assert.equal((await fetch(embedUrl)).status, 200);
  // The same as the Tools API's embedUrl.
  assert.equal((await invoke("show_bookmark", { id: "b1" })).embedUrl, embedUrl);
});

test("a card becomes an elicitation; accept presses the chosen button", async () => {
  assert.ok(!(await call("save_bookmark", { url: "https://pkg.go.dev", title: "Packages" })).isError);
  elicitations.length = 0;
  answers.push({ action: "accept", content: { button: "delete" } });
  const res = await call("clear_bookmarks");

  assert.equal(elicitations.length, 1, "one elicitation during the call");
  const form = elicitations[0];
  assert.ok(form.mode === undefined || form.mode === "form", `mode ${form.mode}`);
  assert.match(form.message, /^Delete all 2 bookmarks\?/);
  const schema = form.requestedSchema;
  assert.equal(schema.type, "object");
  assert.deepEqual(schema.required, ["button"]);
  assert.equal(schema.properties.button.type, "string");
  assert.deepEqual(schema.properties.button.oneOf, [
    { const: "delete", title: "Delete all" },
    { const: "keep", title: "Keep them" },
  ]);

  assert.ok(!res.isError, JSON.stringify(res));
  assert.equal(modelText(res), "Deleted all 2 bookmarks.");
  assert.equal(modelText(await call("list_bookmarks")), "No bookmarks.");
});

test("a card declined is skipped", async () => {
  assert.ok(!(await call("save_bookmark", { url: "https://go.dev/blog", title: "Blog" })).isError);
  elicitations.length = 0;
  answers.push({ action: "decline" });
  const res = await call("clear_bookmarks");
  assert.equal(elicitations.length, 1);
  assert.match(elicitations[0].message, /^Delete the only bookmark\?/);
  assert.ok(!res.isError, JSON.stringify(res));
  assert.equal(modelText(res), "The user skipped this step.");
  // Nothing was deleted.
  assert.match(modelText(await call("list_bookmarks")), / Blog https:\/\/go\.dev\/blog\n$/);
});

test("a card answered with a button that needs no round trip gives its input", async () => {
  elicitations.length = 0;
  answers.push({ action: "accept", content: { button: "keep" } });
  const res = await call("clear_bookmarks");
  assert.equal(elicitations.length, 1);
  assert.ok(!res.isError, JSON.stringify(res));
  assert.equal(modelText(res), "Kept all bookmarks.");
  assert.match(modelText(await call("list_bookmarks")), / Blog /);
});

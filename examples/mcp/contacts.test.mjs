// Tests of contacts-server.mjs, the example upstream MCP server, with the
// official TypeScript SDK client over both of its transports: stdio (the
// client spawns the server) and Streamable HTTP (the test spawns it with
// --http 0). No toolgate is involved. Run with `node --test` in this folder.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { generateKeyPairSync, sign } from "node:crypto";
import { createServer, request } from "node:http";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const serverPath = fileURLToPath(new URL("./contacts-server.mjs", import.meta.url));

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** serverEnv is this process's environment without the server's own variables, plus env. */
function serverEnv(env = {}) {
  const out = { ...process.env };
  delete out.TOOLGATE_JWKS_URL;
  delete out.TOOLGATE_AUDIENCE;
  return { ...out, ...env };
}

/** within rejects when promise has not settled after ms, naming what it waited for. */
function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms}ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** isRunning reports whether a process with pid exists. */
function isRunning(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** newClient makes a client that records the tools/list_changed notifications it gets. */
function newClient() {
  const client = new Client({ name: "contacts-test", version: "1.0.0" });
  const changed = { count: 0 };
  changed.next = new Promise((resolve) => {
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      changed.count++;
      resolve();
    });
  });
  return { client, changed };
}

/**
 * connectStdio spawns the server through the SDK's StdioClientTransport and
 * connects to it; the test's end closes the client and checks that the child
 * is gone.
 */
async function connectStdio(t, env) {
  const { client, changed } = newClient();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [serverPath],
    env: serverEnv(env),
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr.on("data", (b) => (stderr += b));
  await client.connect(transport);
  const pid = transport.pid;
  t.after(async () => {
    await client.close();
    assert.equal(isRunning(pid), false, `the stdio server (pid ${pid}) is still running`);
  });
  // Over stdio, server-initiated messages need no stream of their own.
  return { client, changed, streamOpen: Promise.resolve(), stderr: () => stderr };
}

/**
 * startHttp spawns `node contacts-server.mjs --http 0` and reads its port
 * from the "listening on" line on stderr. The test's end stops it with
 * SIGTERM and expects a clean exit.
 */
async function startHttp(t, env) {
  const child = spawn(process.execPath, [serverPath, "--http", "0"], {
    env: serverEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b) => (stdout += b));
  const exited = once(child, "exit");
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const [code, signal] = await within(exited, 5000, "the server to exit").catch((err) => {
        child.kill("SIGKILL");
        throw err;
      });
      assert.deepEqual({ code, signal }, { code: 0, signal: null }, `the server's exit after SIGTERM; stderr:\n${stderr}`);
    }
  });
  const url = await within(
    new Promise((resolve, reject) => {
      child.stderr.on("data", (b) => {
        stderr += b;
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(stderr);
        if (m) resolve(m[1]);
      });
      child.once("exit", (code) => reject(new Error(`the server exited with ${code} before listening:\n${stderr}`)));
    }),
    10000,
    "the server to listen",
  );
  return { url, child, exited, stdout: () => stdout, stderr: () => stderr };
}

/**
 * connectHttp connects a client to url. Its requests carry
 * `Authorization: <session.authorization>` when that is set, and streamOpen
 * settles once the client's GET stream, which carries the notifications the
 * server starts on its own, is open: one sent before would be lost.
 */
async function connectHttp(t, url, authorization) {
  const { client, changed } = newClient();
  const session = { authorization };
  let opened;
  const streamOpen = new Promise((resolve) => (opened = resolve));
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    fetch: async (input, init = {}) => {
      const headers = new Headers(init.headers);
      if (session.authorization) headers.set("Authorization", session.authorization);
      const res = await fetch(input, { ...init, headers });
      if ((init.method ?? "GET") === "GET" && res.ok) opened();
      return res;
    },
  });
  await client.connect(transport);
  t.after(() => client.close());
  return { client, changed, streamOpen, session, transport };
}

/** text is the text of a result's only content item. */
function text(res) {
  assert.equal(res.content.length, 1, JSON.stringify(res.content));
  assert.equal(res.content[0].type, "text");
  return res.content[0].text;
}

/** toolNames lists the server's tools by name, sorted. */
async function toolNames(client) {
  const { tools } = await client.listTools();
  return tools.map((tool) => tool.name).sort();
}

const TOOLS = ["contact_card", "create_contact", "delete_contact", "enable_export", "search_contacts", "whoami"];

const ada = { id: "c1", name: "Ada Lovelace", email: "ada@example.com" };
const alan = { id: "c2", name: "Alan Turing", email: "alan@example.com" };

// ---- Both transports ------------------------------------------------------

const transports = {
  stdio: (t) => connectStdio(t),
  http: async (t) => connectHttp(t, (await startHttp(t)).url),
};

for (const [kind, connect] of Object.entries(transports)) {
  describe(`over ${kind}`, () => {
    test("tools/list gives every tool with its title, schemas and annotations", async (t) => {
      const { client } = await connect(t);
      const { tools } = await client.listTools();
      const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
      assert.deepEqual(Object.keys(byName).sort(), TOOLS);
      for (const tool of tools) {
        assert.ok(tool.title, `${tool.name} has a title`);
        assert.ok(tool.description, `${tool.name} has a description`);
        assert.equal(tool.inputSchema.type, "object", tool.name);
      }

      const search = byName.search_contacts;
      assert.equal(search.title, "Search contacts");
      assert.deepEqual(search.inputSchema.required, ["query"]);
      assert.equal(search.annotations.readOnlyHint, true);
      assert.deepEqual(search.outputSchema.required, ["contacts"]);
      assert.deepEqual(search.outputSchema.properties.contacts.items.required, ["id", "name", "email"]);

      const create = byName.create_contact;
      assert.deepEqual(create.inputSchema.required, ["name", "email"]);
      assert.equal(create.inputSchema.properties.name.minLength, 1);
      assert.equal(create.inputSchema.properties.email.format, "email");
      assert.equal(create.annotations.readOnlyHint, false);

      assert.equal(byName.delete_contact.annotations.destructiveHint, true);
      assert.deepEqual(Object.keys(byName.whoami.inputSchema.properties ?? {}), []);
    });

    test("search_contacts answers text for the model and structuredContent", async (t) => {
      const { client } = await connect(t);
      const res = await client.callTool({ name: "search_contacts", arguments: { query: "ADA" } });
      assert.ok(!res.isError, JSON.stringify(res));
      assert.deepEqual(res.structuredContent, { contacts: [ada] });
      assert.equal(text(res), "c1 Ada Lovelace <ada@example.com>");

      const all = await client.callTool({ name: "search_contacts", arguments: { query: "example.com" } });
      assert.deepEqual(all.structuredContent, { contacts: [ada, alan] });

      const none = await client.callTool({ name: "search_contacts", arguments: { query: "grace" } });
      assert.ok(!none.isError);
      assert.deepEqual(none.structuredContent, { contacts: [] });
      assert.equal(text(none), 'No contact matches "grace".');
    });

    test("create_contact counts its runs; invalid input does not run it", async (t) => {
      const { client } = await connect(t);
      const create = (args) => client.callTool({ name: "create_contact", arguments: args });

      const first = await create({ name: "Grace Hopper", email: "grace@example.com" });
      assert.ok(!first.isError, JSON.stringify(first));
      assert.equal(text(first), "Created contact c3: Grace Hopper <grace@example.com> (run 1)");
      const second = await create({ name: "Grace Hopper", email: "grace@example.com" });
      assert.equal(text(second), "Created contact c4: Grace Hopper <grace@example.com> (run 2)");

      // The SDK checks the input against the schema before the tool runs.
      const bad = await create({ name: "", email: "not an address" });
      assert.equal(bad.isError, true, JSON.stringify(bad));
      assert.match(text(bad), /Input validation error/);
      const third = await create({ name: "Katherine Johnson", email: "katherine@example.com" });
      assert.match(text(third), /\(run 3\)$/);

      const found = await client.callTool({ name: "search_contacts", arguments: { query: "grace" } });
      assert.deepEqual(found.structuredContent.contacts.map((c) => c.id), ["c3", "c4"]);
    });

    test("delete_contact deletes once, then says the id is unknown", async (t) => {
      const { client } = await connect(t);
      const del = () => client.callTool({ name: "delete_contact", arguments: { id: "c2" } });
      const res = await del();
      assert.ok(!res.isError, JSON.stringify(res));
      assert.equal(text(res), "Deleted contact c2 Alan Turing <alan@example.com>.");
      const gone = await client.callTool({ name: "search_contacts", arguments: { query: "" } });
      assert.deepEqual(gone.structuredContent, { contacts: [ada] });

      const again = await del();
      assert.equal(again.isError, true);
      assert.equal(text(again), "No contact has the id c2.");
    });

    test("enable_export adds export_contacts and says that the tool list changed", async (t) => {
      const { client, changed, streamOpen } = await connect(t);
      await within(streamOpen, 5000, "the client's GET stream");
      assert.deepEqual(await toolNames(client), TOOLS);

      const res = await client.callTool({ name: "enable_export", arguments: {} });
      assert.ok(!res.isError, JSON.stringify(res));
      assert.equal(text(res), "Enabled export_contacts.");
      await within(changed.next, 5000, "notifications/tools/list_changed");
      assert.equal(changed.count, 1);
      assert.deepEqual(await toolNames(client), [...TOOLS, "export_contacts"].sort());

      const csv = await client.callTool({ name: "export_contacts", arguments: {} });
      assert.equal(text(csv), "id,name,email\nc1,Ada Lovelace,ada@example.com\nc2,Alan Turing,alan@example.com");

      // A second time is no error and changes nothing.
      const again = await client.callTool({ name: "enable_export", arguments: {} });
      assert.ok(!again.isError, JSON.stringify(again));
      assert.equal(text(again), "export_contacts was already enabled.");
      assert.equal((await toolNames(client)).filter((n) => n === "export_contacts").length, 1);
    });

    test("contact_card answers text, an image and a resource_link", async (t) => {
      const { client } = await connect(t);
      const res = await client.callTool({ name: "contact_card", arguments: { id: "c1" } });
      assert.ok(!res.isError, JSON.stringify(res));
      assert.deepEqual(res.content.map((c) => c.type), ["text", "image", "resource_link"]);
      const [line, image, link] = res.content;
      assert.equal(line.text, "c1 Ada Lovelace <ada@example.com>");
      assert.equal(image.mimeType, "image/png");
      assert.deepEqual(Buffer.from(image.data, "base64").subarray(0, 8), PNG_SIGNATURE);
      assert.equal(link.uri, "contacts://c1");
      assert.equal(link.name, "c1");

      // The link leads to a resource the server serves.
      const { contents } = await client.readResource({ uri: link.uri });
      assert.deepEqual(JSON.parse(contents[0].text), ada);

      const missing = await client.callTool({ name: "contact_card", arguments: { id: "c9" } });
      assert.equal(missing.isError, true);
      assert.equal(text(missing), "No contact has the id c9.");
    });
  });
}

// ---- whoami ---------------------------------------------------------------

/** jwt signs claims as a compact JWT with an Ed25519 private key (EdDSA). */
function jwt(privateKey, kid, claims, header = {}) {
  const part = (obj) => Buffer.from(JSON.stringify(obj)).toString("base64url");
  const input = `${part({ alg: "EdDSA", typ: "JWT", kid, ...header })}.${part(claims)}`;
  return `${input}.${sign(null, Buffer.from(input), privateKey).toString("base64url")}`;
}

const now = () => Math.floor(Date.now() / 1000);
const claims = (extra = {}) => ({ iss: "toolgate", sub: "u_1", install: "in_1", aud: "contacts", iat: now(), exp: now() + 300, ...extra });

test("whoami over stdio says there is no header", async (t) => {
  const { client } = await connectStdio(t);
  const res = await client.callTool({ name: "whoami", arguments: {} });
  assert.equal(res.isError, false, JSON.stringify(res));
  assert.equal(text(res), "no Authorization header (stdio)");
});

test("whoami over HTTP without a JWKS decodes the token, verified=false", async (t) => {
  const { url } = await startHttp(t);
  // Made by hand, with an empty signature: without a JWKS nothing checks it.
  const part = (obj) => Buffer.from(JSON.stringify(obj)).toString("base64url");
  const token = `${part({ alg: "none", typ: "JWT" })}.${part(claims({ sub: "u_7", install: "in_9" }))}.`;
  const { client, session } = await connectHttp(t, url, `Bearer ${token}`);
  const res = await client.callTool({ name: "whoami", arguments: {} });
  assert.equal(res.isError, false, JSON.stringify(res));
  assert.equal(text(res), "user=u_7 install=in_9 aud=contacts verified=false");

  session.authorization = "Bearer not-a-jwt";
  const bad = await client.callTool({ name: "whoami", arguments: {} });
  assert.equal(bad.isError, true);
  assert.match(text(bad), /not a JWT/);

  session.authorization = undefined;
  const none = await client.callTool({ name: "whoami", arguments: {} });
  assert.equal(none.isError, true);
  assert.equal(text(none), "no Authorization: Bearer header");
});

test("whoami with TOOLGATE_JWKS_URL verifies the token's signature, exp and aud", async (t) => {
  const good = generateKeyPairSync("ed25519");
  const other = generateKeyPairSync("ed25519");
  const jwks = {
    keys: [{ ...good.publicKey.export({ format: "jwk" }), kid: "k1", alg: "EdDSA", use: "sig" }],
  };
  let fetches = 0;
  const jwksServer = createServer((req, res) => {
    fetches++;
    if (req.url !== "/.well-known/jwks.json") return res.writeHead(404).end();
    res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(jwks));
  });
  jwksServer.listen(0, "127.0.0.1");
  await once(jwksServer, "listening");
  t.after(() => {
    jwksServer.closeAllConnections();
    jwksServer.close();
  });
  const jwksUrl = `http://127.0.0.1:${jwksServer.address().port}/.well-known/jwks.json`;

  const { url } = await startHttp(t, { TOOLGATE_JWKS_URL: jwksUrl });
  const { client, session } = await connectHttp(t, url);
  const whoami = async (token) => {
    session.authorization = `Bearer ${token}`;
    return client.callTool({ name: "whoami", arguments: {} });
  };

  const ok = await whoami(jwt(good.privateKey, "k1", claims()));
  assert.equal(ok.isError, false, JSON.stringify(ok));
  assert.equal(text(ok), "user=u_1 install=in_1 aud=contacts verified=true");
  assert.ok(fetches >= 1, "the server fetched the JWKS");

  const refused = [
    ["another key, the same kid", jwt(other.privateKey, "k1", claims()), /the signature does not verify/],
    ["an unknown kid", jwt(good.privateKey, "k2", claims()), /no Ed25519 key with kid "k2"/],
    ["expired", jwt(good.privateKey, "k1", claims({ exp: now() - 60 })), /expired/],
    ["no exp", jwt(good.privateKey, "k1", claims({ exp: undefined })), /no exp/],
    ["another audience", jwt(good.privateKey, "k1", claims({ aud: "notes" })), /aud is "notes", want "contacts"/],
    ["alg none", jwt(good.privateKey, "k1", claims(), { alg: "none" }), /alg is "none"/],
  ];
  for (const [what, token, why] of refused) {
    const res = await whoami(token);
    assert.equal(res.isError, true, `${what}: ${JSON.stringify(res)}`);
    assert.match(text(res), why, what);
  }
});

test("TOOLGATE_AUDIENCE sets the audience whoami expects", async (t) => {
  const key = generateKeyPairSync("ed25519");
  const jwksServer = createServer((req, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ keys: [{ ...key.publicKey.export({ format: "jwk" }), kid: "k1" }] }));
  });
  jwksServer.listen(0, "127.0.0.1");
  await once(jwksServer, "listening");
  t.after(() => {
    jwksServer.closeAllConnections();
    jwksServer.close();
  });
  const { url } = await startHttp(t, {
    TOOLGATE_JWKS_URL: `http://127.0.0.1:${jwksServer.address().port}/jwks.json`,
    TOOLGATE_AUDIENCE: "crm",
  });
  const { client, session } = await connectHttp(t, url, `Bearer ${jwt(key.privateKey, "k1", claims({ aud: ["crm", "other"] }))}`);
  const ok = await client.callTool({ name: "whoami", arguments: {} });
  assert.equal(text(ok), "user=u_1 install=in_1 aud=crm,other verified=true");

  session.authorization = `Bearer ${jwt(key.privateKey, "k1", claims())}`;
  const wrong = await client.callTool({ name: "whoami", arguments: {} });
  assert.equal(wrong.isError, true);
  assert.match(text(wrong), /want "crm"/);
});

// ---- HTTP only ------------------------------------------------------------

test("over HTTP, enable_export in one session reaches every session", async (t) => {
  const { url } = await startHttp(t);
  const a = await connectHttp(t, url);
  const b = await connectHttp(t, url);
  await within(Promise.all([a.streamOpen, b.streamOpen]), 5000, "both GET streams");

  assert.equal(text(await a.client.callTool({ name: "enable_export", arguments: {} })), "Enabled export_contacts.");
  await within(Promise.all([a.changed.next, b.changed.next]), 5000, "list_changed in both sessions");
  assert.ok((await toolNames(b.client)).includes("export_contacts"));

  // A session that starts later has the tool from the start.
  const c = await connectHttp(t, url);
  assert.ok((await toolNames(c.client)).includes("export_contacts"));
});

test("over HTTP, the server keeps stdout empty, checks Host and the session id", async (t) => {
  const server = await startHttp(t);
  const { client } = await connectHttp(t, server.url);
  assert.ok(!(await client.callTool({ name: "search_contacts", arguments: { query: "" } })).isError);

  /** post sends an initialize request with the given headers, answering the status. */
  const post = (headers) =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
      });
      const req = request(server.url, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers },
      });
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      req.on("error", reject);
      req.end(body);
    });
  const port = new URL(server.url).port;
  assert.equal(await post({}), 200);
  assert.equal(await post({ Host: `localhost:${port}` }), 200);
  assert.equal(await post({ Host: `attacker.example:${port}` }), 403);
  assert.equal(await post({ "Mcp-Session-Id": "no-such-session" }), 404);

  assert.equal(server.stdout(), "", "nothing on stdout");
  assert.match(server.stderr(), /listening on http:\/\/127\.0\.0\.1:\d+\/mcp/);
});

test("over HTTP, SIGTERM ends the server with status 0 while a client is connected", async (t) => {
  const server = await startHttp(t);
  const { streamOpen } = await connectHttp(t, server.url);
  await within(streamOpen, 5000, "the client's GET stream");
  server.child.kill("SIGTERM");
  const [code, signal] = await within(server.exited, 5000, "the server to exit");
  assert.deepEqual({ code, signal }, { code: 0, signal: null });
});

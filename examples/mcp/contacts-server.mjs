#!/usr/bin/env node
// contacts-server.mjs: a tiny in-memory contacts CRM as an MCP server, written
// with the official TypeScript MCP SDK. toolgate can put it behind itself as an
// upstream MCP server; on its own it is an example of a small MCP server.
//
// Run it from examples/mcp, after `npm ci` there:
//
//	node contacts-server.mjs              # stdio: the MCP protocol on stdin/stdout
//	node contacts-server.mjs --http 9010  # Streamable HTTP at http://127.0.0.1:9010/mcp
//
// Over HTTP it keeps a session per client (the Mcp-Session-Id header), so that
// notifications the server starts on its own, such as
// notifications/tools/list_changed, reach each client over its GET stream.
// `--http 0` takes a free port. Either way the server logs to stderr only
// (over stdio, stdout is the protocol), says `listening on
// http://127.0.0.1:N/mcp` once the HTTP port is bound, and exits with status 0
// on SIGTERM or SIGINT.
//
// Tools: search_contacts, create_contact, delete_contact, contact_card, whoami
// and enable_export, which adds a seventh tool, export_contacts, while clients
// are connected. The store starts with two contacts and lives as long as the
// process; every session sees the same one.
//
// whoami reads the caller's `Authorization: Bearer <JWT>` header (HTTP only).
// With TOOLGATE_JWKS_URL set it verifies the token: an EdDSA signature by an
// Ed25519 key of that JWKS named by the token's kid, an exp in the future, and
// an aud equal to TOOLGATE_AUDIENCE (default "contacts"). Without it, it
// decodes the token unverified and says so.
import { randomUUID, createPublicKey, verify } from "node:crypto";
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const JWKS_URL = process.env.TOOLGATE_JWKS_URL;
const AUDIENCE = process.env.TOOLGATE_AUDIENCE || "contacts";

/** log writes to stderr: over stdio, stdout carries the protocol. */
const log = (...args) => console.error("contacts:", ...args);

// ---- The store ------------------------------------------------------------

/** contacts by id, in the order they were created. */
const contacts = new Map([
  ["c1", { id: "c1", name: "Ada Lovelace", email: "ada@example.com" }],
  ["c2", { id: "c2", name: "Alan Turing", email: "alan@example.com" }],
]);
let nextId = 3;

// How many times create_contact ran, in all sessions: its answers say it, so
// a test sees whether a call reached the server once or twice.
let createRuns = 0;

// Whether enable_export ran; sessions that start later get export_contacts too.
let exportEnabled = false;

/** servers are the connected McpServers: one over stdio, one per HTTP session. */
const servers = new Set();

/** line is how a contact reads in a text answer. */
const line = (c) => `${c.id} ${c.name} <${c.email}>`;

/** text is a tool result of one text item; isError marks a failure the model should read. */
const text = (s, isError = false) => ({ content: [{ type: "text", text: s }], isError });

// A 1×1 PNG, so that contact_card has an image to answer.
const PNG_1x1 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

// ---- The tools ------------------------------------------------------------

const contactShape = { id: z.string(), name: z.string(), email: z.string() };

/** newServer makes an McpServer with every tool, for one client. */
function newServer() {
  const server = new McpServer({ name: "contacts", version: "1.0.0" });

  server.registerTool(
    "search_contacts",
    {
      title: "Search contacts",
      description: "Find contacts whose name or email contains the query (case-insensitive). An empty query lists every contact.",
      inputSchema: { query: z.string().describe("Part of a name or an email address.") },
      outputSchema: { contacts: z.array(z.object(contactShape)) },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ query }) => {
      const q = query.toLowerCase();
      const found = [...contacts.values()].filter(
        (c) => c.name.toLowerCase().includes(q) || c.email.toLowerCase().includes(q),
      );
      const summary = found.length ? found.map(line).join("\n") : `No contact matches "${query}".`;
      // The text is for a model; structuredContent, checked against
      // outputSchema by the SDK, is for a program.
      return { content: [{ type: "text", text: summary }], structuredContent: { contacts: found } };
    },
  );

  server.registerTool(
    "create_contact",
    {
      title: "Create contact",
      description: "Add a contact with a name and an email address. The answer counts the runs of this tool since the server started.",
      inputSchema: {
        name: z.string().min(1).describe("The contact's full name."),
        email: z.email().describe("The contact's email address."),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ name, email }) => {
      createRuns++;
      const c = { id: `c${nextId++}`, name, email };
      contacts.set(c.id, c);
      return text(`Created contact ${c.id}: ${c.name} <${c.email}> (run ${createRuns})`);
    },
  );

  server.registerTool(
    "delete_contact",
    {
      title: "Delete contact",
      description: "Delete a contact by id. It cannot be undone.",
      inputSchema: { id: z.string().describe("The contact's id, as search_contacts gives it.") },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async ({ id }) => {
      const c = contacts.get(id);
      if (!c) return text(`No contact has the id ${id}.`, true);
      contacts.delete(id);
      return text(`Deleted contact ${line(c)}.`);
    },
  );

  server.registerTool(
    "contact_card",
    {
      title: "Contact card",
      description: "A contact's card: a line of text, a picture and a link to the contact as a resource.",
      inputSchema: { id: z.string().describe("The contact's id.") },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ id }) => {
      const c = contacts.get(id);
      if (!c) return text(`No contact has the id ${id}.`, true);
      return {
        content: [
          { type: "text", text: line(c) },
          { type: "image", data: PNG_1x1, mimeType: "image/png" },
          { type: "resource_link", uri: `contacts://${c.id}`, name: c.id, title: c.name, mimeType: "application/json" },
        ],
      };
    },
  );

  // The resource contact_card links to.
  server.registerResource(
    "contact",
    new ResourceTemplate("contacts://{id}", { list: undefined }),
    { title: "Contact", description: "One contact as JSON.", mimeType: "application/json" },
    async (uri, { id }) => {
      const c = contacts.get(id);
      if (!c) throw new Error(`no contact has the id ${id}`);
      return { contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify(c) }] };
    },
  );

  server.registerTool(
    "whoami",
    {
      title: "Who am I",
      description: "Say who the caller is, from the identity token in the request's Authorization header.",
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    // Without an inputSchema the SDK passes only the request's extra data,
    // whose requestInfo holds the HTTP headers (none over stdio).
    async (extra) => whoami(extra.requestInfo?.headers),
  );

  server.registerTool(
    "enable_export",
    {
      title: "Enable export",
      description: "Add the export_contacts tool. Connected clients are told that the tool list changed.",
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async () => {
      if (exportEnabled) return text("export_contacts was already enabled.");
      exportEnabled = true;
      // Registering a tool on a connected McpServer makes the SDK send
      // notifications/tools/list_changed to its client.
      for (const s of servers) registerExport(s);
      return text("Enabled export_contacts.");
    },
  );

  if (exportEnabled) registerExport(server);
  return server;
}

/** registerExport adds export_contacts to server. */
function registerExport(server) {
  server.registerTool(
    "export_contacts",
    {
      title: "Export contacts",
      description: "Every contact as CSV (id,name,email).",
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async () => text(["id,name,email", ...[...contacts.values()].map((c) => `${c.id},${c.name},${c.email}`)].join("\n")),
  );
}

// ---- whoami: the identity token -------------------------------------------

/** whoami answers who the bearer token in headers names; headers is undefined over stdio. */
async function whoami(headers) {
  if (!headers) return text("no Authorization header (stdio)");
  const m = /^Bearer +(\S+)$/i.exec(headers.authorization ?? "");
  if (!m) return text("no Authorization: Bearer header", true);
  let claims;
  try {
    claims = JWKS_URL ? await verifyToken(m[1]) : parseToken(m[1]).claims;
  } catch (err) {
    return text(`the token was not accepted: ${err.message}`, true);
  }
  const aud = Array.isArray(claims.aud) ? claims.aud.join(",") : claims.aud;
  return text(`user=${claims.sub} install=${claims.install} aud=${aud} verified=${Boolean(JWKS_URL)}`);
}

/** parseToken splits a compact JWT and decodes its header and claims, verifying nothing. */
function parseToken(token) {
  const parts = token.split(".");
  if (parts.length !== 3) throw new Error("not a JWT: want three parts separated by dots");
  const [header, claims, signature] = parts;
  const decode = (part, what) => {
    try {
      return JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
    } catch {
      throw new Error(`the ${what} is not base64url JSON`);
    }
  };
  return {
    header: decode(header, "header"),
    claims: decode(claims, "claims"),
    signingInput: Buffer.from(`${header}.${claims}`),
    signature: Buffer.from(signature, "base64url"),
  };
}

/** verifyToken checks a JWT's signature against the JWKS, then its exp and aud, and returns its claims. */
async function verifyToken(token) {
  const { header, claims, signingInput, signature } = parseToken(token);
  // The algorithm is fixed here, never taken from the token: a token that
  // says "none" or "HS256" is refused before any key is looked at.
  if (header.alg !== "EdDSA") throw new Error(`alg is ${JSON.stringify(header.alg)}, want "EdDSA"`);
  const jwks = await fetchJwks();
  const jwk = jwks.keys?.find((k) => k.kid === header.kid && k.kty === "OKP" && k.crv === "Ed25519");
  if (!jwk) throw new Error(`the JWKS has no Ed25519 key with kid ${JSON.stringify(header.kid)}`);
  const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, format: "jwk" });
  // Ed25519 hashes the input itself: node:crypto wants no digest name.
  if (!verify(null, signingInput, key, signature)) throw new Error("the signature does not verify");

  const now = Math.floor(Date.now() / 1000);
  if (typeof claims.exp !== "number") throw new Error("the token has no exp");
  if (claims.exp <= now) throw new Error(`the token expired ${now - claims.exp}s ago`);
  if (typeof claims.nbf === "number" && claims.nbf > now) throw new Error("the token is not valid yet (nbf)");
  const auds = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!auds.includes(AUDIENCE)) throw new Error(`aud is ${JSON.stringify(claims.aud)}, want ${JSON.stringify(AUDIENCE)}`);
  return claims;
}

/**
 * fetchJwks gets the key set on every call, which keeps the example short; a
 * server with traffic would cache it and fetch again on an unknown kid.
 */
async function fetchJwks() {
  const res = await fetch(JWKS_URL, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`fetching the JWKS: HTTP ${res.status}`);
  return res.json();
}

// ---- Transports -----------------------------------------------------------

/** connect connects a new McpServer to transport and keeps it in servers until it closes. */
async function connect(transport) {
  const server = newServer();
  server.server.onclose = () => servers.delete(server);
  servers.add(server);
  await server.connect(transport);
}

/** serveStdio speaks MCP on stdin and stdout. */
async function serveStdio() {
  await connect(new StdioServerTransport());
  log("serving MCP on stdio");
}

/** serveHttp serves Streamable HTTP on 127.0.0.1:port at /mcp and returns the bound server. */
async function serveHttp(port) {
  /** transports by session id */
  const sessions = new Map();
  let allowedHosts = new Set();

  const httpServer = createServer(async (req, res) => {
    if (new URL(req.url, "http://127.0.0.1").pathname !== "/mcp") {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("not found: the MCP endpoint is /mcp\n");
      return;
    }
    // A web page the user visits can make the browser send requests to
    // 127.0.0.1 under a name of its own (DNS rebinding); such a request
    // carries that name in Host.
    if (!allowedHosts.has(req.headers.host)) {
      res.writeHead(403, { "Content-Type": "text/plain" }).end("forbidden: unexpected Host header\n");
      return;
    }

    const sessionId = req.headers["mcp-session-id"];
    let transport = sessions.get(sessionId);
    if (sessionId && !transport) {
      // The client starts a new session when it gets a 404.
      res.writeHead(404, { "Content-Type": "application/json" }).end(
        JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }),
      );
      return;
    }
    const fresh = !transport;
    if (fresh) {
      // A request without a session must be an initialize request; the
      // transport answers 400 to anything else, and no session is made.
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => sessions.delete(transport.sessionId);
      await connect(transport);
    }
    try {
      await transport.handleRequest(req, res);
    } catch (err) {
      log("handling a request:", err);
      if (!res.headersSent) res.writeHead(500).end();
    }
    if (fresh && !transport.sessionId) await transport.close();
  });

  await new Promise((resolve, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(port, "127.0.0.1", resolve);
  });
  const bound = httpServer.address().port;
  allowedHosts = new Set([`127.0.0.1:${bound}`, `localhost:${bound}`]);
  log(`listening on http://127.0.0.1:${bound}/mcp`);
  return httpServer;
}

// ---- Main -----------------------------------------------------------------

const { values: flags } = parseArgs({ options: { http: { type: "string" } } });

let httpServer;
if (flags.http === undefined) {
  await serveStdio();
} else {
  const port = Number(flags.http);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    log(`--http wants a port number (0 for any free port), not ${JSON.stringify(flags.http)}`);
    process.exit(2);
  }
  try {
    httpServer = await serveHttp(port);
  } catch (err) {
    log(`cannot listen on 127.0.0.1:${port}: ${err.message}`);
    process.exit(1);
  }
}

/** shutdown closes every session (ending its streams) and the listener, then exits. */
async function shutdown(signal) {
  log(`${signal}: shutting down`);
  await Promise.allSettled([...servers].map((s) => s.close()));
  httpServer?.close();
  httpServer?.closeAllConnections();
  process.exit(0);
}
process.once("SIGTERM", shutdown);
process.once("SIGINT", shutdown);

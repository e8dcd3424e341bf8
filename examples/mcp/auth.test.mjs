// MCP authorization with the official TypeScript SDK client: toolgate as
// an OAuth resource server (callers with an authorization_server), found
// by the SDK's own discovery from /mcp's 401, and the local identity of a
// loopback-mode gateway (mcp { identity }). Real toolgate and bookmarks
// builds from this checkout; the authorization server is a small one here.
// Run with `node --test` in this folder.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { createServer } from "node:http";
import { startStack } from "../stack.mjs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  UnauthorizedError,
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
} from "@modelcontextprotocol/sdk/client/auth.js";

// The authorization server signs HS256 access tokens with the secret
// toolgate's callers verify. It issues them for the audience toolgate
// accepts, whatever resource is asked for (as servers that map a resource
// indicator to an API's audience do); tokenAud overrides it.
const secret = "as-secret-0123456789-abcdefghij-klmnop";
let tokenAud = "toolgate";

const b64 = (v) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");

/** jwt signs claims HS256 under the secret. */
function jwt(claims) {
  const now = Math.floor(Date.now() / 1000);
  const body = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ iss: asURL, iat: now, exp: now + 60, ...claims })}`;
  return `${body}.${createHmac("sha256", secret).update(body).digest("base64url")}`;
}

// What the authorization server was asked: each token request's form.
const tokenRequests = [];
let as, asURL, authStack, localStack;

/** startAuthServer serves RFC 8414 metadata and a token endpoint that
 * grants code-1 to anyone, on a free loopback port. */
function startAuthServer() {
  const srv = createServer((req, res) => {
    const json = (status, v) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(v));
    };
    if (req.method === "GET" && req.url === "/.well-known/oauth-authorization-server") {
      return json(200, {
        issuer: asURL,
        authorization_endpoint: `${asURL}/authorize`,
        token_endpoint: `${asURL}/token`,
        response_types_supported: ["code"],
        grant_types_supported: ["authorization_code"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none"],
      });
    }
    if (req.method === "POST" && req.url === "/token") {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        const form = new URLSearchParams(body);
        tokenRequests.push(form);
        if (form.get("code") !== "code-1" || !form.get("code_verifier")) return json(400, { error: "invalid_grant" });
        json(200, {
          access_token: jwt({ sub: "u_oauth", install: "in_oauth", aud: tokenAud, scope: "tools:call" }),
          token_type: "Bearer",
          expires_in: 60,
          scope: "tools:call",
        });
      });
      return;
    }
    json(404, { error: "not_found" });
  });
  return new Promise((ok) => srv.listen(0, "127.0.0.1", () => ok(srv)));
}

/** TestProvider is an OAuth client: pre-registered, it records the
 * authorization URL the SDK would open in a browser. */
class TestProvider {
  authorizationURL;
  #tokens;
  #verifier = "";
  get redirectUrl() {
    return "http://127.0.0.1:1/callback";
  }
  get clientMetadata() {
    return { client_name: "toolgate-auth-test", redirect_uris: [this.redirectUrl], token_endpoint_auth_method: "none" };
  }
  clientInformation() {
    return { client_id: "test-client" };
  }
  tokens() {
    return this.#tokens;
  }
  saveTokens(t) {
    this.#tokens = t;
  }
  redirectToAuthorization(url) {
    this.authorizationURL = url;
  }
  saveCodeVerifier(v) {
    this.#verifier = v;
  }
  codeVerifier() {
    return this.#verifier;
  }
}

/** postMCP posts an initialize to /mcp with the token, if any. */
function postMCP(gate, token) {
  const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
  if (token) headers.Authorization = `Bearer ${token}`;
  return fetch(`${gate}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } } }),
  });
}

const newClient = () => new Client({ name: "toolgate-auth-test", version: "1.0.0" });

before(async () => {
  as = await startAuthServer();
  asURL = `http://127.0.0.1:${as.address().port}`;
  authStack = await startStack({
    name: "mcp-auth",
    toolgate: () => `			callers {
				secret ${secret}
				issuer ${asURL}
				audience toolgate
				authorization_server ${asURL}
				scopes tools:call
			}`,
    // RFC 9728's root form of the metadata, as docs/mcp-clients.md routes it.
    site: "\trewrite /.well-known/oauth-protected-resource/toolgate/mcp /toolgate/.well-known/oauth-protected-resource/mcp",
  });
  localStack = await startStack({ name: "mcp-local", toolgate: () => "\t\t\tmcp {\n\t\t\t\tidentity u_local in_local\n\t\t\t}" });
});

after(() => {
  authStack?.stop();
  localStack?.stop();
  as?.close();
});

test("the 401 from /mcp points to the metadata, which names the resource and its authorization server", async () => {
  const { gate } = authStack;
  const res = await postMCP(gate);
  assert.equal(res.status, 401);
  const { resourceMetadataUrl, error, scope } = extractWWWAuthenticateParams(res);
  assert.equal(resourceMetadataUrl?.href, `${gate}/.well-known/oauth-protected-resource/mcp`);
  assert.equal(error, undefined, "no token sent is no invalid_token");
  assert.equal(scope, "tools:call", "the scopes to ask for");

  const md = await discoverOAuthProtectedResourceMetadata(`${gate}/mcp`, { resourceMetadataUrl });
  assert.deepEqual(md, {
    resource: `${gate}/mcp`,
    authorization_servers: [asURL],
    scopes_supported: ["tools:call"],
    bearer_methods_supported: ["header"],
    resource_name: "toolgate",
  });
  // Without the challenge's URL, the SDK looks at the host's root
  // (/.well-known/oauth-protected-resource/toolgate/mcp): the route in docs/mcp-clients.md.
  assert.deepEqual(await discoverOAuthProtectedResourceMetadata(`${gate}/mcp`), md);
});

test("a refused token: invalid_token, or insufficient_scope with the scopes to ask for", async () => {
  const { gate } = authStack;
  let res = await postMCP(gate, jwt({ sub: "u_oauth", aud: "https://other.example/mcp", scope: "tools:call" }));
  assert.equal(res.status, 401);
  let p = extractWWWAuthenticateParams(res);
  assert.equal(p.error, "invalid_token");
  assert.equal(p.resourceMetadataUrl?.href, `${gate}/.well-known/oauth-protected-resource/mcp`);

  res = await postMCP(gate, jwt({ sub: "u_oauth", aud: "toolgate", scope: "openid" }));
  assert.equal(res.status, 403);
  p = extractWWWAuthenticateParams(res);
  assert.equal(p.error, "insufficient_scope");
  assert.equal(p.scope, "tools:call");
  assert.equal(p.resourceMetadataUrl?.href, `${gate}/.well-known/oauth-protected-resource/mcp`);
});

test("the SDK's OAuth flow: discovery from the 401, a token for this resource, then a call as its user", async () => {
  const { gate } = authStack;
  const provider = new TestProvider();
  const url = new URL(`${gate}/mcp`);
  await assert.rejects(newClient().connect(new StreamableHTTPClientTransport(url, { authProvider: provider })), UnauthorizedError);

  const auth = provider.authorizationURL;
  assert.ok(auth, "the SDK sent the user to the authorization server");
  assert.equal(auth.origin + auth.pathname, `${asURL}/authorize`);
  assert.equal(auth.searchParams.get("resource"), `${gate}/mcp`);
  assert.equal(auth.searchParams.get("scope"), "tools:call");
  assert.equal(auth.searchParams.get("code_challenge_method"), "S256");

  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await transport.finishAuth("code-1");
  assert.equal(tokenRequests.at(-1).get("resource"), `${gate}/mcp`);

  const client = newClient();
  await client.connect(transport);
  const res = await client.callTool({ name: "whoami", arguments: {} });
  assert.ok(!res.isError, JSON.stringify(res));
  assert.match(res.content[0].text, /user: u_oauth\n\s+install: in_oauth/);
  await client.close();
});

test("a token the authorization server issued for another resource gets nothing done", async () => {
  const { gate } = authStack;
  tokenAud = "https://other.example/mcp";
  try {
    const provider = new TestProvider();
    const url = new URL(`${gate}/mcp`);
    await assert.rejects(newClient().connect(new StreamableHTTPClientTransport(url, { authProvider: provider })), UnauthorizedError);
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    await transport.finishAuth("code-1");
    // Refused as a bad token: the SDK, holding one, starts over.
    await assert.rejects(newClient().connect(transport), UnauthorizedError);
    assert.equal(provider.tokens()?.access_token.split(".").length, 3, "the client held the foreign token");
  } finally {
    tokenAud = "toolgate";
  }
});

test("mcp { identity }: a client that names nobody acts for the local user", async () => {
  const client = newClient();
  await client.connect(new StreamableHTTPClientTransport(new URL(`${localStack.gate}/mcp`)));
  try {
    let res = await client.callTool({ name: "whoami", arguments: {} });
    assert.ok(!res.isError, JSON.stringify(res));
    assert.match(res.content[0].text, /user: u_local\n\s+install: in_local/);
    // A _meta identity still names whom it likes: any local process may.
    res = await client.callTool({ name: "whoami", arguments: {}, _meta: { "toolgate/identity": { user: "u_1" } } });
    assert.match(res.content[0].text, /user: u_1\n\s+install: \(none\)/);
  } finally {
    await client.close();
  }
});

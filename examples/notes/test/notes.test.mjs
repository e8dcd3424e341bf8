// The notes component's routes, called as toolgate calls them: identity
// tokens signed by a test key that a local JWKS server publishes, and the
// Kazzle-Tool-Context header of a thread or an api call.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { createNotes, maxNotes } from "../dist/src/notes.js";

const issuer = "toolgate";
const audience = "notes";
let key, otherKey, jwks, notes, base;

function listen(handler) {
  return new Promise((ok) => {
    const s = createServer(handler).listen(0, "127.0.0.1", () => ok(s));
  });
}

before(async () => {
  key = await generateKeyPair("EdDSA", { crv: "Ed25519" });
  otherKey = await generateKeyPair("EdDSA", { crv: "Ed25519" });
  const jwk = { ...(await exportJWK(key.publicKey)), kid: "k1", alg: "EdDSA", use: "sig" };
  jwks = await listen((req, res) => {
    res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ keys: [jwk] }));
  });
  const handle = createNotes({ jwksUrl: `http://127.0.0.1:${jwks.address().port}/jwks`, issuer, audience });
  notes = await listen((req, res) => void handle(req, res));
  base = `http://127.0.0.1:${notes.address().port}`;
});

after(() => {
  notes.closeAllConnections();
  notes.close();
  jwks.closeAllConnections();
  jwks.close();
});

// token signs an identity token as toolgate does (EdDSA, kid in the
// header); each field may be overridden to break it.
function token({ user = "u_1", install = "in_1", aud = audience, iss = issuer, exp = "5m", signer = key.privateKey, kid = "k1" } = {}) {
  const jwt = new SignJWT({ install }).setProtectedHeader({ alg: "EdDSA", kid }).setSubject(user).setIssuer(iss).setAudience(aud).setIssuedAt();
  jwt.setExpirationTime(exp);
  return jwt.sign(signer);
}

const thread = JSON.stringify({ source: "thread", threadId: "th_1" });
const api = JSON.stringify({ source: "api" });

// call sends one request. tok: a token, or null for none; ctx: the
// Kazzle-Tool-Context value, or null for none.
async function call(method, path, { tok, ctx = api, body, user, install } = {}) {
  const headers = {};
  if (tok === undefined) tok = await token({ user, install });
  if (tok !== null) headers.Authorization = `Bearer ${tok}`;
  if (ctx !== null) headers["Kazzle-Tool-Context"] = ctx;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(base + path, { method, headers, body: typeof body === "string" || body === undefined ? body : JSON.stringify(body) });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

// Each test has an owner of its own, so that notes do not leak between them.
let owners = 0;
const owner = () => ({ user: `u_${++owners}`, install: "in_1" });

async function exported(who) {
  const r = await call("GET", "/notes/export", who);
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.json.content).notes;
}

test("add_note answers content and markdown", async () => {
  const who = owner();
  const r = await call("POST", "/notes", { ...who, ctx: thread, body: { text: "Buy milk", tags: ["home", "shop"] } });
  assert.equal(r.status, 201, r.text);
  assert.equal(r.headers.get("content-type"), "application/json");
  assert.deepEqual(r.json, {
    content: "Added note n1: Buy milk (tags: home, shop)",
    markdown: "Noted: Buy milk — \\#home \\#shop",
  });
  const r2 = await call("POST", "/notes", { ...who, body: { text: "Call Ana" } });
  assert.deepEqual(r2.json, { content: "Added note n2: Call Ana", markdown: "Noted: Call Ana" });
});

test("a note is shown as text in markdown, whatever it holds", async () => {
  const who = owner();
  const text = "![x](https://evil.example/p.png) <img src=x onerror=alert(1)> [a](javascript:alert(1))\n# head\u2028*b* `c` &lt; 1. x";
  const r = await call("POST", "/notes", { ...who, body: { text } });
  assert.equal(r.status, 201, r.text);
  assert.equal(
    r.json.markdown,
    "Noted: \\!\\[x\\]\\(https\\:\\/\\/evil\\.example\\/p\\.png\\) \\<img src\\=x onerror\\=alert\\(1\\)\\> " +
      "\\[a\\]\\(javascript\\:alert\\(1\\)\\) \\# head \\*b\\* \\`c\\` \\&lt\\; 1\\. x",
  );
  // The content is the text as the user gave it: the model reads it.
  assert.equal(r.json.content, `Added note n1: ${text}`);
});

test("add_note refuses what its schema refuses, and adds nothing", async () => {
  const who = owner();
  const cases = [
    ["an unknown key", { text: "x", due: "today" }, 400, /due|unrecognized/i],
    ["no text", { tags: ["a"] }, 400, /text/],
    ["empty text", { text: "" }, 400, /text/],
    ["text over 2000 characters", { text: "x".repeat(2001) }, 400, /text/],
    ["tags not an array", { text: "x", tags: "a" }, 400, /tags/],
    ["11 tags", { text: "x", tags: Array.from({ length: 11 }, (_, i) => `t${i}`) }, 400, /tags/],
    ["an empty tag", { text: "x", tags: [""] }, 400, /tags\.0/],
    ["an array", [{ text: "x" }], 400, /input/],
    ["null", null, 400, /input/],
    ["not JSON", "{text: x}", 400, /JSON object/],
    ["a body over 64 KiB", JSON.stringify({ text: "x".repeat(70 << 10) }), 413, /64|65536/],
  ];
  for (const [name, body, status, why] of cases) {
    const r = await call("POST", "/notes", { ...who, body: typeof body === "string" ? body : JSON.stringify(body) });
    assert.equal(r.status, status, `${name}: ${r.text}`);
    assert.equal(r.json?.code, status === 413 ? "too_large" : "invalid", `${name}: ${r.text}`);
    assert.match(r.json.error, why, name);
  }
  // A body sent in chunks, with no Content-Length, is counted as it comes.
  const chunks = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode('{"text":"'));
      for (let i = 0; i < 80; i++) c.enqueue(new TextEncoder().encode("x".repeat(1024)));
      c.enqueue(new TextEncoder().encode('"}'));
      c.close();
    },
  });
  const res = await fetch(`${base}/notes`, {
    method: "POST",
    headers: { Authorization: `Bearer ${await token(who)}`, "Kazzle-Tool-Context": api, "Content-Type": "application/json" },
    body: chunks,
    duplex: "half",
  }).catch((err) => ({ status: `connection error: ${err.cause?.code ?? err.message}` }));
  assert.equal(res.status, 413);
  assert.deepEqual(await exported(who), []);
});

test("notes are kept per user and installation", async () => {
  const a = { user: "ana", install: "in_1" };
  await call("POST", "/notes", { ...a, body: { text: "ana's" } });
  // Neither the same user in another installation, nor another user in the
  // same one, nor a pair that would join to the same text, sees it.
  for (const other of [{ user: "ana", install: "in_2" }, { user: "bo", install: "in_1" }, { user: "ana\u0000in", install: "_1" }, { user: "ana", install: "" }]) {
    assert.deepEqual(await exported(other), [], JSON.stringify(other));
  }
  assert.deepEqual(await exported(a), [{ id: "n1", text: "ana's", tags: [] }]);
});

test("every tool route refuses a missing or bad token", async () => {
  const who = owner();
  const routes = [["POST", "/notes", { text: "x" }], ["POST", "/notes/clear"], ["POST", "/notes/clear/confirm"], ["GET", "/notes/export"]];
  const tokens = [
    ["no token", null, "Bearer"],
    ["another key", await token({ ...who, signer: otherKey.privateKey }), 'Bearer error="invalid_token"'],
    ["an unknown kid", await token({ ...who, signer: otherKey.privateKey, kid: "k2" }), 'Bearer error="invalid_token"'],
    ["another component's", await token({ ...who, aud: "bookmarks" }), 'Bearer error="invalid_token"'],
    ["another issuer", await token({ ...who, iss: "evil" }), 'Bearer error="invalid_token"'],
    ["expired", await token({ ...who, exp: Math.floor(Date.now() / 1000) - 120 }), 'Bearer error="invalid_token"'],
    ["not a JWT", "not.a.jwt", 'Bearer error="invalid_token"'],
  ];
  for (const [method, path, body] of routes) {
    for (const [name, tok, challenge] of tokens) {
      const r = await call(method, path, { tok, body, ctx: thread });
      assert.equal(r.status, 401, `${method} ${path}, ${name}: ${r.text}`);
      assert.equal(r.json.code, "unauthorized", `${method} ${path}, ${name}`);
      assert.equal(r.headers.get("www-authenticate"), challenge, `${method} ${path}, ${name}`);
    }
  }
  assert.deepEqual(await exported(who), []);
});

test("clear_notes on a thread answers a card whose button targets this component", async () => {
  const who = owner();
  await call("POST", "/notes", { ...who, body: { text: "one" } });
  await call("POST", "/notes", { ...who, body: { text: "two" } });
  const r = await call("POST", "/notes/clear", { ...who, ctx: thread });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json, {
    type: "action_required",
    title: "Delete all 2 notes?",
    description: "This cannot be undone.",
    elements: [
      { type: "button", id: "delete", label: "Delete all", variant: "danger", target: { type: "app", component: "notes", method: "POST", path: "/notes/clear/confirm" } },
      { type: "button", id: "keep", label: "Keep them", input: { content: "Kept all notes." } },
    ],
  });
  // Asking deletes nothing.
  assert.equal((await exported(who)).length, 2);
});

test("clear_notes outside a thread is a domain error, not a card", async () => {
  const who = owner();
  await call("POST", "/notes", { ...who, body: { text: "one" } });
  for (const ctx of [api, null, "{not json", JSON.stringify({ source: "thread" }), JSON.stringify({ source: "chat", threadId: "th_1" })]) {
    const r = await call("POST", "/notes/clear", { ...who, ctx });
    assert.equal(r.status, 409, `${ctx}: ${r.text}`);
    assert.equal(r.json.code, "confirmation_required", String(ctx));
  }
  assert.equal((await exported(who)).length, 1);
});

test("clear_notes with nothing to clear says so, on any call", async () => {
  const who = owner();
  for (const ctx of [thread, api]) {
    const r = await call("POST", "/notes/clear", { ...who, ctx });
    assert.deepEqual([r.status, r.json], [200, { content: "There are no notes to clear." }]);
  }
});

test("the Delete all target deletes the caller's notes only", async () => {
  const who = owner();
  const other = owner();
  await call("POST", "/notes", { ...who, body: { text: "one" } });
  await call("POST", "/notes", { ...who, body: { text: "two" } });
  await call("POST", "/notes", { ...other, body: { text: "theirs" } });
  const r = await call("POST", "/notes/clear/confirm", { ...who, ctx: thread });
  assert.deepEqual([r.status, r.json], [200, { content: "Deleted all 2 notes." }]);
  assert.deepEqual(await exported(who), []);
  assert.equal((await exported(other)).length, 1);
});

test("export_notes answers markdown on a thread and JSON on an api call", async () => {
  const who = owner();
  await call("POST", "/notes", { ...who, body: { text: "Buy *milk*", tags: ["home"] } });
  await call("POST", "/notes", { ...who, body: { text: "Call Ana" } });

  const t = await call("GET", "/notes/export", { ...who, ctx: thread });
  assert.equal(t.status, 200, t.text);
  assert.deepEqual(t.json, {
    content: "n1 Buy *milk* [home]\nn2 Call Ana",
    markdown: "- Buy \\*milk\\* — \\#home\n- Call Ana",
  });

  for (const ctx of [api, null]) {
    const a = await call("GET", "/notes/export", { ...who, ctx });
    assert.equal(a.status, 200, a.text);
    assert.deepEqual(Object.keys(a.json), ["content"], "no markdown for a program");
    assert.deepEqual(JSON.parse(a.json.content), {
      notes: [
        { id: "n1", text: "Buy *milk*", tags: ["home"] },
        { id: "n2", text: "Call Ana", tags: [] },
      ],
    });
  }

  const empty = await call("GET", "/notes/export", { ...owner(), ctx: thread });
  assert.deepEqual(empty.json, { content: "No notes." });
});

test("an owner keeps at most maxNotes notes", async () => {
  const who = owner();
  const tok = await token(who);
  for (let i = 0; i < maxNotes; i++) {
    const r = await call("POST", "/notes", { tok, body: { text: `n${i}` } });
    assert.equal(r.status, 201, r.text);
  }
  const r = await call("POST", "/notes", { tok, body: { text: "one more" } });
  assert.equal(r.status, 409, r.text);
  assert.equal(r.json.code, "too_many_notes");
});

test("unknown paths and methods", async () => {
  const cases = [
    ["GET", "/notes", 405, "POST"],
    ["DELETE", "/notes/export", 405, "GET"],
    ["GET", "/nope", 404],
    ["GET", "/notes/export/", 404],
    // Not another host's /notes/export.
    ["GET", "//evil.example/notes/export", 404],
  ];
  for (const [method, path, status, allow] of cases) {
    const r = await call(method, path);
    assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
    if (allow) assert.equal(r.headers.get("allow"), allow);
  }
  const ping = await call("GET", "/ping", { tok: null, ctx: null });
  assert.deepEqual([ping.status, ping.text], [200, "pong"]);
});

// Parity: a running gateway serving test/parity/tools.ts (`manifest
// tools.ts`, compiled at load by this package's toolgate-tools) must take
// the same inputs Zod takes. Each case goes to the tool's Zod schema
// (safeParse) and to POST /tools/{name}; their verdicts must agree, except
// for the differences listed in KNOWN, whose verdicts are asserted as
// documented (docs/kits.md, "tools.ts and the compiler").
//
// Also: verifyIdentity accepts the identity token the gateway sent to the
// component, and refuses it for another audience.
//
// Needs go (it builds ./cmd/toolgate) and `npm ci` at the repository root.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { join } from "node:path";
import { load } from "../compiler/compile.mjs";
import { startToolgate } from "../../../examples/stack.mjs";

const fixture = join(import.meta.dirname, "parity", "tools.ts");
const ISSUER = "https://parity.test";
const COMPONENT = "parity";

// The cases. `input` is a value, or `raw` JSON text for what a value
// cannot say (a repeated name, a number no double holds). Verdicts are
// compared, not written down: a case states only what it probes.
const contact = { email: "ada@example.com" };
const order = {
  qty: 1, price: 9.99, size: "m",
  items: [{ sku: "ABC-123", n: 1 }],
  ship: { city: "Oslo" },
  note: null,
};
const item = (n) => ({ sku: `ABC-${String(n).padStart(3, "0")}`, n: 1 });
const cases = [
  // formats
  ["contact", "an email", contact],
  ["contact", "no email (required)", {}],
  ["contact", "an email without a dot in the domain", { email: "ada@example" }],
  ["contact", "an email with two @", { email: "ada@@example.com" }],
  ["contact", "an email with a dot, a plus and a subdomain", { email: "ada.lovelace+tag@mail.example.co" }],
  ["contact", "an email with an IP literal", { email: "ada@[127.0.0.1]" }],
  ["contact", "an email whose local part is 65 characters", { email: "a".repeat(65) + "@example.com" }],
  ["contact", "an email with a domain label of 64 characters", { email: "ada@" + "d".repeat(64) + ".com" }],
  ["contact", "an email that is a number", { email: 42 }],
  ["contact", "a URL", { ...contact, site: "https://example.com/a?b=c#d" }],
  ["contact", "a URL that is not one", { ...contact, site: "not a url" }],
  ["contact", "a URL with a space in its path", { ...contact, site: "http://example.com/a b" }],
  ["contact", "a mailto URL", { ...contact, site: "mailto:ada@example.com" }],
  ["contact", "a relative URL", { ...contact, site: "/a/b" }],
  ["contact", "a URL with a non-ASCII host", { ...contact, site: "https://bücher.example/" }],
  ["contact", "a URL with a space in its host", { ...contact, site: "http://exa mple.com/" }],
  ["contact", "a UUID v4", { ...contact, id: "123e4567-e89b-42d3-a456-426614174000" }],
  ["contact", "a UUID one digit short", { ...contact, id: "123e4567-e89b-42d3-a456-42661417400" }],
  ["contact", "a UUID of version 0", { ...contact, id: "123e4567-e89b-02d3-a456-426614174000" }],
  ["contact", "a date-time on a leap day", { ...contact, at: "2024-02-29T12:00:00Z" }],
  ["contact", "a date-time on a missing leap day", { ...contact, at: "2023-02-29T12:00:00Z" }],
  ["contact", "a date-time with an offset", { ...contact, at: "2024-01-01T12:00:00+02:00" }],
  ["contact", "a date-time with milliseconds", { ...contact, at: "2024-01-01T12:00:00.123Z" }],
  ["contact", "a date-time with a space for T", { ...contact, at: "2024-01-01 12:00:00Z" }],
  ["contact", "an IPv4 address", { ...contact, ip: "192.168.0.1" }],
  ["contact", "an IPv4 octet over 255", { ...contact, ip: "256.1.1.1" }],
  ["contact", "an IPv4 octet with a leading zero", { ...contact, ip: "01.2.3.4" }],
  ["contact", "an IPv6 address for IPv4", { ...contact, ip: "::1" }],
  // optional fields and strict objects
  ["contact", "an extra key on a strict object", { ...contact, x: 1 }],
  ["contact", "null for an optional field", { ...contact, site: null }],
  // numbers at their bounds
  ["order", "a whole order", order],
  ["order", "qty 0, under min 1", { ...order, qty: 0 }],
  ["order", "qty 10, at max", { ...order, qty: 10 }],
  ["order", "qty 11, over max", { ...order, qty: 11 }],
  ["order", "qty 2.5, not an integer", { ...order, qty: 2.5 }],
  ["order", "qty 1.0, an integer written with a fraction", { raw: JSON.stringify({ ...order, qty: 1 }).replace('"qty":1', '"qty":1.0') }],
  ["order", "qty as a string", { ...order, qty: "1" }],
  ["order", "price 0, at the exclusive minimum", { ...order, price: 0 }],
  ["order", "price 0.01, just over it", { ...order, price: 0.01 }],
  ["order", "price 999.99, just under the exclusive maximum", { ...order, price: 999.99 }],
  ["order", "price 1000, at the exclusive maximum", { ...order, price: 1000 }],
  ["order", "price 9.999, not a multiple of 0.01", { ...order, price: 9.999 }],
  ["order", "price 0.3, a multiple of 0.01 no double holds exactly", { ...order, price: 0.3 }],
  ["order", "price 1e400, past any double", { raw: JSON.stringify(order).replace('"price":9.99', '"price":1e400') }],
  ["order", "weight 1e400, an unbounded number past any double", { raw: JSON.stringify(order).replace(/}$/, ',"weight":1e400}') }],
  ["order", "weight -0.5", { ...order, weight: -0.5 }],
  // enums
  ["order", "size xl, not in the enum", { ...order, size: "xl" }],
  ["order", "size M, the enum's case differs", { ...order, size: "M" }],
  // arrays
  ["order", "no items, under min 1", { ...order, items: [] }],
  ["order", "3 items, at max", { ...order, items: [item(1), item(2), item(3)] }],
  ["order", "4 items, over max", { ...order, items: [item(1), item(2), item(3), item(4)] }],
  ["order", "items not an array", { ...order, items: item(1) }],
  // regex patterns and nested strict objects
  ["order", "a sku in lower case", { ...order, items: [{ sku: "abc-123", n: 1 }] }],
  ["order", "a sku with a trailing newline", { ...order, items: [{ sku: "ABC-123\n", n: 1 }] }],
  ["order", "an extra key on a nested strict object", { ...order, items: [{ ...item(1), extra: true }] }],
  ["order", "an item's n 0, not positive", { ...order, items: [{ sku: "ABC-123", n: 0 }] }],
  ["order", "ship without its city", { ...order, ship: {} }],
  ["order", "a city of 1 character, under min 2", { ...order, ship: { city: "O" } }],
  ["order", "a zip of 4 characters, not length 5", { ...order, ship: { city: "Oslo", zip: "1234" } }],
  ["order", "a zip of 5", { ...order, ship: { city: "Oslo", zip: "12345" } }],
  ["order", "an extra key in ship", { ...order, ship: { city: "Oslo", country: "NO" } }],
  // string lengths count characters, not UTF-16 units
  ["order", "a note of 5 emoji (10 UTF-16 units), at max 5", { ...order, note: "😀😀😀😀😀" }],
  ["order", "a note of 6 characters, over max 5", { ...order, note: "hello!" }],
  ["order", "a city of 2 emoji", { ...order, ship: { city: "😀😀" } }],
  // nullable
  ["order", "a note", { ...order, note: "hello" }],
  ["order", "no note (nullable, not optional)", (({ note, ...rest }) => rest)(order)],
  // the JSON text itself
  ["order", "a name given twice", { raw: JSON.stringify(order).replace('{"qty":1,', '{"qty":99,"qty":1,') }],
  // a plain z.object() and a default
  ["search", "a query and a limit", { q: "go", limit: 50 }],
  ["search", "a query without the limit that has a default", { q: "go" }],
  ["search", "a limit over max", { q: "go", limit: 51 }],
  ["search", "an extra key on a plain (stripping) object", { q: "go", extra: 1 }],
  ["search", "an empty query", { q: "" }],
  ["search", "nothing", {}],
];

// KNOWN are the places where Zod and the gateway differ by design, keyed
// by case; each gives both verdicts and why. docs/kits.md documents them.
const KNOWN = {
  "an email whose local part is 65 characters": {
    zod: "valid", gateway: "invalid",
    why: "format email is RFC 5321's mailbox, whose local part is at most 64 octets; Zod's email pattern has no length limits",
  },
  "an email with a domain label of 64 characters": {
    zod: "valid", gateway: "invalid",
    why: "format email's domain is a hostname, whose labels are at most 63 octets; Zod's email pattern has no length limits",
  },
  "weight 1e400, an unbounded number past any double": {
    zod: "invalid", gateway: "valid",
    why: "JSON.parse makes 1e400 Infinity, which z.number() refuses; JSON Schema has no such limit and the gateway reads numbers exactly, so an unbounded number passes",
  },
  "a name given twice": {
    zod: "valid", gateway: "envelope",
    why: "JSON.parse keeps the last of a repeated name; the gateway refuses the request (400), since which value was checked would be a guess",
  },
};

let gate, upstream, stopAll, schemas;
const seenAuth = [];
const seenKeys = [];

before(async () => {
  schemas = await loadZodTools(fixture);
  upstream = await startUpstream();
  ({ gate, stop: stopAll } = await startGateway(upstream.port));
});

after(() => {
  stopAll?.();
  upstream?.close();
});

test("Zod and the gateway give the same verdicts", async () => {
  assert.ok(cases.length >= 40, `only ${cases.length} cases`);
  const rows = [];
  for (const [tool, name, c] of cases) {
    const raw = c && typeof c.raw === "string" ? c.raw : JSON.stringify(c);
    const zod = verdict(schemas[tool].safeParse(JSON.parse(raw)).success);
    const gateway = await gatewayVerdict(tool, raw);
    const known = KNOWN[name];
    const want = known ?? { zod, gateway: zod };
    if (zod !== want.zod || gateway !== want.gateway) {
      rows.push({ tool, case: name, zod, gateway, expected: known ? `zod ${known.zod}, gateway ${known.gateway}: ${known.why}` : "the same" });
    }
  }
  const unused = Object.keys(KNOWN).filter((k) => !cases.some(([, name]) => name === k));
  assert.deepEqual(unused, [], "KNOWN names cases that do not exist");
  if (rows.length) {
    console.table(rows);
  }
  assert.equal(rows.length, 0, `${rows.length} of ${cases.length} cases disagree (table above)`);
});

test("verifyIdentity accepts the gateway's token and refuses another audience", async () => {
  const { verifyIdentity } = await import("@toolgate/kit");
  assert.equal(typeof verifyIdentity, "function", "@toolgate/kit exports no verifyIdentity");
  seenAuth.length = 0;
  const status = await invoke("search", `{"q":"who","limit":1}`);
  assert.equal(status.isError, false, status.content);
  assert.equal(seenAuth.length, 1);
  const req = new Request("http://component.test/call", { headers: { authorization: seenAuth[0] } });
  const jwksUrl = `${gate}/.well-known/jwks.json`;

  const id = await verifyIdentity(req, { jwksUrl, issuer: ISSUER, audience: COMPONENT });
  assert.equal(id.user, "u_parity");
  assert.equal(id.install, "in_parity");
  assert.equal(id.claims.iss, ISSUER);
  assert.equal(id.claims.aud, COMPONENT);

  // Refused for what is wrong, not for a failure on the way (the key set
  // fetched, the token read): the audience, then the issuer.
  await assert.rejects(verifyIdentity(req, { jwksUrl, issuer: ISSUER, audience: "another" }),
    { name: "IdentityError", code: "invalid_token", message: /audience/ });
  await assert.rejects(verifyIdentity(req, { jwksUrl, issuer: "https://other.test", audience: COMPONENT }),
    { name: "IdentityError", code: "invalid_token", message: /issuer/ });
});

test("idempotencyKey is the Idempotency-Key the gateway sends", async () => {
  const { idempotencyKey } = await import("@toolgate/kit");
  seenKeys.length = 0;
  const a = await invoke("search", `{"q":"key","limit":1}`);
  assert.equal(a.isError, false, a.content);
  assert.equal(seenKeys.length, 1);
  assert.equal(seenKeys[0], idempotencyKey("u_parity", "in_parity", a.callId));
  assert.notEqual(seenKeys[0], idempotencyKey("u_other", "in_parity", a.callId));
});

function verdict(ok) {
  return ok ? "valid" : "invalid";
}

async function post(tool, rawInput) {
  const res = await fetch(`${gate}/tools/${tool}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: `{"input":${rawInput},"identity":{"user":"u_parity","install":"in_parity"}}`,
  });
  return { status: res.status, body: JSON.parse(await res.text()) };
}

async function invoke(tool, rawInput) {
  const { status, body } = await post(tool, rawInput);
  assert.equal(status, 200, `POST /tools/${tool}: ${JSON.stringify(body)}`);
  return body;
}

// gatewayVerdict is "valid" when the call reached the component,
// "invalid" when the gateway refused the input as the model sees it (an
// error result, "invalid input:" and the problems), and "envelope" when it
// refused the request's JSON text (400 malformed_envelope). Any other
// answer fails the test.
async function gatewayVerdict(tool, rawInput) {
  const { status, body: a } = await post(tool, rawInput);
  if (status === 400 && a.error?.code === "malformed_envelope") return "envelope";
  assert.equal(status, 200, `POST /tools/${tool} ${rawInput}: ${JSON.stringify(a)}`);
  if (a.status === "done" && !a.isError && a.content === "ok") return "valid";
  if (a.status === "done" && a.isError && a.content.startsWith("invalid input:")) return "invalid";
  assert.fail(`${tool} ${rawInput}: neither a call nor an input refusal: ${JSON.stringify(a)}`);
}

// loadZodTools loads tools.ts as the compiler does and returns each tool's
// Zod input schema by name.
async function loadZodTools(file) {
  const { tools } = await load(file);
  return Object.fromEntries(tools.map((t) => [t.name, t.input]));
}

// startUpstream is the component: it answers every call {"content":"ok"}
// and keeps the Authorization header it got.
function startUpstream() {
  return new Promise((ok) => {
    const srv = createServer((req, res) => {
      seenAuth.push(req.headers.authorization);
      seenKeys.push(req.headers["idempotency-key"]);
      req.resume();
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        res.end('{"content":"ok"}');
      });
    });
    srv.listen(0, "127.0.0.1", () => ok({ port: srv.address().port, close: () => srv.close() }));
  });
}

// startGateway runs toolgate with `manifest tools.ts`: the gateway
// compiles the fixture at load with this package's compiler
// (node_modules/.bin/toolgate-tools at the repository root).
function startGateway(upstreamPort) {
  return startToolgate({
    name: "parity",
    block: () => `			manifest ${fixture}
			component ${COMPONENT} http://127.0.0.1:${upstreamPort}
			identity {
				issuer ${ISSUER}
			}
			ledger off`,
  });
}

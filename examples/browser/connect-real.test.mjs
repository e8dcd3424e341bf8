// Browser tests of a connection end to end (docs/connections.md): a real
// toolgate (built from this checkout) whose tool `mail` sends the user's
// Gmail token to a mail API, and a tiny OAuth provider that this test runs
// itself (the code flow with PKCE S256, and the mail API behind its access
// tokens). In headless Chromium the playground runs `mail` on a thread, its
// connect card's link opens the provider in a popup that lands on the
// gateway's callback, the card shows the call's answer, and the Connections
// panel shows the connection and removes it. Run with
// `node --test connect-real.test.mjs`. It keeps screenshots/connect-real-card.png
// (the card), connect-real-callback.png (the callback page) and
// connect-real-connections.png (the panel).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { startToolgate, freePort } from "../stack.mjs";
import { launchChromium } from "./chromium.mjs";

const screenshots = join(import.meta.dirname, "screenshots");
const who = { user: "u_1", install: "in_1" };

let tg, browser, provider, providerServer;

/**
 * What the provider saw: its authorization requests, code exchanges (and
 * refusals), and the mail API's hits with the token each sent.
 */
const seen = { authorize: [], token: [], refused: [], mail: [] };
const codes = new Map(); // code -> {challenge, redirectUri}, spent on use
const tokens = new Set(); // the access tokens issued

/**
 * serveProvider is the OAuth provider "Gmail" and its mail API:
 * GET /authorize checks the request and sends the browser back with a
 * code, POST /token exchanges a code with its PKCE verifier, and GET /mail
 * answers only a valid Bearer token.
 */
async function serveProvider(port) {
  const origin = `http://127.0.0.1:${port}`;
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, origin);
    let body = "";
    for await (const chunk of req) body += chunk;
    const json = (status, v) => {
      res.statusCode = status;
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify(v));
    };
    const refuse = (error, why) => {
      seen.refused.push(why);
      return json(400, { error, error_description: why });
    };
    if (req.method === "GET" && url.pathname === "/authorize") {
      const q = url.searchParams;
      seen.authorize.push(Object.fromEntries(q));
      const bad = q.get("response_type") !== "code" ? "response_type is not code"
        : q.get("code_challenge_method") !== "S256" ? "code_challenge_method is not S256"
        : q.get("client_id") !== "gw" ? "unknown client"
        : !q.get("code_challenge") || !q.get("state") || !q.get("redirect_uri") ? "a parameter is missing"
        : "";
      if (bad) {
        res.statusCode = 400;
        seen.refused.push(bad);
        return res.end(bad);
      }
      const code = `code_${randomBytes(9).toString("base64url")}`;
      codes.set(code, { challenge: q.get("code_challenge"), redirectUri: q.get("redirect_uri") });
      const back = new URL(q.get("redirect_uri"));
      back.searchParams.set("code", code);
      back.searchParams.set("state", q.get("state"));
      res.statusCode = 302;
      res.setHeader("Location", back.href);
      return res.end();
    }
    if (req.method === "POST" && url.pathname === "/token") {
      const f = new URLSearchParams(body);
      seen.token.push(Object.fromEntries(f));
      if (req.headers.authorization !== `Basic ${Buffer.from("gw:s").toString("base64")}`) return refuse("invalid_client", "client authentication");
      if (f.get("grant_type") !== "authorization_code") return refuse("unsupported_grant_type", "grant_type");
      const c = codes.get(f.get("code"));
      codes.delete(f.get("code")); // single use
      if (!c) return refuse("invalid_grant", "unknown or used code");
      if (f.get("redirect_uri") !== c.redirectUri) return refuse("invalid_grant", "redirect_uri differs");
      const verifier = f.get("code_verifier") ?? "";
      if (createHash("sha256").update(verifier).digest("base64url") !== c.challenge) return refuse("invalid_grant", "PKCE verifier");
      const at = `at_${randomBytes(12).toString("base64url")}`;
      tokens.add(at);
      return json(200, { access_token: at, token_type: "Bearer", expires_in: 3600, refresh_token: `rt_${randomBytes(12).toString("base64url")}`, scope: "mail.read" });
    }
    if (req.method === "GET" && url.pathname === "/mail") {
      const tok = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? "";
      seen.mail.push(tok);
      if (!tokens.has(tok)) return json(401, { error: "invalid_token" });
      return json(200, { content: `mail for ${tok}` });
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise((ok) => server.listen(port, "127.0.0.1", ok));
  return { server, origin };
}

before(async () => {
  ({ server: providerServer, origin: provider } = await serveProvider(await freePort()));
  tg = await startToolgate({
    name: "connect-real",
    block: () => `			connection gmail {
				authorize_url ${provider}/authorize
				token_url ${provider}/token
				client_id gw
				client_secret s
				scopes mail.read
			}
			tool mail {
				description "The user's mail."
				input_schema \`{"type":"object"}\`
				target url GET ${provider}/mail
				header Authorization "Bearer \${connection.gmail}"
			}`,
  });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  tg?.stop();
  providerServer?.close();
});

/** openPlayground opens the playground on a thread, recording its problems and resumes. */
async function openPlayground() {
  const page = await browser.newPage({ viewport: { width: 1100, height: 1000 } });
  const problems = [];
  const resumes = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/resume$/.test(new URL(r.url()).pathname)) resumes.push(r);
  });
  await page.goto(`${tg.gate}/playground`);
  await page.getByRole("navigation", { name: "Tools" }).getByRole("button", { name: "mail" }).waitFor();
  await page.getByLabel("Thread id").fill("th_connect");
  return { page, problems, resumes };
}

/** runMail runs the tool mail from the playground and returns its card in Result. */
async function runMail(page) {
  await page.getByRole("navigation", { name: "Tools" }).getByRole("button", { name: "mail" }).click();
  await page.getByRole("button", { name: "Run" }).click();
  return page.getByRole("region", { name: "Result" }).locator("toolgate-card").first();
}

/** connections is GET /connections for u_1/in_1, as the API lists it. */
async function connections() {
  const r = await fetch(`${tg.gate}/connections?user=${who.user}&install=${who.install}`);
  assert.equal(r.status, 200);
  return (await r.json()).connections;
}

test("the connect card's link connects Gmail in a popup, the call goes on by itself, and Disconnect brings the card back", async () => {
  const { page, problems, resumes } = await openPlayground();
  const panel = page.getByRole("region", { name: "Connections" });
  await panel.getByText("not connected").waitFor();
  assert.equal(await panel.getByRole("button", { name: "Disconnect Gmail" }).count(), 0);

  // The card, and nothing sent to the mail API.
  const card = (await runMail(page)).getByRole("region", { name: "Connect Gmail" });
  await card.getByText("mail acts on your Gmail account. Connect it, and the call goes on by itself.").waitFor();
  const link = card.getByRole("link", { name: "Connect Gmail" });
  const href = new URL(await link.getAttribute("href"));
  assert.equal(href.origin + href.pathname, `${provider}/authorize`);
  assert.equal(href.searchParams.get("code_challenge_method"), "S256");
  assert.equal(href.searchParams.get("redirect_uri"), `${tg.gate}/connections/gmail/callback`);
  assert.equal(href.searchParams.get("scope"), "mail.read");
  await card.getByRole("button", { name: "I've connected — continue" }).waitFor();
  assert.deepEqual(seen.mail, []);
  mkdirSync(screenshots, { recursive: true });
  await card.screenshot({ path: join(screenshots, "connect-real-card.png") });

  // The link opens the provider in a popup, which lands on the callback.
  const [popup] = await Promise.all([page.waitForEvent("popup"), link.click()]);
  await popup.getByRole("heading", { name: "Gmail is connected" }).waitFor();
  assert.match(popup.url(), new RegExp(`^${tg.gate}/connections/gmail/callback\\?`));
  assert.equal(await popup.getByText("The call that waited for it went on. You can close this window.").count(), 1);
  const shown = await popup.content();
  assert.doesNotMatch(shown, /code_|at_|rt_|state=/, "the page shows no code, state or token");
  await popup.screenshot({ path: join(screenshots, "connect-real-callback.png") });
  assert.equal(seen.authorize.length, 1);
  assert.equal(seen.token.length, 1);
  assert.deepEqual(seen.refused, []);

  // The card asked for its call and shows the answer the callback's run
  // gave; the token it carried is not in it.
  const result = page.getByRole("region", { name: "Result" }).getByRole("region", { name: "mail" });
  await result.getByText("mail for [connection token]").waitFor({ timeout: 10000 });
  assert.equal(seen.mail.length, 1, "the mail API was called once");
  assert.ok(tokens.has(seen.mail[0]), "with the access token the provider issued");
  assert.equal(resumes.length, 0, "the card resumed nothing: the callback ran the call");
  await popup.close();

  // The Connections panel shows it made; Disconnect undoes it.
  await panel.getByText("connected", { exact: true }).waitFor();
  assert.match(await panel.innerText(), /scope mail\.read/);
  assert.doesNotMatch(await panel.innerText(), /at_|rt_/);
  await panel.screenshot({ path: join(screenshots, "connect-real-connections.png") });
  const [made] = await connections();
  assert.equal(made.connected, true);
  await panel.getByRole("button", { name: "Disconnect Gmail" }).click();
  await panel.getByText("not connected").waitFor();
  assert.equal((await connections())[0].connected, false);

  // Run again: the card again, and nothing sent.
  const again = (await runMail(page)).getByRole("region", { name: "Connect Gmail" });
  await again.getByRole("link", { name: "Connect Gmail" }).waitFor();
  assert.equal(seen.mail.length, 1);
  assert.deepEqual(problems, []);
  await page.close();
});

test("\"I've connected — continue\" before connecting answers a new card with a fresh link; Skip ends the call sending nothing", async () => {
  const { page, problems, resumes } = await openPlayground();
  const mailHits = seen.mail.length;
  const result = await runMail(page);
  const card = result.getByRole("region", { name: "Connect Gmail" });
  const first = await card.getByRole("link", { name: "Connect Gmail" }).getAttribute("href");
  await card.getByRole("button", { name: "I've connected — continue" }).click();
  await page.waitForFunction(
    (first) => [...document.querySelectorAll("#cards toolgate-card")].some((c) => {
      const a = c.shadowRoot.querySelector("a[part~=link]");
      return a && a.href !== first;
    }), first);
  const fresh = await card.getByRole("link", { name: "Connect Gmail" }).getAttribute("href");
  assert.notEqual(new URL(fresh).searchParams.get("state"), new URL(first).searchParams.get("state"));
  assert.deepEqual(resumes.map((r) => r.postDataJSON()), [{ buttonId: "connect", identity: who }]);

  await card.getByRole("button", { name: "Skip" }).click();
  await result.getByText("The user skipped connecting gmail; nothing was sent.").waitFor();
  assert.equal(seen.mail.length, mailHits);
  assert.deepEqual(problems, []);
  await page.close();
});

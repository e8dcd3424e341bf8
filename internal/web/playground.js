/**
 * The playground (GET /playground): every tool the caller may call, a form
 * for its input, its answer in a <toolgate-card>, the calls made from the
 * page, the cards that wait for the playground's user (GET /waiting: the
 * gateway's approvals and apps' cards), each answerable there, the user's
 * connections (GET /connections: which are made, never a token), each
 * made one removable (DELETE /connections/{name}), and what
 * POST /page-context renders for a few name/value rows.
 *
 * The page is served under the gateway's own path, so every URL here is
 * relative to it; the gateway's Content-Security-Policy allows scripts from
 * itself only, so there is no inline script or handler anywhere. Tool names,
 * descriptions and schemas come from the gateway and are put into the page
 * as text (textContent, setAttribute), never as markup.
 * @module toolgate/playground
 */
import "./card.js";
import { buildForm } from "./form.js";

/** The gateway's base URL: the folder this page is in. */
const gateway = new URL(".", location.href);

const $ = (id) => document.getElementById(id);

/** el makes an element with text children (strings become text nodes). */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  e.append(...children);
  return e;
}

const settings = {
  token: () => $("token").value.trim(),
  identity: () => ({ user: $("user").value, install: $("install").value }),
  context: () => {
    const threadId = $("thread").value.trim();
    return threadId === "" ? { source: "api" } : { source: "thread", threadId };
  },
  device: () => $("device").value.trim(),
};

/**
 * request sends one request to the gateway, with the caller token when one
 * is typed. It resolves to the status and the JSON body (undefined when the
 * body is not JSON); it rejects only when nothing came back.
 */
async function request(method, path, body) {
  const headers = {};
  const token = settings.token();
  if (token !== "") headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(new URL(path, gateway), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let json;
  try {
    json = await r.json();
  } catch {
    json = undefined;
  }
  return { status: r.status, json };
}

/**
 * problem says what went wrong with a request, from the gateway's error
 * body ({"error":{"code","message"}}, or a domain error {"code","error"}).
 */
function problem(status, json) {
  const e = json?.error;
  let text;
  if (e && typeof e === "object") text = `${e.code}: ${e.message}`;
  else if (typeof json?.code === "string") text = `${json.code}: ${e}`;
  else text = `the gateway answered ${status}`;
  if (status === 401) text += " (type a caller token)";
  return text;
}

// ---- tools ----

let tools = [];
let chosen; // { tool, form }
let formSeq = 0;

async function loadTools() {
  const list = $("tools");
  const error = $("tools-error");
  list.replaceChildren();
  error.textContent = "";
  let res;
  try {
    res = await request("GET", "tools");
  } catch (e) {
    error.textContent = `the gateway could not be reached: ${e.message}`;
    return;
  }
  if (res.status !== 200 || !Array.isArray(res.json)) {
    error.textContent = problem(res.status, res.json);
    return;
  }
  tools = res.json;
  for (const tool of tools) {
    const b = el("button", { type: "button", "aria-pressed": "false" }, String(tool.displayName || tool.name));
    b.addEventListener("click", () => choose(tool, b));
    list.append(el("li", {}, b));
  }
}

function choose(tool, button) {
  for (const b of $("tools").querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === button));
  $("tool-heading").textContent = String(tool.displayName || tool.name);
  $("tool-name").textContent = String(tool.name);
  $("tool-description").textContent = String(tool.description ?? "");
  const form = buildForm(tool.input_schema, { document, idPrefix: `in${++formSeq}` });
  $("tool-fields").replaceChildren(form.element);
  $("run-error").textContent = "";
  $("tool-form").hidden = false;
  chosen = { tool, form };
}

/** newCallId is a fresh call id: "pg_" and 96 random bits in hex. */
function newCallId() {
  // getRandomValues, not randomUUID: it works on a plain-http host too.
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return "pg_" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function run(event) {
  event.preventDefault(); // the browser checked the fields' constraints already
  if (!chosen) return;
  const { tool, form } = chosen;
  const error = $("run-error");
  error.textContent = "";
  let input;
  try {
    input = form.read();
  } catch (e) {
    error.textContent = e.message; // nothing is sent
    return;
  }
  const callId = newCallId();
  const envelope = { input, callId, context: settings.context() };
  // With a caller token the identity is the token's; the gateway ignores the envelope's.
  if (settings.token() === "") envelope.identity = settings.identity();
  const entry = addCall(tool.name, callId);
  let res;
  try {
    res = await request("POST", `tools/${encodeURIComponent(tool.name)}`, envelope);
  } catch (e) {
    error.textContent = `the gateway could not be reached: ${e.message}`;
    entry.set("not sent");
    return;
  }
  if (res.json && typeof res.json === "object" && typeof res.json.callId === "string") {
    entry.set(statusOf(res.json));
    showCard(tool, res.json, entry);
    if (res.json.status === "action_required") loadWaiting();
    return;
  }
  error.textContent = problem(res.status, res.json);
  entry.set(`refused (${res.status})`);
}

/** statusOf is an answer's status as the Calls list shows it. */
function statusOf(answer) {
  return answer.isError ? `${answer.status}, error` : String(answer.status);
}

function showCard(tool, answer, entry) {
  const card = newCard();
  card.addEventListener("toolgate.card.resolved", (e) => {
    entry.set(statusOf(e.detail));
    // Answered here, the same call waits no more in "Waiting for you";
    // a connect card's call went on with a connection made.
    if (answer.status === "action_required") {
      loadWaiting();
      loadConnections();
    }
  });
  const caption = el("p", { class: "caption" }, `${tool.name} · ${answer.callId}`);
  $("cards").prepend(el("div", { class: "entry" }, caption, card));
  card.answer = answer;
}

/** newCard is a <toolgate-card> that calls the gateway as the playground does. */
function newCard() {
  const card = document.createElement("toolgate-card");
  card.gateway = gateway.href;
  if (settings.token() !== "") {
    // Read when the card needs it, so a token typed anew is the one used.
    card.getToken = async () => settings.token();
  } else {
    card.identity = settings.identity();
  }
  const device = settings.device();
  if (device !== "") card.device = device;
  return card;
}

// ---- waiting for you ----

let waitingSeq = 0; // the latest load: an older one's answer is dropped

/**
 * userPath is path for the playground's user: a caller token says who
 * that is, else the User and Install fields do, in the query.
 */
function userPath(path) {
  if (settings.token() !== "") return path;
  const { user, install } = settings.identity();
  const q = new URLSearchParams({ user });
  if (install !== "") q.set("install", install);
  return `${path}?${q}`;
}

/**
 * loadWaiting lists the calls that wait for the user, oldest first, each
 * a card that can be answered here. A card already shown stays as it is
 * (with whatever is typed into it); those no longer waiting go.
 */
async function loadWaiting() {
  const seq = ++waitingSeq;
  const error = $("waiting-error");
  let res;
  try {
    res = await request("GET", userPath("waiting"));
  } catch (e) {
    if (seq === waitingSeq) error.textContent = `the gateway could not be reached: ${e.message}`;
    return;
  }
  if (seq !== waitingSeq) return;
  const calls = Array.isArray(res.json?.calls) ? res.json.calls : undefined;
  if (res.status !== 200 || !calls) {
    error.textContent = problem(res.status, res.json);
    return;
  }
  error.textContent = "";
  const list = $("waiting-list");
  const shown = new Map([...list.children].map((li) => [li.dataset.callId, li]));
  const items = [];
  for (const call of calls) {
    if (!call || typeof call !== "object" || typeof call.callId !== "string") continue;
    items.push(shown.get(call.callId) ?? waitingEntry(call));
  }
  list.replaceChildren(...items);
  $("waiting-empty").textContent = items.length === 0 ? "Nothing waits for you." : "";
}

/**
 * waitingEntry is one waiting call's card. Once answered, its answer moves
 * to the Result panel and the list is loaded again; a refusal that says
 * the call waits no more (404, 409) loads it again too.
 */
function waitingEntry(call) {
  const card = newCard();
  const caption = el("p", { class: "caption" }, `${String(call.tool ?? "")} · ${call.callId}`);
  const li = el("li", { class: "entry" }, caption, card);
  li.dataset.callId = call.callId;
  card.addEventListener("toolgate.card.resolved", () => {
    $("cards").prepend(el("div", { class: "entry" }, caption, card));
    li.remove();
    loadWaiting();
    loadConnections();
  });
  card.addEventListener("toolgate.card.error", (e) => {
    if (e.detail?.status === 404 || e.detail?.status === 409) loadWaiting();
  });
  card.answer = { callId: call.callId, tool: call.tool, status: call.status, card: call.card };
  return li;
}

// ---- connections ----

let connectionsSeq = 0; // the latest load: an older one's answer is dropped

/**
 * loadConnections lists the connections of the gateway and which of them
 * the playground's user has made: its title and name, connected or not,
 * and for a made one its scope, since and expiry, and Disconnect. The API
 * holds no token, and nothing here would show one.
 */
async function loadConnections() {
  const seq = ++connectionsSeq;
  const error = $("connections-error");
  let res;
  try {
    res = await request("GET", userPath("connections"));
  } catch (e) {
    if (seq === connectionsSeq) error.textContent = `the gateway could not be reached: ${e.message}`;
    return;
  }
  if (seq !== connectionsSeq) return;
  const list = Array.isArray(res.json?.connections) ? res.json.connections : undefined;
  if (res.status !== 200 || !list) {
    error.textContent = problem(res.status, res.json);
    return;
  }
  error.textContent = "";
  const items = [];
  for (const c of list) {
    if (!c || typeof c !== "object" || typeof c.name !== "string") continue;
    items.push(connectionEntry(c));
  }
  $("connection-list").replaceChildren(...items);
  $("connections-empty").textContent = items.length === 0 ? "This gateway declares no connections." : "";
}

/** connectionEntry is one connection as the list shows it. */
function connectionEntry(c) {
  const title = String(c.title || c.name);
  const connected = c.connected === true;
  const state = el("span", { class: connected ? "state connected" : "state not-connected" }, connected ? "connected" : "not connected");
  const li = el("li", {}, el("span", { class: "title" }, title), state);
  li.dataset.name = c.name;
  if (title !== c.name) li.append(el("p", { class: "detail" }, `connection ${c.name}`));
  if (c.exchange === true) li.append(el("p", { class: "detail" }, "made by the gateway (token exchange)"));
  if (typeof c.scope === "string" && c.scope !== "") li.append(el("p", { class: "detail" }, `scope ${c.scope}`));
  for (const [key, word] of [["since", "since"], ["expires", "expires"]]) {
    if (typeof c[key] !== "string" || c[key] === "") continue;
    li.append(el("p", { class: "detail", title: c[key] }, `${word} ${when(c[key])}`));
  }
  if (connected) {
    const b = el("button", { type: "button", "aria-label": `Disconnect ${title}` }, "Disconnect");
    b.addEventListener("click", () => disconnect(c.name, b));
    li.append(b);
  }
  return li;
}

/** when is an RFC 3339 time to the minute, in UTC: "2026-12-02 10:00 UTC". */
function when(t) {
  const ms = Date.parse(t);
  if (!Number.isFinite(ms)) return t;
  return new Date(ms).toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

/**
 * disconnect removes the user's own token of connection name (the
 * service is not told) and lists the connections again.
 */
async function disconnect(name, button) {
  const error = $("connections-error");
  error.textContent = "";
  button.disabled = true;
  let res;
  try {
    res = await request("DELETE", userPath(`connections/${encodeURIComponent(name)}`));
  } catch (e) {
    error.textContent = `the gateway could not be reached: ${e.message}`;
    button.disabled = false;
    return;
  }
  if (res.status !== 204) {
    error.textContent = problem(res.status, res.json);
    button.disabled = false;
    return;
  }
  await loadConnections();
}

// ---- calls ----

/** addCall adds an entry to the Calls list; set(status) updates it. */
function addCall(tool, callId) {
  const status = el("span", { class: "status" }, "sending");
  const li = el("li", {}, el("span", { class: "tool" }, tool), " ", el("span", { class: "id" }, callId), " ", status);
  $("call-list").prepend(li);
  return { set: (s) => (status.textContent = s) };
}

// ---- page context ----

function addRow() {
  const row = el("div", { class: "row" });
  const name = el("input", { type: "text", class: "name", autocomplete: "off" });
  const value = el("input", { type: "text", class: "value", autocomplete: "off" });
  const remove = el("button", { type: "button" });
  remove.addEventListener("click", () => {
    row.remove();
    numberRows();
  });
  row.append(el("label"), name, el("label"), value, remove);
  $("pc-rows").append(row);
  numberRows();
}

// Labels carry the row's number, so each field has a name of its own.
function numberRows() {
  $("pc-rows").querySelectorAll(".row").forEach((row, i) => {
    const n = i + 1;
    const [nameLabel, name, valueLabel, value, remove] = row.children;
    name.id = `pc-name-${n}`;
    value.id = `pc-value-${n}`;
    nameLabel.htmlFor = name.id;
    valueLabel.htmlFor = value.id;
    nameLabel.textContent = `Name ${n}`;
    valueLabel.textContent = `Value ${n}`;
    remove.textContent = `Remove row ${n}`;
  });
}

/** pageValue is a row's value: its text as JSON when it is JSON, else the text. */
function pageValue(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

async function renderPageContext() {
  const error = $("pc-error");
  error.textContent = "";
  $("pc-text").textContent = "";
  $("pc-dropped").textContent = "";
  const items = [];
  for (const row of $("pc-rows").querySelectorAll(".row")) {
    const name = row.querySelector(".name").value;
    const value = row.querySelector(".value").value;
    if (name === "" && value === "") continue; // a row nobody filled in
    items.push({ name, value: pageValue(value) });
  }
  let res;
  try {
    res = await request("POST", "page-context", { items });
  } catch (e) {
    error.textContent = `the gateway could not be reached: ${e.message}`;
    return;
  }
  if (res.status !== 200 || typeof res.json?.text !== "string") {
    error.textContent = problem(res.status, res.json);
    return;
  }
  $("pc-text").textContent = res.json.text;
  const dropped = Array.isArray(res.json.dropped) ? res.json.dropped : [];
  if (dropped.length > 0) $("pc-dropped").textContent = `Dropped: ${dropped.join(", ")}`;
}

// ---- start ----

$("tool-form").addEventListener("submit", run);
$("token").addEventListener("change", loadTools);
for (const id of ["token", "user", "install", "device"]) {
  // The cards shown call the gateway as whoever was set: new ones for a new identity.
  $(id).addEventListener("change", () => {
    $("waiting-list").replaceChildren();
    loadWaiting();
    loadConnections();
  });
}
$("waiting-refresh").addEventListener("click", loadWaiting);
$("connections-refresh").addEventListener("click", loadConnections);
$("pc-add").addEventListener("click", addRow);
$("pc-render").addEventListener("click", renderPageContext);
addRow();
loadTools();
loadWaiting();
loadConnections();

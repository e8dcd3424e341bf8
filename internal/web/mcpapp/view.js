// The MCP Apps view (SEP-1865) of toolgate: the page ui://toolgate/card an
// MCP host shows in a sandboxed frame beside a tool call. It speaks the
// view side of the protocol, JSON-RPC 2.0 over postMessage with its parent:
//
//   view -> host  ui/initialize, then ui/notifications/initialized
//   host -> view  ui/notifications/tool-result (params: the CallToolResult)
//   view -> host  tools/call toolgate_card_answer {state, button [, input] | action}
//   view -> host  ui/notifications/size-changed {height}
//
// A result's structuredContent is the Tools API's answer, shown by
// <toolgate-card>; its _meta["toolgate/state"] is the signed one-use
// continuation a button press sends back. An embed's own height messages
// are taken by the card (from the embed's window only); the view draws no
// chrome around an embed, so its document height is the embed's.
//
// mcpapp.go inlines this module, card.js, form.js and marked.js into one document:
// a host's CSP lets the view load no script.
import { ToolgateCard, safeURL } from "../card.js";

/** The MCP Apps protocol revision the view speaks. */
export const PROTOCOL_VERSION = "2026-01-26";

/** The tool the gateway adds to answer a card through the host. */
export const ANSWER_TOOL = "toolgate_card_answer";

/** The _meta key of a card's continuation. */
export const STATE_KEY = "toolgate/state";

/**
 * answerOf is the answer to show for a CallToolResult: its
 * structuredContent when that is a toolgate answer, else a done answer of
 * its text (a host may hand the view any result).
 */
export function answerOf(result) {
  const sc = result?.structuredContent;
  if (sc && typeof sc === "object" && !Array.isArray(sc) && typeof sc.status === "string") return sc;
  const items = Array.isArray(result?.content) ? result.content : [];
  const text = items
    .filter((c) => c && c.type === "text" && typeof c.text === "string")
    .map((c) => c.text)
    .join("\n");
  return { status: "done", tool: "", isError: result?.isError === true, content: text };
}

/** stateOf is a result's continuation, or "" when it carries none. */
export function stateOf(result) {
  const s = result?._meta?.[STATE_KEY];
  return typeof s === "string" ? s : "";
}

/**
 * answerArgs are toolgate_card_answer's arguments for a press: a card
 * button's id, with the input changed by "Approve with changes" when there
 * is one, or skip / cancel.
 */
export function answerArgs(state, choice) {
  if (typeof choice?.buttonId === "string") {
    const args = { state, button: choice.buttonId };
    if (choice.input !== undefined) args.input = choice.input;
    return args;
  }
  if (choice?.action === "skip" || choice?.action === "cancel") return { state, action: choice.action };
  throw new Error("unknown choice");
}

/**
 * The host's style variables (SEP-1865 hostContext.styles.variables) the
 * view takes; view.html maps them onto the card's --toolgate-card-*.
 */
const hostVariables = new Set([
  "--color-text-primary", "--color-text-secondary", "--color-text-danger", "--color-text-info",
  "--color-background-primary", "--color-background-secondary", "--color-border-primary",
  "--font-sans", "--border-radius-md",
]);

/**
 * themeOf is what the view takes of a host context: the known style
 * variables with string values, and a light or dark theme.
 */
export function themeOf(ctx) {
  const vars = ctx?.styles?.variables;
  const out = { variables: {}, theme: ctx?.theme === "light" || ctx?.theme === "dark" ? ctx.theme : "" };
  if (vars && typeof vars === "object") {
    for (const [k, v] of Object.entries(vars)) {
      if (hostVariables.has(k) && typeof v === "string" && v.length <= 200) out.variables[k] = v;
    }
  }
  return out;
}

/** A press the view cannot send, or the host or gateway refused. */
class AnswerError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/**
 * View is the protocol's view side on one window: win.parent is the host.
 * Everything it shows goes through the card's renderer.
 */
export class View {
  #win;
  #card;
  #state = "";
  #nextId = 1;
  #pending = new Map(); // request id -> {ok, fail}
  #lastHeight = -1;
  #shown = false; // a result came

  constructor(win, card) {
    this.#win = win;
    this.#card = card;
    card.embedMaxShare = 0; // the host sizes the frame to the content
    card.resume = (answer, choice) => this.#answer(choice);
  }

  /** start listens to the host, says hello, and reports the height. */
  async start() {
    this.#win.addEventListener("message", (e) => this.onMessage(e));
    const doc = this.#win.document;
    this.#card.addEventListener("toolgate.card.embedsize", () => this.#size());
    this.#card.addEventListener("click", (e) => this.#link(e));
    new this.#win.ResizeObserver(() => this.#size()).observe(doc.documentElement);
    const init = await this.request("ui/initialize", {
      appInfo: { name: "toolgate-card", version: "1.0.0" },
      appCapabilities: {},
      protocolVersion: PROTOCOL_VERSION,
    });
    this.#theme(init?.hostContext);
    this.#post({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} });
    this.#size();
  }

  /** onMessage takes JSON-RPC from the host and nothing from anyone else. */
  onMessage(e) {
    if (e.source !== this.#win.parent || this.#win.parent === this.#win) return;
    const m = e.data;
    if (!m || typeof m !== "object" || m.jsonrpc !== "2.0") return;
    if (typeof m.method === "string") {
      if (m.id !== undefined) this.#serve(m);
      else this.#notified(m.method, m.params);
      return;
    }
    const p = this.#pending.get(m.id);
    if (!p) return;
    this.#pending.delete(m.id);
    if (m.error) p.fail(new AnswerError("host_error", String(m.error.message ?? "the host refused the request")));
    else p.ok(m.result);
  }

  /** request sends a JSON-RPC request to the host and resolves to its result. */
  request(method, params) {
    const id = this.#nextId++;
    return new Promise((ok, fail) => {
      this.#pending.set(id, { ok, fail });
      this.#post({ jsonrpc: "2.0", id, method, params });
    });
  }

  /**
   * link asks the host to open a link of the card (ui/open-link): a
   * markdown link, or a card's link button (a connect card's, which
   * card.js draws as a link too); the view's sandbox lets it open no
   * window itself, and the host asks the person. card.js renders only
   * absolute http(s) and mailto links, and its safeURL keeps any other
   * href from being sent. The gateway's callback runs the call, which the
   * view cannot ask for: the card's "I've connected — continue" resumes it
   * through the host.
   */
  #link(e) {
    const a = e.composedPath?.().find((n) => n?.tagName === "A" && typeof n.href === "string" && n.href);
    if (!a) return;
    e.preventDefault();
    const url = safeURL(a.href);
    if (url) this.request("ui/open-link", { url }).catch(() => {});
  }

  /** show renders a tool result and keeps its continuation. */
  show(result) {
    this.#shown = true;
    this.#state = stateOf(result);
    this.#card.answer = answerOf(result);
    this.#size();
  }

  #notified(method, params) {
    if (method === "ui/notifications/tool-input") this.#running();
    else if (method === "ui/notifications/tool-result") this.show(params);
    else if (method === "ui/notifications/tool-cancelled") this.#cancelled(params?.reason);
    else if (method === "ui/notifications/host-context-changed") this.#theme(params);
  }

  /**
   * running shows the call in flight once its input arrived, until its
   * result does; an answer already shown stays.
   */
  #running() {
    if (this.#shown) return;
    this.#card.answer = { status: "running", tool: "" };
    this.#size();
  }

  /** cancelled shows that the host cancelled the call; a card shown is gone. */
  #cancelled(reason) {
    this.#state = "";
    const why = typeof reason === "string" && reason ? `: ${reason}` : ".";
    this.#card.answer = { status: "done", tool: "", isError: true, content: `The call was cancelled${why}` };
    this.#size();
  }

  /** theme follows the host's look: its colours, font and light or dark. */
  #theme(ctx) {
    const { variables, theme } = themeOf(ctx);
    const style = this.#win.document.documentElement.style;
    for (const [k, v] of Object.entries(variables)) style.setProperty(k, v);
    if (theme) style.colorScheme = theme;
  }

  #serve(m) {
    // The host's requests: ping, and teardown (nothing to save here).
    if (m.method === "ping" || m.method === "ui/resource-teardown") {
      this.#post({ jsonrpc: "2.0", id: m.id, result: {} });
      return;
    }
    this.#post({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: `method not found: ${m.method}` } });
  }

  /**
   * answer presses a card through the host: tools/call toolgate_card_answer
   * with the state the card came with; the result's answer is the card's
   * next, its state the next card's. A failed press keeps the state unless
   * the refusal brings a fresh one: the gateway takes a state once, so a
   * second press after one that reached it is refused there (unless it sent
   * a fresh one with the refusal), and one that never got there may be
   * tried again.
   */
  async #answer(choice) {
    const state = this.#state;
    if (!state) throw new AnswerError("no_state", "This card cannot be answered here: it came without its continuation.");
    const result = await this.request("tools/call", { name: ANSWER_TOOL, arguments: answerArgs(state, choice) });
    const sc = result?.structuredContent;
    if (!sc || typeof sc !== "object" || typeof sc.status !== "string") {
      // A refusal (a used or expired state, a button the gateway would not
      // press): its text says why. The gateway spent the state if it got
      // that far; when the card still waits it sends a fresh one.
      const next = stateOf(result);
      if (next) this.#state = next;
      throw new AnswerError("refused", answerOf(result).content || "the card could not be answered");
    }
    this.#state = stateOf(result);
    return sc; // the card renders it; the ResizeObserver reports its height
  }

  /** size tells the host the document's height when it changed. */
  #size() {
    const h = Math.ceil(this.#win.document.documentElement.getBoundingClientRect().height);
    if (h === this.#lastHeight) return;
    this.#lastHeight = h;
    this.#post({ jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height: h } });
  }

  #post(msg) {
    // The host's origin is not known to a sandboxed frame (its own is
    // opaque); the message goes to the parent window only.
    this.#win.parent.postMessage(msg, "*");
  }
}

// In a page (not when Node imports the module for its tests): mount one
// card and start.
if (globalThis.document && globalThis.window?.parent && globalThis.customElements) {
  const card = document.createElement("toolgate-card");
  document.body.append(card);
  new View(window, card).start().catch((e) => console.error("toolgate view:", e));
}
void ToolgateCard; // the import defines <toolgate-card>

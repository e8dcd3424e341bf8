// <toolgate-card>: a tool call's answer as a person sees it (docs/browser.md,
// `<toolgate-card>`).
//
//   import "https://gateway.example/toolgate/card.js";
//   const card = document.createElement("toolgate-card");
//   card.gateway = "https://gateway.example/toolgate";
//   card.getToken = async () => callerToken;   // optional
//   card.identity = { user, install };         // optional, without a token
//   card.device = "laptop";                    // optional
//   card.embedOrigins = ["https://app.example"]; // optional: the only origins framed
//   card.answer = await (await fetch(...)).json();
//
// A done answer shows its card channel: markdown rendered with raw HTML
// escaped and only absolute http(s) and mailto links, or the embed in a
// sandboxed iframe sized by its {__kazzle_height} messages, or the content
// as text. An action-required card shows its buttons, Skip and Cancel, and
// resumes the call when one is pressed; an approval card (one with
// `approval`) also shows the input the call would send, when the question
// lapses, and "Approve with changes": a form for the input (form.js) whose
// submit resumes with the approve button and the changed input. A button
// with a url is a link (only an absolute http(s) one: any other is a
// disabled button) that opens in a new window and resumes nothing; on a
// connect card (one with `connection`, docs/connections.md) the card then
// asks the gateway for the call every 2 s while the page is visible, until
// the link expires, and shows its answer once the callback ran it; "I've
// connected — continue" resumes with the link's button (the call runs, or a
// new card brings a fresh link). A call still running is polled until it
// settles. The element fires toolgate.card.resolved (detail: the
// done answer it obtained), toolgate.card.error (detail: {status, code,
// message}) and toolgate.card.embedsize (detail: {height}, the px its embed
// was given), all bubbling out of the shadow root.
//
// A page that is not the gateway's caller (the MCP Apps view, mcpapp/) sets
// instead:
//   card.resume = async (answer, choice) => nextAnswer; // choice: {buttonId, input?} or {action}
//   card.embedMaxShare = 0;  // the host sizes the page to its content: no viewport cap
// and leaves gateway unset: without one nothing is polled.
//
// It renders into an open shadow root. Theme it with the custom properties
// below (--toolgate-card-*) and the parts: card, title, body, markdown,
// content, error, embed, progress, notice, actions, button (and the
// button's variant, e.g. button danger), link (a button that is a link, also
// named button and its variant), continue (a connect card's "I've connected
// — continue", also named button), approval, sent, expires, changes; a card
// showing an embed has its card and title parts also named embedded.
import { Marked } from "./marked.js";
import { buildForm } from "./form.js";

/** The share of the viewport an embed may take, at most (docs/browser.md). */
export const EMBED_MAX_SHARE = 0.7;

/**
 * The most px an embed may take however it is capped: without a viewport
 * share (the MCP Apps view), an embed asking for a billion px must not
 * get them.
 */
export const EMBED_MAX_PX = 10000;

/** The polling delays for a call in flight, in ms: from first to last. */
const POLL_FIRST = 500;
const POLL_MAX = 5000;

/** How often a connect card whose link was opened asks for its call, in ms. */
export const CONNECT_POLL = 2000;

/** How long a connect card waits when its card gives no expiry, in ms. */
const CONNECT_WAIT = 10 * 60 * 1000;

const escapes = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** escapeHTML makes text safe in HTML text and quoted attributes. */
export function escapeHTML(s) {
  return String(s).replace(/[&<>"']/g, (c) => escapes[c]);
}

const linkSchemes = new Set(["http:", "https:", "mailto:"]);

/**
 * safeURL returns the URL as a link may carry it, or "" when it may not be
 * a link: only absolute http, https and mailto URLs are (a relative URL
 * would resolve against whatever page shows the card).
 */
export function safeURL(href) {
  let u;
  try {
    u = new URL(String(href));
  } catch {
    return "";
  }
  if (!linkSchemes.has(u.protocol)) return "";
  if (u.protocol !== "mailto:" && !u.host) return "";
  return u.href;
}

/**
 * linkURL is the URL a card's link button may open: an absolute http(s)
 * URL only; "" for anything else (javascript:, data:, mailto:, relative),
 * which the card shows as a disabled button.
 */
export function linkURL(href) {
  if (typeof href !== "string") return "";
  let u;
  try {
    u = new URL(href);
  } catch {
    return "";
  }
  if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.host) return "";
  return u.href;
}

/**
 * frameURL is the URL a card frames for an embedUrl: an absolute http(s)
 * URL only, and, when the page gave origins (card.embedOrigins), only on
 * one of them; "" for anything else (javascript:, data:, blob:, a host
 * the page did not name), which the card then shows as its content text.
 */
export function frameURL(href, origins) {
  let u;
  try {
    u = new URL(String(href));
  } catch {
    return "";
  }
  if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.host) return "";
  if (origins == null) return u.href;
  if (!Array.isArray(origins)) return "";
  for (const o of origins) {
    try {
      const want = new URL(String(o));
      if ((want.protocol === "http:" || want.protocol === "https:") && want.origin === u.origin) return u.href;
    } catch {
      // not an origin: never matches
    }
  }
  return "";
}

/**
 * The markdown renderer: CommonMark with GitHub's extensions, raw HTML
 * shown as text, links only to safe URLs (in a new tab, without opener or
 * referrer), images as links to them (a card loads nothing by itself).
 */
const markdown = new Marked({
  gfm: true,
  async: false,
  renderer: {
    html({ text }) {
      return escapeHTML(text);
    },
    link({ href, title, tokens }) {
      const text = this.parser.parseInline(tokens);
      const url = safeURL(href);
      if (!url) return text;
      const t = title ? ` title="${escapeHTML(title)}"` : "";
      return `<a href="${escapeHTML(url)}"${t} target="_blank" rel="noopener noreferrer">${text}</a>`;
    },
    image({ href, text }) {
      const url = safeURL(href);
      const alt = escapeHTML(text || href);
      if (!url) return alt;
      return `<a href="${escapeHTML(url)}" target="_blank" rel="noopener noreferrer">${alt}</a>`;
    },
  },
});

/** markdownHTML renders markdown to HTML by the rules above. */
export function markdownHTML(src) {
  return markdown.parse(String(src ?? ""));
}

// What the renderer writes, and nothing else: a second line of defence, on
// the parsed DOM, should the library ever write a tag or attribute it was
// not asked to.
const allowedTags = new Set([
  "A", "P", "BR", "HR", "EM", "STRONG", "DEL", "CODE", "PRE", "BLOCKQUOTE", "UL", "OL", "LI",
  "H1", "H2", "H3", "H4", "H5", "H6", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD", "INPUT",
]);
const allowedAttrs = {
  A: ["href", "title", "target", "rel"],
  CODE: ["class"],
  OL: ["start"],
  TH: ["align"],
  TD: ["align"],
  INPUT: ["type", "checked", "disabled"],
};

/** sanitize keeps only allowed elements and attributes under root. */
function sanitize(root) {
  for (const el of [...root.querySelectorAll("*")]) {
    if (!allowedTags.has(el.tagName) || (el.tagName === "INPUT" && el.getAttribute("type") !== "checkbox")) {
      el.replaceWith(document.createTextNode(el.textContent));
      continue;
    }
    const keep = allowedAttrs[el.tagName] ?? [];
    for (const a of [...el.attributes]) {
      if (!keep.includes(a.name)) el.removeAttribute(a.name);
    }
    if (el.tagName === "A") {
      const url = safeURL(el.getAttribute("href"));
      if (!url) {
        el.replaceWith(...el.childNodes);
        continue;
      }
      el.setAttribute("target", "_blank");
      el.setAttribute("rel", "noopener noreferrer");
    }
    if (el.tagName === "INPUT") el.setAttribute("disabled", "");
  }
}

/** renderMarkdown returns a fragment of the markdown, safe to insert. */
export function renderMarkdown(src) {
  const t = document.createElement("template");
  t.innerHTML = markdownHTML(src);
  sanitize(t.content);
  return t.content;
}

/**
 * visible shows the characters a person cannot see, or that reorder what
 * they see, as \u escapes: controls other than line break and tab,
 * format characters (bidi overrides, zero-width ones) and line and
 * paragraph separators. An approval shows the model's input, which may
 * carry them to make one value look like another.
 */
export function visible(s) {
  return String(s).replace(/(?![\n\t])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, (c) => {
    const hex = c.codePointAt(0).toString(16).toUpperCase();
    return hex.length <= 4 ? `\\u${hex.padStart(4, "0")}` : `\\u{${hex}}`;
  });
}

const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * approvalRows is an approval's input as a person reads it: one
 * {name, value} of text per property, a nested value as compact JSON
 * (the whole input as one row "input" when it is no object), with what
 * cannot be seen made visible.
 */
export function approvalRows(input) {
  if (input === undefined) return [];
  const text = (v) => visible(typeof v === "string" ? v : JSON.stringify(v) ?? String(v));
  if (!isPlainObject(input)) return [{ name: "input", value: text(input) }];
  return Object.entries(input).map(([k, v]) => ({ name: visible(k), value: text(v) }));
}

/**
 * expiresText says when an approval lapses, relative to now (ms):
 * "expires in 23 h", "expired 5 min ago"; "" when expires is no time.
 * The time left is rounded down: a card never promises more than it has.
 */
export function expiresText(expires, now) {
  const t = typeof expires === "string" ? Date.parse(expires) : NaN;
  if (!Number.isFinite(t)) return "";
  const left = t - now;
  const span = (ms) => {
    const min = Math.floor(ms / 60000);
    if (min < 1) return "less than a minute";
    if (min < 60) return `${min} min`;
    const h = Math.floor(min / 60);
    if (h < 48) return `${h} h`;
    return `${Math.floor(h / 24)} days`;
  };
  return left > 0 ? `expires in ${span(left)}` : `expired ${span(-left)} ago`;
}

/**
 * embedHeight is the height an embed gets for the height it asked for:
 * at most share of the viewport (no share, 0 or less: no viewport cap)
 * and EMBED_MAX_PX, at least 1 px; null for a request that is no finite
 * number.
 */
export function embedHeight(asked, viewport, share = EMBED_MAX_SHARE) {
  if (typeof asked !== "number" || !Number.isFinite(asked)) return null;
  let cap = EMBED_MAX_PX;
  if (typeof share === "number" && share > 0) cap = Math.min(cap, Math.max(1, Math.floor(viewport * share)));
  return Math.min(cap, Math.max(1, Math.round(asked)));
}

const style = `
:host { display: block; font: var(--toolgate-card-font, 14px/1.45 system-ui, sans-serif);
  color: var(--toolgate-card-color, #1f2328); }
.card { border: 1px solid var(--toolgate-card-border, #d0d7de); border-radius: var(--toolgate-card-radius, 8px);
  background: var(--toolgate-card-background, #fff); padding: 10px 12px; }
.card.error { border-color: var(--toolgate-card-danger, #cf222e); }
.title { font-size: 1.05em; font-weight: 600; margin: 0 0 6px; }
.content { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
.error-text { color: var(--toolgate-card-danger, #cf222e); white-space: pre-wrap; margin: 0; }
.markdown > :first-child { margin-top: 0; } .markdown > :last-child { margin-bottom: 0; }
.markdown a { color: var(--toolgate-card-accent, #0969da); }
.markdown pre { overflow: auto; background: #f6f8fa; padding: 8px; border-radius: 6px; }
iframe { display: block; width: 100%; border: 0; height: 150px; }
.actions { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 10px; }
button, a.link { font: inherit; padding: 4px 12px; border-radius: 6px; cursor: pointer;
  border: 1px solid var(--toolgate-card-border, #d0d7de); background: var(--toolgate-card-button, #f6f8fa); color: inherit; }
a.link { display: inline-block; text-decoration: none; }
button.primary, a.link.primary { background: var(--toolgate-card-accent, #0969da); border-color: transparent; color: #fff; }
button.danger, a.link.danger { background: var(--toolgate-card-danger, #cf222e); border-color: transparent; color: #fff; }
button:disabled { opacity: .5; cursor: not-allowed; }
button.continue { background: none; border-color: transparent; padding: 4px 6px; font-size: .9em;
  color: var(--toolgate-card-accent, #0969da); text-decoration: underline; }
.notice, .progress { color: var(--toolgate-card-muted, #57606a); margin: 8px 0 0; }
.notice.failed { color: var(--toolgate-card-danger, #cf222e); }
.approval { margin: 8px 0 0; }
.approval p { margin: 0 0 4px; }
.sent { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 10px; margin: 0; }
.sent dt { font-family: ui-monospace, monospace; color: var(--toolgate-card-muted, #57606a); overflow-wrap: anywhere; }
.sent dd { margin: 0; font-family: ui-monospace, monospace; white-space: pre-wrap; overflow-wrap: anywhere;
  max-height: 12em; overflow: auto; }
.expires { color: var(--toolgate-card-muted, #57606a); }
form.changes { margin-top: 10px; }
.changes fieldset { border: 0; margin: 0; padding: 0; min-width: 0; }
.changes .field { display: grid; grid-template-columns: 8em minmax(0, 1fr); gap: 2px 8px; align-items: center; margin: 0 0 6px; }
.changes .field label { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
.changes .field .required, .changes .field .hint, .changes .hint { grid-column: 2; font-size: .85em;
  color: var(--toolgate-card-muted, #57606a); margin: 0; }
.changes p.hint { margin: 0 0 6px; }
.changes input, .changes select, .changes textarea { font: inherit; padding: 2px 6px; min-width: 0; }
.changes fieldset fieldset { border: 1px solid var(--toolgate-card-border, #d0d7de); border-radius: 6px; padding: 4px 8px; margin: 0 0 6px; }
`;

const Base = globalThis.HTMLElement ?? class {};

export class ToolgateCard extends Base {
  #answer = null;
  #device = "";
  #generation = 0; // bumped by every render: late replies to an old one are dropped
  #timer = 0;
  #embed = null; // {frame, asked}
  #busy = false; // a resume in flight: no second one
  #wait = null; // a connect card whose link was opened: {until (ms), asking}
  #root;

  // gateway (the gateway's base URL), getToken (optional async () =>
  // caller token), identity (optional {user, install}, sent when there
  // is no token), resume (optional, see above), embedMaxShare (optional,
  // EMBED_MAX_SHARE when unset) and embedOrigins (optional: the origins
  // an embed may be framed from; unset, any http(s) one) are plain properties: no field
  // initializers, which would overwrite the values a page set before the
  // element was upgraded.

  constructor() {
    super();
    this.#root = this.attachShadow({ mode: "open" });
    this.onMessage = this.onMessage.bind(this);
    this.onResize = this.onResize.bind(this);
    this.onVisibility = this.onVisibility.bind(this);
    // answer and device, set before the upgrade, shadow their accessors.
    for (const name of ["device", "answer"]) {
      if (Object.hasOwn(this, name)) {
        const v = this[name];
        delete this[name];
        this[name] = v;
      }
    }
  }

  connectedCallback() {
    window.addEventListener("message", this.onMessage);
    window.addEventListener("resize", this.onResize);
    document.addEventListener("visibilitychange", this.onVisibility);
    if (this.#answer && !this.#timer && inFlight(this.#answer) && this.gateway) this.#poll(this.#generation, POLL_FIRST);
    this.onVisibility();
  }

  disconnectedCallback() {
    window.removeEventListener("message", this.onMessage);
    window.removeEventListener("resize", this.onResize);
    document.removeEventListener("visibilitychange", this.onVisibility);
    clearTimeout(this.#timer);
    this.#timer = 0;
  }

  get answer() {
    return this.#answer;
  }

  set answer(a) {
    this.#answer = a ?? null;
    this.#render();
  }

  get device() {
    return this.#device;
  }

  set device(d) {
    this.#device = d ?? "";
    if (this.#answer?.status === "action_required") this.#render();
  }

  /** The height messages of this card's embed, from its window only. */
  onMessage(e) {
    const embed = this.#embed;
    if (!embed || e.source !== embed.frame.contentWindow) return;
    const d = e.data;
    if (d === null || typeof d !== "object" || !Object.hasOwn(d, "__kazzle_height")) return;
    const h = embedHeight(d.__kazzle_height, window.innerHeight, this.#share());
    if (h === null) return;
    embed.asked = d.__kazzle_height;
    this.#sizeEmbed(embed.frame, h);
  }

  /**
   * A connect card waiting for its call asks again as soon as the page
   * is shown (and the card is in it): the person is likely back from the
   * service's window.
   */
  onVisibility() {
    const w = this.#wait;
    if (!w || w.asking || this.#timer || !this.isConnected || document.visibilityState === "hidden") return;
    this.#watch(this.#generation, 0);
  }

  onResize() {
    const embed = this.#embed;
    if (!embed || embed.asked === null) return;
    this.#sizeEmbed(embed.frame, embedHeight(embed.asked, window.innerHeight, this.#share()));
  }

  #share() {
    return this.embedMaxShare ?? EMBED_MAX_SHARE;
  }

  #sizeEmbed(frame, h) {
    frame.style.height = `${h}px`;
    this.dispatchEvent(new CustomEvent("toolgate.card.embedsize", { detail: { height: h }, bubbles: true, composed: true }));
  }

  #render() {
    const gen = ++this.#generation;
    clearTimeout(this.#timer);
    this.#timer = 0;
    this.#embed = null;
    this.#busy = false;
    this.#wait = null;
    const root = this.#root;
    root.replaceChildren();
    const a = this.#answer;
    if (!a) return;

    const sheet = document.createElement("style");
    sheet.textContent = style;
    const card = el("section", { part: "card", class: "card", role: "region", "aria-labelledby": "title" });
    root.append(sheet, card);
    const title = el("h3", { part: "title", class: "title", id: "title" });
    card.append(title);
    const body = el("div", { part: "body", class: "body" });
    card.append(body);

    if (a.status === "action_required" && a.card && typeof a.card === "object") {
      title.textContent = String(a.card.title ?? a.tool ?? "");
      this.#renderCard(card, body, a);
      return;
    }
    title.textContent = String(a.tool ?? "");
    if (inFlight(a)) {
      body.append(el("p", { part: "progress", class: "progress", role: "status" },
        a.status === "awaiting_client" ? "Waiting for the page to run it…" : "Running…"));
      card.setAttribute("aria-busy", "true");
      // Without a gateway there is nothing to ask (the MCP Apps view gets
      // only settled or action-required answers).
      if (this.isConnected && this.gateway) this.#poll(gen, POLL_FIRST);
      return;
    }
    if (a.isError) {
      card.classList.add("error");
      body.append(el("p", { part: "error", class: "error-text" }, String(a.content ?? "")));
      return;
    }
    const src = a.card === "embed" ? frameURL(a.embedUrl, this.embedOrigins) : "";
    if (src) {
      // "embedded" lets a page draw the embed without the card's chrome
      // (::part(card embedded), ::part(title embedded)).
      card.setAttribute("part", "card embedded");
      title.setAttribute("part", "title embedded");
      const frame = el("iframe", {
        part: "embed",
        sandbox: "allow-scripts allow-forms allow-popups",
        referrerpolicy: "no-referrer",
        title: String(a.tool ?? "embed"),
        src,
      });
      this.#embed = { frame, asked: null };
      body.append(frame);
      return;
    }
    if (a.card === "markdown" && typeof a.markdown === "string") {
      const m = el("div", { part: "markdown", class: "markdown" });
      m.append(renderMarkdown(a.markdown));
      body.append(m);
      return;
    }
    body.append(el("p", { part: "content", class: "content" }, String(a.content ?? "")));
  }

  #renderCard(card, body, a) {
    const c = a.card;
    if (typeof c.description === "string" && c.description) {
      const m = el("div", { part: "markdown", class: "markdown" });
      m.append(renderMarkdown(c.description));
      body.append(m);
    }
    const approval = isPlainObject(c.approval) ? c.approval : null;
    if (approval) body.append(approvalView(approval));
    const connection = isPlainObject(c.connection) ? c.connection : null;
    if (connection) {
      const expires = expiresText(connection.expires, Date.now());
      if (expires) {
        const p = el("p", { part: "expires", class: "expires" }, `The link ${expires}.`);
        p.title = new Date(Date.parse(connection.expires)).toISOString();
        body.append(p);
      }
    }
    const computer = c.assignee && typeof c.assignee === "object" ? c.assignee.computerId : undefined;
    const elsewhere = typeof computer === "string" && computer !== "" && computer !== this.#device;
    const actions = el("div", { part: "actions", class: "actions" });
    const shown = []; // the controls in their order
    const buttons = [];
    // What a press disables while it is in flight: the buttons, and the
    // fields of "Approve with changes" once they are open. A link is not
    // disabled: opening it again resumes nothing.
    const ui = { buttons, notice: null, fields: null, error: null };
    let approve = false;
    let link = null; // the first link button: what "continue" presses
    for (const b of Array.isArray(c.elements) ? c.elements : []) {
      if (!b || b.type !== "button" || typeof b.id !== "string") continue;
      const variant = typeof b.variant === "string" && /^[a-z][a-z0-9-]{0,31}$/.test(b.variant) ? b.variant : "";
      const label = String(b.label ?? b.id);
      if (b.url !== undefined) {
        link ??= b;
        const url = linkURL(b.url);
        const attrs = { part: variant ? `button link ${variant}` : "button link", class: variant ? `link ${variant}` : "link" };
        if (!url || elsewhere) {
          // Not a URL a card opens (javascript:, data:, …), or not on this
          // device: shown, and never pressed.
          const btn = el("button", { type: "button", ...attrs }, label);
          btn.disabled = true;
          if (!url) btn.title = "This link cannot be opened.";
          buttons.push(btn);
          shown.push(btn);
          continue;
        }
        const a = el("a", { ...attrs, href: url, target: "_blank", rel: "noopener noreferrer" }, label);
        a.addEventListener("click", () => this.#opened(connection, ui.notice));
        shown.push(a);
        continue;
      }
      const btn = el("button", { type: "button", part: variant ? `button ${variant}` : "button", class: variant }, label);
      btn.disabled = elsewhere;
      btn.addEventListener("click", () => this.#resume({ buttonId: b.id }, ui));
      buttons.push(btn);
      shown.push(btn);
      if (b.id === "approve") approve = true;
    }
    if (connection && link) {
      // The link was opened elsewhere, its window closed before the end,
      // or it expired: the call goes on, or a new card brings a new link.
      const btn = el("button", { type: "button", part: "button continue", class: "continue" }, "I've connected — continue");
      btn.disabled = elsewhere;
      btn.addEventListener("click", () => this.#resume({ buttonId: link.id }, ui));
      buttons.push(btn);
      shown.push(btn);
    }
    if (approval && approve) {
      // Approving with changes is the approve button with the changed input.
      const btn = el("button", { type: "button", part: "button changes", class: "changes", "aria-expanded": "false" },
        "Approve with changes");
      btn.disabled = elsewhere;
      btn.addEventListener("click", () => this.#toggleChanges(card, actions, btn, approval, ui));
      buttons.push(btn);
      shown.push(btn);
    }
    for (const [action, label] of [["skip", "Skip"], ["cancel", "Cancel"]]) {
      const btn = el("button", { type: "button", part: `button ${action}`, class: action }, label);
      btn.addEventListener("click", () => this.#resume({ action }, ui));
      buttons.push(btn);
      shown.push(btn);
    }
    actions.append(...shown);
    card.append(actions);
    const notice = el("p", { part: "notice", class: "notice", role: "status" });
    ui.notice = notice;
    if (elsewhere) notice.textContent = `Continue on ${computer}`;
    card.append(notice);
    // Remember which were disabled for another device: a failed press
    // enables only the others again.
    for (const b of buttons) b.dataset.held = b.disabled ? "1" : "";
  }

  /**
   * toggleChanges opens or closes the form of "Approve with changes",
   * built the first time from the tool's schema and filled with the input
   * the call would send. Its submit resumes as the approve button does,
   * with the input read from the form; a refusal shows in the form, which
   * stays open.
   */
  #toggleChanges(card, actions, toggle, approval, ui) {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    let form = card.querySelector("form.changes");
    if (form) {
      form.hidden = !open;
      return;
    }
    form = el("form", { part: "changes", class: "changes", id: "changes", "aria-label": "Approve with changes", novalidate: "" });
    toggle.setAttribute("aria-controls", "changes");
    const built = buildForm(approval.schema, { document, idPrefix: "change", value: approval.input });
    const fields = el("fieldset");
    fields.append(built.element);
    const error = el("p", { part: "error", class: "error-text", role: "alert" });
    const send = el("button", { type: "button", part: "button primary", class: "primary" }, "Approve with these changes");
    const submit = async () => {
      if (this.#busy) return;
      error.textContent = "";
      if (!form.reportValidity()) return;
      let input;
      try {
        input = built.read();
      } catch (e) {
        error.textContent = String(e?.message ?? e); // nothing is sent
        return;
      }
      await this.#resume({ buttonId: "approve", input }, ui, error);
    };
    // A button, not a submit: a sandboxed frame (the MCP Apps view) may
    // not submit forms, and Enter in a field comes here as well.
    send.addEventListener("click", submit);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      submit();
    });
    if (!built.fitted) {
      form.append(el("p", { class: "hint" }, "The input does not fit the tool's schema: change it as JSON."));
    }
    const row = el("div", { class: "actions" });
    row.append(send);
    form.append(fields, error, row);
    ui.buttons.push(send);
    send.dataset.held = "";
    ui.fields = fields;
    actions.after(form);
  }

  /**
   * resume answers the card with choice; ui's buttons and fields are
   * disabled until the answer comes. A refusal shows in where (the form
   * of "Approve with changes") or else in the notice, and the controls
   * come back.
   */
  async #resume(choice, ui, where) {
    if (this.#busy) return;
    this.#busy = true;
    const { buttons, notice } = ui;
    const a = this.#answer;
    const gen = this.#generation;
    for (const b of buttons) b.disabled = true;
    if (ui.fields) ui.fields.disabled = true;
    notice.classList.remove("failed");
    const body = { ...choice };
    if (this.#device) body.device = this.#device;
    const r = typeof this.resume === "function"
      ? await this.#resumeBy(this.resume, a, body)
      : await this.#request("POST", `calls/${encodeURIComponent(a.callId)}/resume`, body);
    if (gen !== this.#generation) return;
    if (r.answer) {
      this.#settled(r.answer);
      return;
    }
    this.#busy = false;
    for (const b of buttons) b.disabled = b.dataset.held === "1";
    if (ui.fields) ui.fields.disabled = false;
    if (where) {
      where.textContent = r.error.message;
    } else {
      notice.classList.add("failed");
      notice.textContent = r.error.message;
    }
    this.#fail(r.error);
  }

  /**
   * resumeBy resumes through the page's own function: {answer} for the
   * answer it resolves to, {error} when it rejects or resolves to no
   * answer.
   */
  async #resumeBy(resume, answer, choice) {
    try {
      const next = await resume(answer, choice);
      if (next && typeof next === "object" && typeof next.status === "string") return { answer: next };
      return { error: { status: 0, code: "bad_answer", message: "the call's answer could not be read" } };
    } catch (e) {
      const code = typeof e?.code === "string" ? e.code : "resume_failed";
      return { error: { status: 0, code, message: String(e?.message ?? e) } };
    }
  }

  /**
   * opened follows a press of a link button: on a connect card with a
   * gateway to ask, the card waits for its call to go on (the service's
   * callback runs it) until the link expires; the notice says what to do.
   */
  #opened(connection, notice) {
    if (!connection || !notice) return;
    const title = String(connection.title ?? connection.name ?? "the service");
    notice.classList.remove("failed");
    const now = Date.now();
    const t = typeof connection.expires === "string" ? Date.parse(connection.expires) : NaN;
    // A link lives ten minutes: a card that claims more is not waited on longer.
    const until = Math.min(Number.isFinite(t) ? t : Infinity, now + CONNECT_WAIT);
    if (until <= now) {
      this.#expired(notice);
      return;
    }
    if (!this.gateway) {
      notice.textContent = `Connect ${title} in the window that opened, then press “I've connected — continue”.`;
      return;
    }
    notice.textContent = `Connect ${title} in the window that opened: the call goes on by itself.`;
    if (this.#wait) return; // asking already
    this.#wait = { until, asking: false };
    this.#watch(this.#generation, CONNECT_POLL);
  }

  #watch(gen, delay) {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#check(gen), delay);
  }

  /**
   * check asks for the call of a connect card whose link was opened, and
   * shows its answer once it is no longer this card: done, or another
   * card (a new link, or the tool's own). A hidden page asks nothing until
   * it is shown again (onVisibility).
   */
  async #check(gen) {
    this.#timer = 0;
    const w = this.#wait;
    if (gen !== this.#generation || !w || !this.isConnected) return;
    const notice = this.#root.querySelector(".notice");
    if (Date.now() >= w.until) {
      this.#wait = null;
      this.#expired(notice);
      return;
    }
    if (document.visibilityState === "hidden") return;
    const a = this.#answer;
    w.asking = true;
    const r = await this.#request("GET", `calls/${encodeURIComponent(a.callId)}`);
    w.asking = false;
    if (gen !== this.#generation || this.#wait !== w) return;
    if (r.answer) {
      if (r.answer.status !== "action_required" || linkOf(r.answer.card) !== linkOf(a.card)) {
        this.#settled(r.answer);
        return;
      }
    } else if (r.error.status !== 0) {
      // Refused (the call is gone, the token expired): asking again would
      // be refused again. The network failing is tried again.
      this.#wait = null;
      if (notice) {
        notice.classList.add("failed");
        notice.textContent = r.error.message;
      }
      this.#fail(r.error);
      return;
    }
    if (this.isConnected) this.#watch(gen, CONNECT_POLL);
  }

  #expired(notice) {
    if (!notice) return;
    notice.classList.remove("failed");
    notice.textContent = "The link has expired: press “I've connected — continue” to go on, or to get a new link.";
  }

  #poll(gen, delay) {
    this.#timer = setTimeout(async () => {
      this.#timer = 0;
      const a = this.#answer;
      const r = await this.#request("GET", `calls/${encodeURIComponent(a.callId)}`);
      if (gen !== this.#generation || !this.isConnected) return;
      if (r.answer) {
        if (inFlight(r.answer)) {
          this.#poll(gen, Math.min(POLL_MAX, delay * 1.5));
          return;
        }
        this.#settled(r.answer);
        return;
      }
      if (r.error.status === 0) {
        // The network failed, not the call: try again, later.
        this.#poll(gen, POLL_MAX);
        return;
      }
      const p = this.#root.querySelector(".progress");
      if (p) {
        p.classList.add("failed");
        p.textContent = r.error.message;
      }
      this.#root.querySelector(".card")?.removeAttribute("aria-busy");
      this.#fail(r.error);
    }, delay);
  }

  /** settled shows an answer the gateway gave, and tells when it is final. */
  #settled(answer) {
    this.answer = answer;
    if (answer.status === "done") {
      this.dispatchEvent(new CustomEvent("toolgate.card.resolved", { detail: answer, bubbles: true, composed: true }));
    }
  }

  #fail(detail) {
    this.dispatchEvent(new CustomEvent("toolgate.card.error", { detail, bubbles: true, composed: true }));
  }

  /**
   * request calls the gateway and returns {answer} for a call's answer, or
   * {error: {status, code, message}}: the gateway's JSON error, or status
   * 0 when the network failed.
   */
  async #request(method, path, body) {
    const headers = {};
    let token = "";
    if (typeof this.getToken === "function") {
      try {
        token = String((await this.getToken()) ?? "");
      } catch (e) {
        return { error: { status: 0, code: "no_token", message: `no caller token: ${e?.message ?? e}` } };
      }
    }
    let url = String(this.gateway ?? "").replace(/\/+$/, "") + "/" + path;
    if (token) {
      headers.Authorization = `Bearer ${token}`;
    } else if (this.identity?.user) {
      if (method === "GET") {
        const q = new URLSearchParams({ user: this.identity.user });
        if (this.identity.install) q.set("install", this.identity.install);
        url += `?${q}`;
      } else {
        body = { ...body, identity: { user: this.identity.user, install: this.identity.install || undefined } };
      }
    }
    if (body) headers["Content-Type"] = "application/json";
    let res;
    try {
      res = await fetch(url, { method, headers, body: body ? JSON.stringify(body) : undefined });
    } catch (e) {
      return { error: { status: 0, code: "network", message: `the gateway could not be reached: ${e?.message ?? e}` } };
    }
    let data = null;
    try {
      data = await res.json();
    } catch {
      // Not JSON: the message below says what came back.
    }
    if (res.ok && data && typeof data === "object" && typeof data.status === "string") return { answer: data };
    // The gateway's errors are {"error": {"code", "message"}}.
    const e = data?.error;
    return {
      error: {
        status: res.status,
        code: typeof e?.code === "string" ? e.code : `http_${res.status}`,
        message: typeof e?.message === "string" ? e.message : `the gateway answered ${res.status}`,
      },
    };
  }
}

/**
 * approvalView shows what an approval would send: the tool, the input's
 * fields, and when the question lapses. Everything in it is text: the
 * input is the model's.
 */
function approvalView(approval) {
  const box = el("div", { part: "approval", class: "approval" });
  const tool = typeof approval.tool === "string" ? visible(approval.tool) : "";
  box.append(el("p", { id: "sent-label" }, tool ? `Sent to ${tool}:` : "What will be sent:"));
  const rows = approvalRows(approval.input);
  const dl = el("dl", { part: "sent", class: "sent", "aria-labelledby": "sent-label" });
  for (const { name, value } of rows) dl.append(el("dt", {}, name), el("dd", {}, value));
  if (rows.length === 0) dl.append(el("dd", {}, "(no input)"));
  box.append(dl);
  const expires = expiresText(approval.expires, Date.now());
  if (expires) {
    const p = el("p", { part: "expires", class: "expires" }, expires);
    const t = new Date(Date.parse(approval.expires));
    p.title = t.toISOString();
    box.append(p);
  }
  return box;
}

/** linkOf is the url of a card's first link button, "" when it has none. */
function linkOf(card) {
  const b = Array.isArray(card?.elements) ? card.elements.find((e) => e && e.url !== undefined) : undefined;
  return b ? String(b.url) : "";
}

/** inFlight reports whether an answer is of a call not yet settled. */
function inFlight(a) {
  return a?.status === "running" || a?.status === "awaiting_client";
}

/** el makes an element with attributes and text. */
function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== "") e.setAttribute(k, v);
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

if (globalThis.customElements && !customElements.get("toolgate-card")) {
  customElements.define("toolgate-card", ToolgateCard);
}

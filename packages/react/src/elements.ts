// The two elements this package wraps, and the types of what they expose.
//
// The elements are the gateway's own files (internal/web/client.js and
// card.js, with the form.js and marked.js card.js imports), copied into dist/elements/
// at build time and imported here for their side effect: each defines its
// element only when no element of that name is defined yet, so a page that
// also loads the gateway's /client.js or /card.js keeps one definition, and
// the components below work with whichever came first. They are plain
// JavaScript, so their surface is declared here by hand.
import "./elements/client.js";
import "./elements/card.js";

/** A client tool call as the element hands it over (docs/browser.md, `<toolgate-client>`). */
export interface ClientToolCall {
  /** The call id: each id runs once. */
  id: string;
  /** The tool's name. */
  name: string;
  /** The input the agent sent, valid for the tool's input schema. */
  input: any;
}

/** `toolgate.tool.change`: `start` before a handler runs, `end` once the gateway has its result. */
export interface ToolChange {
  id: string;
  name: string;
  status: "start" | "end";
  isError?: boolean;
}

/** `toolgate.log`: what the client did that the page may want to know. */
export interface ToolgateLog {
  level: "info" | "warn" | "error";
  message: string;
  data?: unknown;
}

/** Gives a page token for the thread: a JWT the app mints for its user and this thread. */
export type GetToken = () => string | Promise<string>;

/** `<toolgate-client>`'s options: where the gateway is mounted and which thread this page is. */
export interface ClientOptions {
  api: { url: string; getToken?: GetToken };
  threadId: string;
  /** The client tools this page implements: calls of others are left for a page of the thread that does. Default: all. */
  tools?: string[];
}

/** The surface of `<toolgate-client>` (internal/web/client.js). */
export interface ToolgateClientElement extends HTMLElement {
  onClientTool: ((call: ClientToolCall) => unknown) | null;
  setOptions(options: { api: { url: string; getToken: GetToken }; threadId: string; tools?: string[] }): void;
  setReadable(name: string, value: unknown): void;
  removeReadable(name: string): boolean;
  pageContext(): Array<{ name: string; value: unknown }>;
  close(): void;
}

/** A tool call's answer, as `POST /tools/{name}` or `GET /calls/{id}` give it. */
export interface Answer {
  callId: string;
  tool: string;
  status: "done" | "action_required" | "running" | "awaiting_client";
  isError?: boolean;
  content?: string;
  markdown?: string;
  embedUrl?: string;
  card?: unknown;
  [key: string]: unknown;
}

/** What `toolgate.card.error` carries: the gateway's error, or status 0 when it was not reached. */
export interface CardError {
  status: number;
  code: string;
  message: string;
}

/** The identity a card resumes as in loopback mode, when there is no caller token. */
export interface Identity {
  user: string;
  install?: string;
}

/** A card's press: one of its buttons, or Skip or Cancel. */
export type CardChoice = { buttonId: string } | { action: "skip" | "cancel" };

/** The surface of `<toolgate-card>` (internal/web/card.js). */
export interface ToolgateCardElement extends HTMLElement {
  answer: Answer | null;
  gateway: string | undefined;
  getToken: (() => string | Promise<string>) | undefined;
  identity: Identity | undefined;
  device: string;
  /** Answers a press instead of POST calls/{id}/resume (a page that is not the gateway's caller, such as the MCP Apps view); it returns the next answer. */
  resume: ((answer: Answer, choice: CardChoice) => Promise<Answer>) | undefined;
  /** The share of the viewport an embed may take; 0: no cap but 10,000 px. Default: 0.7. */
  embedMaxShare: number | undefined;
  /** The only origins (scheme://host[:port]) an embed may be framed from; unset, any http(s) one. */
  embedOrigins: string[] | undefined;
}

// The shapes of the toolgate contract: what a tools.ts declares
// (docs/configuration.md, "The manifest format" and "Targets") and what a
// component answers (docs/http-api.md, "Answers and errors" and "Cards:
// pause and resume").

import type { $ZodObject } from 'zod/v4/core';

/** The HTTP methods a target may use. */
export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * The request fields an `app` or `url` target shares. Strings in `query`
 * and `headers` values and anywhere in `body` may hold references:
 * `${input}`, `${input.a.b}`, `${env.NAME}`; `$${…}` is a literal `${…}`.
 * No body is sent unless `body` is set: `body: '${input}'` sends the whole
 * typed input as JSON.
 */
export type RequestSpec = {
  method: Method;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: unknown;
};

/** Where one input property of an OpenAPI operation is sent, and how it is serialized. */
export type OperationParam = {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  /** form, simple, label, matrix, spaceDelimited, pipeDelimited or deepObject. */
  style?: string;
  explode?: boolean;
  allowReserved?: boolean;
  /** The input property holding it, when parameters are grouped by location. */
  group?: string;
};

/**
 * How a target made from an OpenAPI operation sends the input
 * (docs/openapi.md, "The input"): written by `toolgate-tools openapi` and
 * `toolgate openapi --json`, checked by the gateway at load.
 */
export type Operation = {
  params?: readonly OperationParam[];
  body?: { mediaType: string; property: string; group?: string };
  /** How a JSON answer that is not the channels' shape becomes the result. */
  output?: 'object' | 'wrapped';
};

/**
 * A target on one of the app's own components. toolgate knows the
 * component's base URL and sends the identity token in `Authorization`,
 * which `headers` may therefore not set.
 */
export type AppTarget = RequestSpec & {
  type: 'app';
  component: string;
  /** Below the component's base URL; starts with "/". */
  path: string;
  operation?: Operation;
};

/** A target on an external endpoint. */
export type UrlTarget = RequestSpec & {
  type: 'url';
  /** Absolute http(s) URL; references may fill path segments and query values only. */
  url: string;
  /** A component whose env `${env.NAME}` references read. */
  component?: string;
  /** An expression mapping the answer {status, headers, body} into the channels. */
  result?: string;
  operation?: Operation;
};

/** A client tool, run in the user's page. */
export type KazzleTarget = {
  type: 'kazzle';
  name: string;
};

/**
 * A tool of an upstream MCP server that the gateway's config declares
 * (`mcp_server`): the call's input is its arguments.
 */
export type McpTarget = {
  type: 'mcp';
  /** The server's name in the config. */
  server: string;
  /** The tool's name on the server. */
  tool: string;
};

/** Where a call (or a card's button) goes. */
export type Target = AppTarget | UrlTarget | KazzleTarget | McpTarget;

/**
 * Hints for MCP clients. toolgate's manifest knows these four only; a
 * tool's title is its displayName.
 */
export type Annotations = {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
};

/**
 * The gateway's own question before a call runs: the call pauses on a card
 * (Approve, Reject, Approve with changes) until a person answers it or it
 * times out (docs/kits.md, "Approval and limits").
 */
export type Approval = {
  /**
   * An expression (expr-lang, as `allow`) over the call's input and its
   * caller: the call is asked about only when it is true. Default: every call.
   */
  when?: string;
  /** The card's title. Required, not empty. */
  title: string;
  /** The card's text, in markdown. */
  description?: string;
  /**
   * How long the question stays open: whole days ("2d") or a Go duration
   * ("90m", "24h", "1h30m"), from 1s to 30d; unanswered by then, the call
   * is closed as not approved. Default: 24h.
   */
  timeout?: string;
  /**
   * An expression giving the device (its computerId) that must decide.
   * Default: any of the caller's devices.
   */
  assignee?: string;
};

/** One tool of a tools.ts file, compiled by `toolgate-tools build`. */
export type Tool = {
  /** How the model calls the tool: ^[a-zA-Z0-9_-]{1,64}$, unique. */
  name: string;
  /** A short human label for cards and UIs. Default: the name. */
  displayName?: string;
  /** Tells the model what the tool does and when to call it. */
  description: string;
  /**
   * The input, a Zod 4 object schema (classic `z.object` or `zod/mini`);
   * `.strict()` refuses unknown keys, `.describe()` texts reach the model.
   */
  input: $ZodObject;
  target: Target;
  annotations?: Annotations;
  /** A policy expression (expr-lang) over {claims, user, install, tool, context, input}. */
  allow?: string;
  /**
   * Whether MCP clients with the MCP Apps extension show the tool's answers
   * (markdown, embeds, cards) in toolgate's view. Only app targets may;
   * default true for them. `false` keeps them plain MCP results.
   */
  ui?: boolean;
  /**
   * Ask a person before a call runs; not on a client tool (a kazzle
   * target), which runs in the user's own page. Default: no question.
   */
  approval?: Approval;
  /**
   * Quotas counted in calls, each "N/WINDOW per SCOPE" or "N concurrent per
   * SCOPE": "20/1h per user", "1000/1d per install", "5 concurrent per
   * user". N is 1 to 1000000; WINDOW a count and one unit of s, m, h or d
   * (a bare unit is one of it: "20/h"), at most 30d; SCOPE user or install.
   * Two limits of a tool with one window (or both concurrent) and one scope
   * are an error. Default: none.
   */
  limits?: readonly string[];
};

/** A Tool, by the name tools.ts files of the platform the protocol came from use. */
export type KazzleTool = Tool;

/** A tool result's channels (docs/http-api.md, "Answers and errors"). */
export type Result = {
  /** The plain result the model reads. Required. */
  content: string;
  /** A short rich summary for the tool card; raw HTML is escaped, links must be absolute. */
  markdown?: string;
  /** The absolute http(s) URL of a page shown in the card's iframe; wins over markdown on the card. */
  embedUrl?: string;
};

/** A failure the model reads and may act on, answered with a 4xx or 5xx status. */
export type DomainError = {
  code: string;
  error: string;
};

/**
 * One of a card's buttons. Without a target its `input` becomes the tool
 * result when pressed; with one, toolgate runs the target with `${input}`
 * the button's input. The target is an app target on the component that
 * answers the card, with `${input…}` references only.
 */
export type Button = {
  type: 'button';
  id: string;
  label: string;
  /** A class for the button, e.g. "primary" or "danger": ^[a-z][a-z0-9-]{0,31}$. */
  variant?: string;
  input?: unknown;
  target?: AppTarget;
};

/** The device that must press a card's buttons. */
export type Assignee = {
  computerId: string;
};

/** An action-required card: the call pauses until a person answers it (docs/http-api.md, "Cards: pause and resume"). */
export type Card = {
  type: 'action_required';
  title: string;
  description?: string;
  assignee?: Assignee;
  elements: Button[];
};

/** What a handler may answer: plain text, the channels, or a card. */
export type Answer = string | Result | Card;

/**
 * How a person approved a call the gateway paused on its own card
 * (docs/governance.md, "Approvals"), as the Kazzle-Tool-Context header
 * says.
 */
export type ApprovalInfo = {
  /** The user who approved; never empty. */
  by: string;
  /** The device (its computerId) the approval came from, when it named one. */
  device?: string;
  /**
   * When, as sent: an RFC 3339 date-time as Go writes one ("2026-12-02T10:14:03Z",
   * possibly with up to nine fractional digits or an offset). Kept as the
   * string so nothing is lost; `new Date(at)` keeps milliseconds only.
   */
  at: string;
  /** Whether the person changed the input before approving it: the call ran with the changed input. */
  changed: boolean;
};

/**
 * Where a call came from, as the Kazzle-Tool-Context header says. Only a
 * call from a thread can have waited on an approval, so only it may carry
 * one.
 */
export type ToolContext = { source: 'thread'; threadId: string; approval?: ApprovalInfo } | { source: 'api' };

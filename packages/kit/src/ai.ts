// toolgateTools: a gateway's tools as Vercel AI SDK tools (the `ai`
// package, v7). `ai` is an optional peer dependency: it is loaded with a
// dynamic import when toolgateTools runs, so importing '@toolgate/kit'
// never needs it, at run time or in types. The declarations this package
// emits name no type of `ai` either: a project without `ai` would fail on
// them, and the SDK's own need the DOM library and do not compile under
// exactOptionalPropertyTypes (this package's build skips checking them,
// skipLibCheck, as the dynamic import loads them). ToolgateTool is written
// out instead, in the shape an AI SDK tool has; test/ai-types checks that
// it is assignable to the SDK's ToolSet.

import { createHash } from 'node:crypto';
import type { Card, ToolContext } from './types.js';

/** The user and installation a call acts for. */
export type ToolgateIdentity = {
  user: string;
  install?: string;
};

/**
 * Where the gateway is and who is calling. The same object can be spread
 * into toolgateTools, resumeToolgateCall and getToolgateCall.
 */
export type ToolgateConnection = {
  /** The gateway's base URL, where it is mounted: e.g. http://127.0.0.1:8080/toolgate. */
  url: string;
  /**
   * The identity sent in each call's envelope (and, for getToolgateCall,
   * in the query). Required by a gateway without `callers` (loopback trust
   * mode) for app targets; a gateway with `callers` ignores it and takes
   * the identity from the caller token.
   */
  identity?: ToolgateIdentity;
  /** A caller token, sent as `Authorization: Bearer <token>` (gateways with `callers`). */
  token?: string;
  /** More headers for every request; Accept, Content-Type and (with token) Authorization are set over them. */
  headers?: Record<string, string>;
  /** The fetch to use; the global fetch by default. */
  fetch?: typeof globalThis.fetch;
};

export type ToolgateToolsOptions = ToolgateConnection & {
  /**
   * The conversation the calls come from. With a threadId, each call's
   * context is {source: "thread", threadId}, and a tool may pause on an
   * action-required card; without one, calls are {source: "api"}, where a
   * card is an error result.
   */
  threadId?: string;
  /** The context sent with each call, as is; wins over threadId. */
  context?: ToolContext;
  /**
   * Which of the listed tools to give: names (each must be listed; an
   * unknown one throws) or a test on each listed tool. All by default.
   */
  tools?: readonly string[] | ((tool: ToolgateListedTool) => boolean);
};

/** One tool as GET /tools lists it. */
export type ToolgateListedTool = {
  name: string;
  displayName: string;
  description: string;
  input_schema: Record<string, unknown>;
};

/** A finished call: its result. `card` says which channel a card shows. */
export type ToolgateDoneAnswer = {
  callId: string;
  tool: string;
  status: 'done';
  isError: boolean;
  content: string;
  markdown?: string;
  embedUrl?: string;
  card?: 'embed' | 'markdown';
};

/** A call paused on an action-required card, until someone presses one of its buttons. */
export type ToolgateActionRequiredAnswer = {
  callId: string;
  tool: string;
  status: 'action_required';
  card: Card;
};

/** A call still in flight (GET /calls while it runs, or a client tool the page has not answered). */
export type ToolgatePendingAnswer = {
  callId: string;
  tool: string;
  status: 'running' | 'awaiting_client';
};

/** What the gateway answers for a call: POST /tools/{name}, GET /calls/{id}, a resume. */
export type ToolgateAnswer = ToolgateDoneAnswer | ToolgateActionRequiredAnswer | ToolgatePendingAnswer;

/** The input of a toolgate tool: a JSON object its schema (checked by the gateway) describes. */
export type ToolgateInput = Record<string, unknown>;

/** What the model reads of an answer (the AI SDK's ToolResultOutput, the two kinds used). */
export type ToolgateModelOutput = { type: 'text' | 'error-text'; value: string };

/**
 * One of the AI SDK tools toolgateTools returns (made by the SDK's tool()
 * and jsonSchema()): assignable to the SDK's Tool and ToolSet. Its output,
 * a step's tool-result `output`, is the gateway's answer; the SDK types it
 * unknown, so read it with isToolgateAnswer or pausedToolgateCalls.
 */
export type ToolgateTool = {
  description: string;
  /** The tool's JSON Schema as listed, wrapped by the SDK's jsonSchema() (no validation: the gateway checks). */
  inputSchema: any;
  execute: (input: ToolgateInput, options: { toolCallId: string; abortSignal?: AbortSignal | undefined }) => Promise<ToolgateAnswer>;
  toModelOutput: (options: { output: ToolgateAnswer }) => ToolgateModelOutput;
};

/**
 * A request the gateway refused (4xx or 5xx: a malformed envelope, a bad
 * identity, an unknown tool, a call id reused for another input, the
 * ledger unreachable...), or an answer that is not the gateway's. Thrown
 * from a tool's execute, the AI SDK turns it into a tool-error part, whose
 * message the model reads. A tool's own failure is not one of these: it
 * is a done answer with isError.
 */
export class ToolgateError extends Error {
  /** The HTTP status, 0 when the request did not get an answer. */
  readonly status: number;
  /** The gateway's error code, e.g. "unknown_tool"; "" when it sent none. */
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ToolgateError';
    this.status = status;
    this.code = code;
  }
}

/**
 * toolgateTools lists the gateway's tools (GET {url}/tools) and returns
 * them as AI SDK tools, by name, for generateText, streamText or an agent.
 *
 * Each tool's inputSchema is the tool's JSON Schema as listed (the gateway
 * checks the input against it; the AI SDK does not). Its execute calls
 * POST {url}/tools/{name} with the input, the identity, the context, and
 * the AI SDK's toolCallId as the callId: the gateway runs a call id once,
 * so a step that is retried gets the recorded answer instead of running
 * the tool again. The tool's output is the gateway's answer (a
 * ToolgateAnswer); the model reads its content, as an error (error-text)
 * when isError, or, for a call paused on an action-required card, a text
 * saying it waits for the user and naming the buttons: finish it with
 * resumeToolgateCall.
 *
 * Needs the `ai` package (>= 7) installed beside @toolgate/kit.
 */
export async function toolgateTools(opts: ToolgateToolsOptions): Promise<Record<string, ToolgateTool>> {
  const { tool, jsonSchema } = await loadAI();
  const listed = await request<ToolgateListedTool[]>(opts, 'GET', '/tools');
  if (!Array.isArray(listed)) throw new ToolgateError(200, '', `GET ${opts.url}/tools did not answer a list of tools`);
  let chosen = listed;
  if (typeof opts.tools === 'function') {
    chosen = listed.filter(opts.tools);
  } else if (opts.tools) {
    const names = new Set(opts.tools);
    const missing = [...names].filter((n) => !listed.some((t) => t.name === n));
    if (missing.length > 0) {
      throw new ToolgateError(0, 'unknown_tool', `toolgate at ${opts.url} lists no tool named ${missing.map((n) => JSON.stringify(n)).join(', ')}`);
    }
    chosen = listed.filter((t) => names.has(t.name));
  }
  const context = opts.context ?? (opts.threadId !== undefined ? { source: 'thread' as const, threadId: opts.threadId } : { source: 'api' as const });
  const tools: Record<string, ToolgateTool> = {};
  for (const t of chosen) {
    tools[t.name] = tool({
      description: t.description,
      inputSchema: jsonSchema(t.input_schema),
      execute: (input, { toolCallId, abortSignal }) =>
        request<ToolgateAnswer>(opts, 'POST', `/tools/${encodeURIComponent(t.name)}`, {
          input,
          callId: toolgateCallId(toolCallId),
          context,
          ...(opts.identity ? { identity: opts.identity } : {}),
        }, abortSignal),
      toModelOutput: ({ output }) => modelOutput(output),
    });
  }
  return tools;
}

/** The options of resumeToolgateCall: the call, and the button pressed or the action taken. */
export type ResumeToolgateCallOptions = ToolgateConnection & {
  /** The paused call's id: the answer's callId (which is the AI SDK's toolCallId when toolgateTools made it). */
  callId: string;
  /** The id of the card's button pressed. */
  buttonId?: string;
  /** Instead of a button: skip or cancel the card. */
  action?: 'skip' | 'cancel';
  /** The device pressing, for a card assigned to one (loopback trust mode; with callers, the token's device claim). */
  device?: string;
  signal?: AbortSignal;
};

/**
 * resumeToolgateCall answers a paused call's card (POST
 * {url}/calls/{callId}/resume) and returns the call's answer now: done,
 * with the result of the button (its input, or what its target answered).
 */
export async function resumeToolgateCall(opts: ResumeToolgateCallOptions): Promise<ToolgateAnswer> {
  if ((opts.buttonId === undefined) === (opts.action === undefined)) {
    throw new TypeError('resumeToolgateCall needs a buttonId or an action ("skip" or "cancel"), not both');
  }
  return request<ToolgateAnswer>(opts, 'POST', `/calls/${encodeURIComponent(opts.callId)}/resume`, {
    ...(opts.buttonId !== undefined ? { buttonId: opts.buttonId } : {}),
    ...(opts.action !== undefined ? { action: opts.action } : {}),
    ...(opts.device !== undefined ? { device: opts.device } : {}),
    ...(opts.identity ? { identity: opts.identity } : {}),
  }, opts.signal);
}

/** getToolgateCall reads a call's answer now (GET {url}/calls/{callId}): done, action_required or in flight. */
export async function getToolgateCall(opts: ToolgateConnection & { callId: string; signal?: AbortSignal }): Promise<ToolgateAnswer> {
  const q = new URLSearchParams();
  if (opts.identity) {
    q.set('user', opts.identity.user);
    if (opts.identity.install !== undefined) q.set('install', opts.identity.install);
  }
  const query = q.size > 0 ? `?${q}` : '';
  return request<ToolgateAnswer>(opts, 'GET', `/calls/${encodeURIComponent(opts.callId)}${query}`, undefined, opts.signal);
}

/**
 * toolgateCallId is the callId sent for an AI SDK toolCallId: the id
 * itself when the gateway takes it as a callId (1 to 128 of A-Z a-z 0-9
 * _ . : -, not "." or ".."), else "ai:" and its SHA-256 in base64url. The
 * same toolCallId always gives the same callId.
 */
export function toolgateCallId(toolCallId: string): string {
  if (/^[A-Za-z0-9_.:-]{1,128}$/.test(toolCallId) && toolCallId !== '.' && toolCallId !== '..') return toolCallId;
  return 'ai:' + createHash('sha256').update(toolCallId, 'utf8').digest('base64url');
}

/**
 * toolgateAnswerText is what the model reads of an answer: the content of
 * a done one; for a card, that the call waits for the user, with the
 * card's title, description and buttons; for a call in flight, its
 * status.
 */
export function toolgateAnswerText(a: ToolgateAnswer): string {
  switch (a.status) {
    case 'done':
      return a.content;
    case 'action_required': {
      const c = a.card;
      const buttons = (c.elements ?? []).map((b) => `"${b.label}" (${b.id})`).join(', ');
      return [
        `Waiting for the user: this call (${a.callId}) is paused on a card and finishes when the user answers it.`,
        `Card: ${c.title}${c.description ? ` ${c.description}` : ''}`,
        `Buttons: ${buttons || 'none'}.`,
        'Do not call the tool again for this; tell the user what the card asks.',
      ].join('\n');
    }
    default:
      return `The call ${a.callId} has not finished (${a.status}).`;
  }
}

/** isToolgateAnswer tells a gateway's answer (a toolgate tool's output) from anything else. */
export function isToolgateAnswer(x: unknown): x is ToolgateAnswer {
  if (typeof x !== 'object' || x === null) return false;
  const a = x as Record<string, unknown>;
  return typeof a['callId'] === 'string' && typeof a['tool'] === 'string' &&
    (a['status'] === 'done' || a['status'] === 'action_required' || a['status'] === 'running' || a['status'] === 'awaiting_client');
}

/**
 * pausedToolgateCalls returns the answers of the calls that paused on a
 * card in the steps of a generateText or streamText result (or an
 * agent's): each has the callId to resume and the card to show.
 */
export function pausedToolgateCalls(steps: ReadonlyArray<{ toolResults: ReadonlyArray<{ output: unknown }> }>): ToolgateActionRequiredAnswer[] {
  const paused: ToolgateActionRequiredAnswer[] = [];
  for (const step of steps) {
    for (const r of step.toolResults) {
      if (isToolgateAnswer(r.output) && r.output.status === 'action_required') paused.push(r.output);
    }
  }
  return paused;
}

function modelOutput(a: ToolgateAnswer): ToolgateModelOutput {
  if (a.status === 'done' && a.isError) return { type: 'error-text', value: a.content };
  return { type: 'text', value: toolgateAnswerText(a) };
}

// The two functions of `ai` used, as far as this file needs their types.
type AI = {
  tool: (t: Omit<ToolgateTool, 'inputSchema'> & { inputSchema: unknown }) => ToolgateTool;
  jsonSchema: (schema: Record<string, unknown>) => unknown;
};

async function loadAI(): Promise<AI> {
  try {
    // A literal specifier, so that bundlers see the optional dependency.
    const ai = (await import('ai')) as unknown as AI;
    return { tool: ai.tool, jsonSchema: ai.jsonSchema };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new Error('toolgateTools needs the Vercel AI SDK: npm install ai', { cause: err });
    }
    throw err;
  }
}

async function request<T>(conn: ToolgateConnection, method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const url = conn.url.replace(/\/+$/, '') + path;
  const headers = new Headers(conn.headers);
  headers.set('accept', 'application/json');
  if (conn.token !== undefined) headers.set('authorization', `Bearer ${conn.token}`);
  const init: RequestInit = { method, headers };
  if (body !== undefined) {
    // Every POST body must be sent as application/json (415 otherwise).
    headers.set('content-type', 'application/json');
    init.body = JSON.stringify(body);
  }
  if (signal) init.signal = signal;
  const res = await (conn.fetch ?? globalThis.fetch)(url, init);
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ToolgateError(res.status, '', `${method} ${url} answered ${res.status} and no JSON: ${text.slice(0, 200)}`);
  }
  if (!res.ok) {
    const e = (parsed as { error?: { code?: unknown; message?: unknown } } | null)?.error;
    const code = typeof e?.code === 'string' ? e.code : '';
    const message = typeof e?.message === 'string' ? e.message : text.slice(0, 200);
    throw new ToolgateError(res.status, code, `toolgate answered ${res.status}${code ? ` ${code}` : ''}: ${message}`);
  }
  return parsed as T;
}

// Writing answers (docs/kits.md, "Answers and cards"): the result channels,
// domain errors and action-required cards, refused here when toolgate would
// refuse them (apptools' WriteResult, WriteError and WriteCard).

import type { ServerResponse } from 'node:http';

import { isThreadToolInvocation, type RequestLike } from './context.js';
import type { AppTarget, Assignee, Button, Card, DomainError, Result, ToolContext } from './types.js';

/** Why a card, a button or a result was refused: the message names the rule. */
export class AnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AnswerError';
  }
}

/**
 * Thrown by writeCard and cardResponse for a call that does not come from
 * a conversation: a card needs a person to answer it, so the handler must
 * answer a domain error instead (apptools.ErrNotThread).
 */
export class NotThreadError extends Error {
  constructor() {
    super('a card needs a thread call; answer a domain error instead');
    this.name = 'NotThreadError';
  }
}

/** The fields of a card, without its type. */
export type CardInit = Omit<Card, 'type'>;
/** The fields of a button, without its type. */
export type ButtonInit = Omit<Button, 'type'>;

/**
 * Options of the card checks. `component` is this component's name as
 * toolgate knows it (Identity.component): a button's target must run on
 * it. Unset, a target may name any component, and toolgate checks it.
 */
export type CardOptions = { component?: string };

/** Builds a button, checked as toolgate checks it: see card. */
export function button(init: ButtonInit, opts: CardOptions = {}): Button {
  const b = { type: 'button' as const, ...init };
  checkButton(b, 'button', opts);
  return b;
}

/**
 * Builds an action-required card, checked as toolgate checks one (a card
 * it would refuse becomes an error result and nothing is left open): a
 * title, at least one button, each with a unique id and a label, an
 * assignee with a computerId, and no other fields. A button's target is an
 * app target on the component that answers the card, with `${input…}`
 * references only (never `${env…}`) and no result mapping.
 */
export function card(init: CardInit, opts: CardOptions = {}): Card {
  const c = { type: 'action_required' as const, ...init };
  checkCard(c, opts);
  return c;
}

/**
 * The card to answer a call with: it throws NotThreadError when the call
 * is not a thread call (reqOrContext is the request or the context
 * toolContext returned), and an AnswerError when the card is not valid.
 */
export function cardAnswer(reqOrContext: RequestLike | ToolContext, c: Card, opts: CardOptions = {}): Card {
  if (!isThreadToolInvocation(reqOrContext)) throw new NotThreadError();
  checkCard(c, opts);
  return c;
}

/** A Fetch Response with the card; see cardAnswer for what it refuses. */
export function cardResponse(reqOrContext: RequestLike | ToolContext, c: Card, opts: CardOptions = {}): Response {
  return jsonResponse(200, cardAnswer(reqOrContext, c, opts));
}

/**
 * Answers a node:http response with the card. It writes nothing and
 * throws NotThreadError when the call is not a thread call, an AnswerError
 * when the card is not valid.
 */
export function writeCard(res: ServerResponse, reqOrContext: RequestLike | ToolContext, c: Card, opts: CardOptions = {}): void {
  writeJSON(res, 200, cardAnswer(reqOrContext, c, opts));
}

/**
 * Builds a result, checked as toolgate normalizes one: a string content
 * (required), a string markdown, an absolute http(s) embedUrl.
 */
export function result(r: Result): Result {
  if (!isPlainObject(r)) throw new AnswerError('a result is an object {content, markdown?, embedUrl?}');
  for (const k of Object.keys(r)) {
    if (k !== 'content' && k !== 'markdown' && k !== 'embedUrl') throw new AnswerError(`result: unknown field ${JSON.stringify(k)} (toolgate keeps content, markdown, embedUrl)`);
  }
  if (typeof r.content !== 'string') throw new AnswerError('result: content is required: the text the model reads');
  if (r.markdown !== undefined && typeof r.markdown !== 'string') throw new AnswerError('result: markdown must be a string');
  if (r.embedUrl !== undefined && !isAbsoluteHTTP(r.embedUrl)) throw new AnswerError('result: embedUrl must be an absolute http(s) URL');
  return r;
}

/** A domain error {code, error}, answered with a 4xx or 5xx status. */
export function domainError(code: string, error: string): DomainError {
  if (typeof code !== 'string' || code === '') throw new AnswerError('a domain error needs a code');
  if (typeof error !== 'string') throw new AnswerError('a domain error needs an error message');
  return { code, error };
}

/** A Fetch Response with the result's channels. status should be 2xx: any other is an error result. */
export function resultResponse(r: Result, status = 200): Response {
  return jsonResponse(status, result(r));
}

/** A Fetch Response with a domain error. status should be 4xx or 5xx. */
export function errorResponse(status: number, code: string, error: string): Response {
  return jsonResponse(status, domainError(code, error));
}

/** Answers a node:http response with the result's channels. */
export function writeResult(res: ServerResponse, status: number, r: Result): void {
  writeJSON(res, status, result(r));
}

/** Answers a node:http response with plain text, the whole content. */
export function writeText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(text);
}

/** Answers a node:http response with a domain error. */
export function writeError(res: ServerResponse, status: number, code: string, error: string): void {
  writeJSON(res, status, domainError(code, error));
}

function jsonResponse(status: number, v: unknown): Response {
  return new Response(JSON.stringify(v), { status, headers: { 'Content-Type': 'application/json' } });
}

function writeJSON(res: ServerResponse, status: number, v: unknown): void {
  const body = JSON.stringify(v);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

const CARD_FIELDS = ['type', 'title', 'description', 'assignee', 'elements'];
const BUTTON_FIELDS = ['type', 'id', 'label', 'variant', 'input', 'target'];
const APP_FIELDS = ['type', 'component', 'method', 'path', 'query', 'headers', 'body'];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
// Headers a target may not set: the transport's, and on an app target the
// gateway's (internal/dispatch).
const FORBIDDEN_HEADERS = [
  'host', 'content-length', 'transfer-encoding', 'connection', 'te', 'upgrade', 'trailer', 'keep-alive', 'proxy-connection',
  'authorization', 'kazzle-tool-context', 'idempotency-key',
];

// checkCard mirrors internal/result.ParseCard (unknown fields refused,
// as the gateway reads cards) and, per button, checkButton.
function checkCard(c: Card, opts: CardOptions): void {
  if (!isPlainObject(c)) throw new AnswerError('invalid card: not an object');
  unknownFields(c, CARD_FIELDS, 'invalid card');
  if (c.type !== 'action_required') throw new AnswerError(`invalid card: type ${JSON.stringify(c.type)}, want "action_required"`);
  if (typeof c.title !== 'string' || c.title === '') throw new AnswerError('invalid card: title is required');
  if (c.description !== undefined && typeof c.description !== 'string') throw new AnswerError('invalid card: description must be a string');
  if (c.assignee !== undefined) checkAssignee(c.assignee);
  if (!Array.isArray(c.elements) || c.elements.length === 0) throw new AnswerError('invalid card: at least one button is required');
  const seen = new Set<string>();
  c.elements.forEach((b, i) => {
    checkButton(b, `elements[${i}]`, opts);
    if (seen.has(b.id)) throw new AnswerError(`invalid card: button id ${JSON.stringify(b.id)} is used twice`);
    seen.add(b.id);
  });
}

function checkAssignee(a: Assignee): void {
  if (!isPlainObject(a)) throw new AnswerError('invalid card: assignee must be an object {computerId}');
  unknownFields(a, ['computerId'], 'invalid card: assignee');
  if (typeof a.computerId !== 'string' || a.computerId === '') throw new AnswerError('invalid card: assignee needs a computerId');
}

function checkButton(b: Button, where: string, opts: CardOptions): void {
  if (!isPlainObject(b)) throw new AnswerError(`invalid card: ${where}: not an object`);
  unknownFields(b, BUTTON_FIELDS, `invalid card: ${where}`);
  if (b.type !== 'button') throw new AnswerError(`invalid card: ${where}: type ${JSON.stringify(b.type)}, want "button"`);
  if (typeof b.id !== 'string' || b.id === '') throw new AnswerError(`invalid card: ${where}: id is required`);
  const name = `button ${JSON.stringify(b.id)}`;
  if (typeof b.label !== 'string' || b.label === '') throw new AnswerError(`invalid card: ${name}: label is required`);
  if (b.variant !== undefined && typeof b.variant !== 'string') throw new AnswerError(`invalid card: ${name}: variant must be a string`);
  if (b.input !== undefined) checkJSON(b.input, `invalid card: ${name}: input`);
  if (b.target !== undefined) checkTarget(b.target, `invalid card: ${name}: target`, opts.component);
}

// checkTarget mirrors dispatch.CheckButton: a card is written at run time
// by a component, and the gateway that runs its buttons holds every
// component's env, so a button reaches no further than the component that
// wrote it.
function checkTarget(t: AppTarget, where: string, owner: string | undefined): void {
  if (!isPlainObject(t)) throw new AnswerError(`${where}: not an object`);
  if (t.type !== 'app') {
    throw new AnswerError(`${where}: a button runs an app target on the component that answered the card; not a ${JSON.stringify(t.type)} target`);
  }
  if ('result' in t) throw new AnswerError(`${where}: a button has no result mapping; its component answers the channels itself`);
  unknownFields(t, APP_FIELDS, where);
  if (typeof t.component !== 'string' || t.component === '') throw new AnswerError(`${where}: component is required`);
  if (owner !== undefined && t.component !== owner) {
    throw new AnswerError(`${where}: component ${JSON.stringify(t.component)}: a button runs on component ${JSON.stringify(owner)}, the one that answered the card`);
  }
  if (!METHODS.includes(t.method)) throw new AnswerError(`${where}: method ${JSON.stringify(t.method)} is not one of ${METHODS.join(', ')}`);
  if (typeof t.path !== 'string' || !t.path.startsWith('/')) throw new AnswerError(`${where}: path must start with /`);
  if (/[?#]/.test(t.path)) throw new AnswerError(`${where}: path ${JSON.stringify(t.path)} must not hold ? or #; use query`);
  checkRefs(t.path, `${where}: path`);
  for (const seg of t.path.replace(/\$\{[^}]*\}/g, 'x').split('/')) {
    if (isDotSegment(seg)) throw new AnswerError(`${where}: path ${JSON.stringify(t.path)}: dot segments are not allowed`);
  }
  for (const key of ['query', 'headers'] as const) {
    const m = t[key];
    if (m === undefined) continue;
    if (!isPlainObject(m)) throw new AnswerError(`${where}: ${key} must be an object of strings`);
    for (const [k, v] of Object.entries(m)) {
      if (typeof v !== 'string') throw new AnswerError(`${where}: ${key} ${JSON.stringify(k)} must be a string`);
      if (key === 'headers') {
        if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(k)) throw new AnswerError(`${where}: ${JSON.stringify(k)} is not a valid header name`);
        if (FORBIDDEN_HEADERS.includes(k.toLowerCase())) throw new AnswerError(`${where}: header ${JSON.stringify(k)} belongs to the gateway`);
        if (/[\r\n\0]/.test(v)) throw new AnswerError(`${where}: header ${JSON.stringify(k)} has an invalid value`);
      }
      checkRefs(v, `${where}: ${key} ${JSON.stringify(k)}`);
    }
  }
  if (t.body !== undefined) {
    checkJSON(t.body, `${where}: body`);
    walkStrings(t.body, (s) => checkRefs(s, `${where}: body`));
  }
}

// checkRefs reads s's references as internal/refs does ("$${" is a
// literal "${"), refusing the malformed ones and any but ${input…}.
function checkRefs(s: string, where: string): void {
  for (let i = 0; i < s.length; ) {
    if (s.startsWith('$${', i)) {
      i += 3;
      continue;
    }
    if (!s.startsWith('${', i)) {
      i++;
      continue;
    }
    const end = s.indexOf('}', i);
    if (end < 0) throw new AnswerError(`${where}: unterminated reference at offset ${i} in ${JSON.stringify(s)}`);
    const text = s.slice(i, end + 1);
    const segs = text.slice(2, -1).split('.');
    if (segs.some((seg) => !/^[A-Za-z0-9_-]+$/.test(seg))) throw new AnswerError(`${where}: invalid reference ${text}`);
    if (segs[0] === 'env') throw new AnswerError(`${where}: ${text}: a button may reference \${input…} only, never env`);
    if (segs[0] !== 'input') throw new AnswerError(`${where}: unknown reference ${text}: a button's root is input`);
    i = end + 1;
  }
}

// isDotSegment mirrors internal/dispatch: a segment that is dots alone
// once percent-decoded (as often as a server might) and NFKC-normalized
// climbs out of the component's path.
function isDotSegment(seg: string): boolean {
  let d = seg;
  for (let i = 0; i < 8 && d.includes('%'); i++) {
    const next = d.replace(/%u([0-9a-fA-F]{4})|%([0-9a-fA-F]{2})/g, (_, u: string | undefined, h: string | undefined) =>
      String.fromCharCode(parseInt((u ?? h)!, 16)),
    );
    if (next === d) break;
    d = next;
  }
  const dots = (s: string) => /^\.+(;.*)?$/.test(s);
  return dots(d) || dots(d.normalize('NFKC'));
}

// checkJSON refuses what JSON.stringify would drop or change without a
// word: the card toolgate reads must be the card the handler built.
function checkJSON(v: unknown, where: string, stack = new Set<object>()): void {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(v)) throw new AnswerError(`${where}: ${v} is not a JSON number`);
      return;
    case 'object': {
      if (v === null) return;
      if (stack.has(v)) throw new AnswerError(`${where}: refers to itself`);
      if (!Array.isArray(v) && !isPlainObject(v)) throw new AnswerError(`${where}: is not plain JSON (an object of another class)`);
      stack.add(v);
      for (const [k, item] of Object.entries(v)) checkJSON(item, Array.isArray(v) ? `${where}[${k}]` : `${where}.${k}`, stack);
      stack.delete(v);
      return;
    }
    default:
      throw new AnswerError(`${where}: a ${typeof v} is not JSON`);
  }
}

function walkStrings(v: unknown, f: (s: string) => void): void {
  if (typeof v === 'string') f(v);
  else if (typeof v === 'object' && v !== null) for (const item of Object.values(v)) walkStrings(item, f);
}

function unknownFields(o: object, known: string[], where: string): void {
  for (const k of Object.keys(o)) {
    if (!known.includes(k) && (o as Record<string, unknown>)[k] !== undefined) throw new AnswerError(`${where}: unknown field ${JSON.stringify(k)}`);
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function isAbsoluteHTTP(s: unknown): boolean {
  if (typeof s !== 'string') return false;
  try {
    const u = new URL(s);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.host !== '';
  } catch {
    return false;
  }
}

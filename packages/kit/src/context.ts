// Reading the Kazzle-Tool-Context header (docs/kits.md, "Context and
// idempotency"), by the rules of
// apptools.ToolContext.

import { createHash } from 'node:crypto';

import type { ApprovalInfo, ToolContext } from './types.js';

/** The request header toolgate sends a call's context in. */
export const CONTEXT_HEADER = 'Kazzle-Tool-Context';

/** The request header toolgate sends each app call's idempotency key in. */
export const IDEMPOTENCY_HEADER = 'Idempotency-Key';

/**
 * The key toolgate sends in IDEMPOTENCY_HEADER: the unpadded base64url of
 * SHA-256 over the user, the installation ('' when none) and the call id,
 * each preceded by its length in bytes as a 4-byte big-endian integer. It
 * is the same for every delivery of one call and differs across users and
 * installations even where their runtimes chose the same call id, so
 * idempotency middleware keyed on it never replays one user's answer to
 * another. A card button's call id is the call's id, "/" and the button's
 * id. (Go: apptools.IdempotencyKey.)
 */
export function idempotencyKey(user: string, install: string | undefined, callId: string): string {
  const h = createHash('sha256');
  for (const s of [user, install ?? '', callId]) {
    const b = Buffer.from(s, 'utf8');
    const n = Buffer.alloc(4);
    n.writeUInt32BE(b.length);
    h.update(n).update(b);
  }
  return h.digest('base64url');
}

// toolgate sends a few dozen bytes; a header this long was not sent by it,
// and reading it costs the component, not the sender.
const MAX_CONTEXT_BYTES = 4096;

/**
 * A request as the kit reads it: Node's IncomingMessage (headers as an
 * object with lower-case keys), a Fetch Request (headers.get), or an
 * Express-style request (req.get or req.header).
 */
export type RequestLike =
  | { headers: { get(name: string): string | null } }
  | { headers: Record<string, string | string[] | undefined>; headersDistinct?: Record<string, string[] | undefined> }
  | { get(name: string): string | string[] | undefined }
  | { header(name: string): string | string[] | undefined };

/**
 * Why toolContext refused a request: `missing` when it carries no
 * Kazzle-Tool-Context header (it did not come through an app target),
 * `malformed` when the header is not one toolgate would send.
 */
export class ToolContextError extends Error {
  readonly code: 'missing' | 'malformed';
  constructor(code: 'missing' | 'malformed', message: string) {
    super(message);
    this.name = 'ToolContextError';
    this.code = code;
  }
}

/**
 * The values of one request header, however the request holds them. A
 * header sent twice is two values where the request keeps them apart
 * (Node's headersDistinct); a Fetch Request joins them with ", ", which no
 * valid value of the headers read here survives.
 */
export function headerValues(req: RequestLike, name: string): string[] {
  const lower = name.toLowerCase();
  const list = (v: unknown): string[] =>
    v === undefined || v === null ? [] : Array.isArray(v) ? v.map(String) : [String(v)];
  const r = req as Record<string, unknown>;
  const headers = r['headers'] as Record<string, unknown> | undefined;
  if (headers && typeof headers['get'] === 'function') {
    return list((headers as { get(n: string): string | null }).get(name));
  }
  const distinct = r['headersDistinct'] as Record<string, unknown> | undefined;
  if (distinct && typeof distinct === 'object') return list(distinct[lower]);
  if (headers && typeof headers === 'object') return list(headers[lower]);
  if (typeof r['get'] === 'function') return list((r['get'] as (n: string) => unknown).call(req, name));
  if (typeof r['header'] === 'function') return list((r['header'] as (n: string) => unknown).call(req, name));
  throw new TypeError('toolgate: not a request: no headers, get() or header()');
}

/**
 * Reads the request's Kazzle-Tool-Context header. It is strict, as
 * apptools.ToolContext: the header is sent once and holds exactly one JSON
 * object with a string "source" of "thread" (with a non-empty string
 * "threadId" and, on a call a person approved, an "approval") or "api"
 * (with neither), no key twice, and nothing else. It throws a
 * ToolContextError otherwise.
 */
export function toolContext(req: RequestLike): ToolContext {
  const vals = headerValues(req, CONTEXT_HEADER);
  if (vals.length === 0) throw new ToolContextError('missing', `no ${CONTEXT_HEADER} header`);
  if (vals.length > 1) throw malformed(`sent ${vals.length} times`);
  return parseContext(vals[0]!);
}

/**
 * Whether the call came from a conversation, the only context in which a
 * handler may pause it on a card. It takes the request (false when the
 * header is absent or malformed) or the context toolContext returned.
 */
export function isThreadToolInvocation(reqOrContext: RequestLike | ToolContext): boolean {
  if (isContext(reqOrContext)) return reqOrContext.source === 'thread';
  try {
    return toolContext(reqOrContext).source === 'thread';
  } catch (err) {
    if (err instanceof ToolContextError) return false;
    throw err;
  }
}

function isContext(v: unknown): v is ToolContext {
  return typeof v === 'object' && v !== null && typeof (v as { source?: unknown }).source === 'string' && !('headers' in v);
}

function malformed(why: string): ToolContextError {
  return new ToolContextError('malformed', `malformed ${CONTEXT_HEADER} header: ${why}`);
}

// The tokens of a valid JSON text: strings, punctuation, and the rest
// (numbers, true, false, null) between them.
const TOKEN = /"(?:[^"\\]|\\.)*"|[{}[\],:]|[^\s{}[\],:"]+/g;

// repeatedKey finds the first key an object of s (valid JSON) holds twice,
// with the key its object is the value of ('' at the top). JSON.parse keeps
// the last of duplicate keys without a word, so a second "source" could
// overrule the first one unseen.
function repeatedKey(s: string): { parent: string; key: string } | undefined {
  const stack: { keys: Set<string> | undefined; parent: string }[] = [];
  let prev = '';
  let lastKey = '';
  for (const [tok] of s.matchAll(TOKEN)) {
    const top = stack[stack.length - 1];
    if (tok === '{' || tok === '[') {
      stack.push({ keys: tok === '{' ? new Set() : undefined, parent: prev === ':' ? lastKey : '' });
    } else if (tok === '}' || tok === ']') {
      stack.pop();
    } else if (tok.startsWith('"') && top?.keys && (prev === '{' || prev === ',')) {
      lastKey = JSON.parse(tok) as string;
      if (top.keys.has(lastKey)) return { parent: top.parent, key: lastKey };
      top.keys.add(lastKey);
    }
    prev = tok;
  }
  return undefined;
}

function parseContext(s: string): ToolContext {
  if (Buffer.byteLength(s) > MAX_CONTEXT_BYTES) throw malformed(`longer than ${MAX_CONTEXT_BYTES} bytes`);
  let v: unknown;
  try {
    v = JSON.parse(s);
  } catch {
    throw malformed('not a JSON object');
  }
  if (!isObject(v)) throw malformed('not a JSON object');
  const twice = repeatedKey(s);
  if (twice !== undefined) {
    throw malformed(`${twice.parent ? `${twice.parent}: ` : ''}${JSON.stringify(twice.key)} is given twice`);
  }
  for (const [key, val] of Object.entries(v)) {
    if (key === 'approval') continue;
    if (key !== 'source' && key !== 'threadId') throw malformed(`unknown field ${JSON.stringify(key)}`);
    if (typeof val !== 'string') throw malformed(`${key} must be a string`);
  }
  switch (v['source']) {
    case 'thread': {
      if (!v['threadId']) throw malformed('a "thread" context needs a threadId');
      const c: ToolContext = { source: 'thread', threadId: v['threadId'] as string };
      if (Object.hasOwn(v, 'approval')) c.approval = parseApproval(v['approval']);
      return c;
    }
    case 'api':
      if (Object.hasOwn(v, 'threadId')) throw malformed('an "api" context has no threadId');
      // The gateway asks for approval only in a thread: an approved API
      // call is one it never makes.
      if (Object.hasOwn(v, 'approval')) throw malformed('an "api" context has no approval: a person approves in a thread');
      return { source: 'api' };
    case undefined:
      throw malformed('source is missing');
    default:
      throw malformed(`source ${JSON.stringify(v['source'])} is neither "thread" nor "api"`);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// parseApproval reads the "approval" member as apptools.ToolContext does:
// by (a non-empty string), device (a string, optional), at (an RFC 3339
// time) and changed (a boolean), and nothing else.
function parseApproval(v: unknown): ApprovalInfo {
  const bad = (why: string) => malformed(`approval: ${why}`);
  if (!isObject(v)) throw bad('not a JSON object');
  for (const [key, val] of Object.entries(v)) {
    switch (key) {
      case 'by':
      case 'device':
      case 'at':
        if (typeof val !== 'string') throw bad(`${key} must be a string`);
        if (key === 'at' && !isDateTime(val)) throw bad(`at is not an RFC 3339 time: ${JSON.stringify(val)}`);
        break;
      case 'changed':
        if (typeof val !== 'boolean') throw bad('changed must be a boolean');
        break;
      default:
        throw bad(`unknown field ${JSON.stringify(key)}`);
    }
  }
  for (const key of ['by', 'at', 'changed']) {
    if (!Object.hasOwn(v, key)) throw bad(`${key} is missing`);
  }
  const { by, device, at, changed } = v as ApprovalInfo;
  if (by === '') throw bad('by is empty');
  return device === undefined ? { by, at, changed } : { by, device, at, changed };
}

// An RFC 3339 date-time as Go writes one: upper-case T and Z, seconds 00
// to 59 (no leap second), an offset of at most 23:59.
const DATE_TIME = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:Z|[+-](\d\d):(\d\d))$/;

function isDateTime(s: string): boolean {
  const m = DATE_TIME.exec(s);
  if (!m) return false;
  const [year, month, day, hour, min, sec] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const daysIn = [31, year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  if (month < 1 || month > 12 || day < 1 || day > daysIn[month - 1]! || hour > 23 || min > 59 || sec > 59) return false;
  return m[7] === undefined || (Number(m[7]) <= 23 && Number(m[8]) <= 59);
}

// Reading the Kazzle-Tool-Context header (docs/kits.md, "Context and
// idempotency"), by the rules of
// apptools.ToolContext.

import { createHash } from 'node:crypto';

import type { ToolContext } from './types.js';

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
 * "threadId") or "api" (with no "threadId"), and nothing else. It throws a
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

// A JSON string token, for counting an object's keys (JSON.parse keeps
// the last of duplicate keys without a word).
const STRING_TOKEN = /"(?:[^"\\]|\\.)*"/g;

function parseContext(s: string): ToolContext {
  if (Buffer.byteLength(s) > MAX_CONTEXT_BYTES) throw malformed(`longer than ${MAX_CONTEXT_BYTES} bytes`);
  let v: unknown;
  try {
    v = JSON.parse(s);
  } catch {
    throw malformed('not a JSON object');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw malformed('not a JSON object');
  const obj = v as Record<string, unknown>;
  for (const [key, val] of Object.entries(obj)) {
    if (key !== 'source' && key !== 'threadId') throw malformed(`unknown field ${JSON.stringify(key)}`);
    if (typeof val !== 'string') throw malformed(`${key} must be a string`);
  }
  // Every value is a string now, so the object is flat and its string
  // tokens alternate key, value: the keys are the even ones.
  const tokens = s.match(STRING_TOKEN) ?? [];
  const seen = new Set<string>();
  for (let i = 0; i < tokens.length; i += 2) {
    const key = JSON.parse(tokens[i]!) as string;
    if (seen.has(key)) throw malformed(`${JSON.stringify(key)} is given twice`);
    seen.add(key);
  }
  switch (obj['source']) {
    case 'thread':
      if (!obj['threadId']) throw malformed('a "thread" context needs a threadId');
      return { source: 'thread', threadId: obj['threadId'] as string };
    case 'api':
      if ('threadId' in obj) throw malformed('an "api" context has no threadId');
      return { source: 'api' };
    case undefined:
      throw malformed('source is missing');
    default:
      throw malformed(`source ${JSON.stringify(obj['source'])} is neither "thread" nor "api"`);
  }
}

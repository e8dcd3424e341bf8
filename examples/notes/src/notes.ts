// The notes component: toolgate's app targets for add_note, clear_notes and
// export_notes (../tools.ts), on plain node:http. Every tool route verifies
// the identity token toolgate signed for the call against toolgate's JWKS,
// and whose notes they are comes from that token alone: the user and the
// installation, never a value of the input. Notes live in memory.
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  IdentityError,
  NotThreadError,
  button,
  card,
  identityVerifier,
  isThreadToolInvocation,
  writeCard,
  writeError,
  writeResult,
} from '@toolgate/kit';
import { AddNoteInput, deleteAllNotesTarget } from '../tools.js';

export interface NotesOptions {
  /** toolgate's /.well-known/jwks.json. */
  jwksUrl: string;
  /** The iss of toolgate's identity tokens. */
  issuer: string;
  /** This component's name in toolgate's configuration: the tokens' aud. */
  audience: string;
}

/** One note; ids count per owner. */
interface Note {
  id: string;
  text: string;
  tags: string[];
}

/** One owner's notes. */
interface Shelf {
  next: number;
  notes: Note[];
}

// A note is at most 2000 characters (the schema's bound), so 64 KiB holds
// any valid body with room for JSON escapes; more is refused unread.
const maxBody = 64 << 10;
// How many notes one owner may keep: the store is memory, and a token is
// enough to add one.
export const maxNotes = 500;

type Verified = { user: string; install: string };
type Route = (req: IncomingMessage, res: ServerResponse, who: Verified) => Promise<void> | void;

/**
 * createNotes returns the component's request handler. Its tool routes
 * need a token that verifyIdentity accepts; GET /ping does not (the quick
 * start waits on it).
 */
export function createNotes(opts: NotesOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  // One verifier for the process: it keeps toolgate's key set, fetched on
  // the first call and again on an unknown kid (at most every 30 s). It
  // refuses to be made without an audience, which would let any
  // component's token through.
  const verify = identityVerifier({ jwksUrl: opts.jwksUrl, issuer: opts.issuer, audience: opts.audience });
  // Keyed by JSON.stringify([user, install]): no separator a user name could
  // hold makes two owners one.
  const shelves = new Map<string, Shelf>();
  const shelf = (who: Verified): Shelf => {
    const key = JSON.stringify([who.user, who.install]);
    let s = shelves.get(key);
    if (!s) {
      s = { next: 0, notes: [] };
      shelves.set(key, s);
    }
    return s;
  };

  const add: Route = async (req, res, who) => {
    const body = await readJSON(req, res);
    if (body === undefined) return;
    // toolgate has checked the input against the same schema; the component
    // checks again for callers that skip it.
    const parsed = AddNoteInput.safeParse(body);
    if (!parsed.success) {
      const why = parsed.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ');
      return writeError(res, 400, 'invalid', why);
    }
    const s = shelf(who);
    if (s.notes.length >= maxNotes) {
      return writeError(res, 409, 'too_many_notes', `there are already ${maxNotes} notes; clear some first`);
    }
    s.next++;
    const note: Note = { id: `n${s.next}`, text: parsed.data.text, tags: parsed.data.tags ?? [] };
    s.notes.push(note);
    writeResult(res, 201, {
      content: `Added note ${note.id}: ${note.text}` + (note.tags.length ? ` (tags: ${note.tags.join(', ')})` : ''),
      markdown: `Noted: ${markdownText(note.text)}` + tagsMarkdown(note.tags),
    });
  };

  const askClear: Route = (req, res, who) => {
    const n = shelf(who).notes.length;
    if (n === 0) return writeResult(res, 200, { content: 'There are no notes to clear.' });
    // Checked as toolgate checks a card, with its buttons on this component.
    const checks = { component: opts.audience };
    try {
      writeCard(res, req, card({
        title: n === 1 ? 'Delete the only note?' : `Delete all ${n} notes?`,
        description: 'This cannot be undone.',
        elements: [
          // The same target object tools.ts declares: pressing the button
          // runs it with the identity of this call.
          button({ id: 'delete', label: 'Delete all', variant: 'danger', target: deleteAllNotesTarget }, checks),
          // No target: its input becomes the tool result.
          button({ id: 'keep', label: 'Keep them', input: { content: 'Kept all notes.' } }, checks),
        ],
      }, checks), checks);
    } catch (err) {
      // A card needs a person to answer it: an api call has none, so it
      // gets a domain error saying why (toolgate would turn a card
      // answered to it into an error result).
      if (err instanceof NotThreadError) {
        return writeError(res, 409, 'confirmation_required', 'clearing notes needs a person to confirm; call it from a conversation');
      }
      // An invalid card is a bug here, not the caller's doing.
      console.error('clear_notes card:', err);
      writeError(res, 500, 'internal', 'could not build the confirmation card');
    }
  };

  // The "Delete all" button's target.
  const clearAll: Route = (_req, res, who) => {
    const s = shelf(who);
    const n = s.notes.length;
    s.notes = [];
    writeResult(res, 200, { content: n === 1 ? 'Deleted the only note.' : `Deleted all ${n} notes.` });
  };

  const exportNotes: Route = (req, res, who) => {
    const notes = shelf(who).notes;
    if (!isThreadToolInvocation(req)) {
      // Through the Tools API the caller is a program: JSON it can parse, as
      // the content (the one channel every caller reads).
      return writeResult(res, 200, { content: JSON.stringify({ notes }) });
    }
    if (notes.length === 0) return writeResult(res, 200, { content: 'No notes.' });
    writeResult(res, 200, {
      content: notes.map((n) => `${n.id} ${n.text}` + (n.tags.length ? ` [${n.tags.join(', ')}]` : '')).join('\n'),
      markdown: notes.map((n) => `- ${markdownText(n.text)}${tagsMarkdown(n.tags)}`).join('\n'),
    });
  };

  const routes = new Map<string, Map<string, Route>>([
    ['/notes', new Map([['POST', add]])],
    ['/notes/clear', new Map([['POST', askClear]])],
    ['/notes/clear/confirm', new Map([['POST', clearAll]])],
    ['/notes/export', new Map([['GET', exportNotes]])],
  ]);

  return async (req, res) => {
    // The path as sent, up to the query: not new URL(req.url, base), which
    // would read "//host/notes" as another host's /notes.
    const path = (req.url ?? '').split('?', 1)[0];
    if (path === '/ping' && req.method === 'GET') {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end('pong');
      return;
    }
    const methods = routes.get(path);
    if (!methods) return writeError(res, 404, 'not_found', `no route ${path}`);
    const route = methods.get(req.method ?? '');
    if (!route) {
      res.setHeader('Allow', [...methods.keys()].join(', '));
      return writeError(res, 405, 'method_not_allowed', `${req.method} is not allowed on ${path}`);
    }
    let who: Verified;
    try {
      const id = await verify(req);
      who = { user: id.user, install: id.install ?? '' };
    } catch (err) {
      if (!(err instanceof IdentityError)) {
        console.error(`${req.method} ${path}: verifying the token:`, err);
        return writeError(res, 500, 'internal', 'the token could not be checked');
      }
      // toolgate carries the domain error into the tool result; the
      // message says why and never holds the token.
      res.setHeader('WWW-Authenticate', err.challenge);
      return writeError(res, 401, 'unauthorized', err.message);
    }
    try {
      await route(req, res, who);
    } catch (err) {
      console.error(`${req.method} ${path}:`, err);
      if (!res.headersSent) writeError(res, 500, 'internal', 'the note could not be handled');
    }
  };
}

/**
 * readJSON reads a JSON body of at most maxBody bytes. It answers the
 * request itself and returns undefined when the body is too large or not
 * JSON.
 */
async function readJSON(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  // Checked first when declared, and counted as read when not (chunked).
  if (Number(req.headers['content-length'] ?? 0) > maxBody) return tooLarge(req, res);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBody) return tooLarge(req, res);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    writeError(res, 400, 'invalid', 'the body must be a JSON object {text, tags?}');
    return undefined;
  }
}

// tooLarge answers 413 and closes the connection once the answer is sent,
// rather than reading the rest of a body no one will use.
function tooLarge(req: IncomingMessage, res: ServerResponse): undefined {
  res.setHeader('Connection', 'close');
  res.on('finish', () => req.destroy());
  writeError(res, 413, 'too_large', `the body is over ${maxBody} bytes`);
  return undefined;
}

/**
 * markdownText is s as markdown that shows s and nothing else: every ASCII
 * punctuation character is backslash-escaped (CommonMark lets any of them
 * be), so the text cannot open a link, an image the card would fetch, HTML,
 * emphasis, a list or a heading; line breaks and other controls become
 * spaces, so it cannot start a block of its own.
 */
export function markdownText(s: string): string {
  return s.replace(/[!-/:-@[-`{-~]/g, '\\$&').replace(/[\p{Cc}\u2028\u2029]/gu, ' ');
}

function tagsMarkdown(tags: string[]): string {
  return tags.length ? ' — ' + tags.map((t) => `\\#${markdownText(t)}`).join(' ') : '';
}

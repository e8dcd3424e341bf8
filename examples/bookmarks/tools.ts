// The bookmarks example's tools. tools.json beside this file is generated
// from it by toolgate-tools; edit this file, then regenerate:
//
//	npx toolgate-tools build examples/bookmarks/tools.ts -o examples/bookmarks/tools.json
//
// CI (.ci/run) fails when tools.json drifts from what this file compiles to.
// Every app target runs on the Go component in main.go, which toolgate knows
// as "bookmarks" (Caddyfile.example's `component bookmarks …`).
import { z } from 'zod';
import type { KazzleTool } from '@toolgate/kit/tools';

// A bookmark's id as the component hands them out: "b1", "b2", … It fills a
// path segment of several targets; the pattern keeps it to one segment
// before toolgate's own check that a path value stays in its segment.
const BookmarkId = z.string().regex(/^b[0-9]+$/).describe('The bookmark\'s id, such as "b1".');

export const SaveBookmarkInput = z.object({
  url: z.url().describe('The page\'s absolute URL.'),
  title: z.string().min(1).describe('A short title for the bookmark.'),
  tags: z.array(z.string()).optional().describe('Tags the user mentions, if any.'),
}).strict();

export const FindByTagInput = z.object({
  tag: z.string().min(1).describe('The tag to list the bookmarks of.'),
}).strict();

export const BookmarkInput = z.object({
  id: BookmarkId,
}).strict();

export const ShareBookmarkInput = z.object({
  id: BookmarkId,
  with: z.object({
    email: z.email().describe('The recipient\'s email address.'),
    note: z.string().max(200).optional().describe('A short note to the recipient, only if the user gives one.'),
  }).strict().describe('Whom to share with.'),
  permission: z.enum(['view', 'comment']).default('view').describe('What the recipient may do.'),
  expiresInDays: z.int().min(1).max(90).optional().describe('How many days the share lasts; leave out for no expiry.'),
  notify: z.boolean().optional().describe('Whether to email the recipient now.'),
}).strict();

export const OpenOnDeviceInput = z.object({
  id: BookmarkId,
  computerId: z.string().min(1).max(64).describe('The device to open it on, such as "laptop".'),
}).strict();

// The tools that take nothing: the user comes from the identity token, never
// from the input.
const NoInput = z.object({}).strict();

const component = 'bookmarks';

const saveTarget = { type: 'app', component, method: 'POST', path: '/bookmarks', body: '${input}' } as const;
const listTarget = { type: 'app', component, method: 'GET', path: '/bookmarks' } as const;
const findByTagTarget = { type: 'app', component, method: 'GET', path: '/bookmarks', query: { tag: '${input.tag}' } } as const;
const bookmarkTarget = { type: 'app', component, method: 'GET', path: '/bookmarks/${input.id}' } as const;
const shareTarget = { type: 'app', component, method: 'POST', path: '/bookmarks/${input.id}/share', body: '${input}' } as const;
const openTarget = { type: 'app', component, method: 'POST', path: '/bookmarks/${input.id}/open', body: '${input}' } as const;
const deleteTarget = { type: 'app', component, method: 'DELETE', path: '/bookmarks/${input.id}' } as const;
// No body: the component answers a card; what to delete is the caller's.
const clearTarget = { type: 'app', component, method: 'POST', path: '/bookmarks/clear' } as const;
const whoamiTarget = { type: 'app', component, method: 'GET', path: '/whoami' } as const;
// Run by the example page (page.html), not by a component.
const readDraftTarget = { type: 'kazzle', name: 'read_draft' } as const;

export const tools = [
  {
    name: 'save_bookmark',
    displayName: 'Save bookmark',
    description: 'Save a web page as a bookmark for the user. Call this when the user asks to bookmark, save or remember a link. Give the page\'s absolute URL, a short title, and optional tags the user mentions.',
    input: SaveBookmarkInput,
    target: saveTarget,
  },
  {
    name: 'list_bookmarks',
    displayName: 'List bookmarks',
    description: 'List all of the user\'s bookmarks, one per line as "<id> <title> <url>". Call this when the user asks what they have saved, or when you need a bookmark\'s id and do not know it. To list only the bookmarks with one tag, call find_by_tag instead.',
    input: NoInput,
    target: listTarget,
    annotations: { readOnlyHint: true },
  },
  {
    name: 'find_by_tag',
    displayName: 'Find bookmarks by tag',
    description: 'List the user\'s bookmarks that carry one tag, one per line as "<id> <title> <url>". Call this when the user asks for bookmarks about a topic they tagged, e.g. "my golang links".',
    input: FindByTagInput,
    target: findByTagTarget,
    annotations: { readOnlyHint: true },
  },
  {
    name: 'show_bookmark',
    displayName: 'Show bookmark',
    description: 'Show one bookmark by its id (such as "b1") with its title, URL and tags, as a card the user can click. Call this when the user wants to see or open a particular bookmark; find the id with list_bookmarks first if you do not have it.',
    input: BookmarkInput,
    target: bookmarkTarget,
    annotations: { readOnlyHint: true },
  },
  {
    name: 'share_bookmark',
    displayName: 'Share bookmark',
    description: 'Share one bookmark by its id (such as "b1") with a person, by email. Call this when the user asks to share or send a bookmark to someone. Give the recipient\'s email address in with.email and, only if the user says so, a short note in with.note, the permission ("view", the default, or "comment"), how many days the share lasts (1 to 90; leave it out for no expiry), and whether to notify the person. Find the id with list_bookmarks first if you do not have it.',
    input: ShareBookmarkInput,
    target: shareTarget,
  },
  {
    name: 'open_on_device',
    displayName: 'Open on device',
    description: 'Open one bookmark by its id (such as "b1") in a browser on one of the user\'s devices, named by its computerId (such as "laptop"). Call this when the user asks to open a bookmark on a particular device. It does not open at once: it shows a card that only that device can answer, and the result says what the user chose ("Opened b1 on laptop." or "Not opened."). It needs a conversation to ask in; elsewhere it fails with confirmation_required.',
    input: OpenOnDeviceInput,
    target: openTarget,
  },
  {
    name: 'delete_bookmark',
    displayName: 'Delete bookmark',
    description: 'Delete one bookmark by its id (such as "b1"). Call this only when the user clearly asks to remove a bookmark; find the id with list_bookmarks first if you do not have it. This cannot be undone.',
    input: BookmarkInput,
    target: deleteTarget,
    annotations: { destructiveHint: true },
  },
  {
    name: 'clear_bookmarks',
    displayName: 'Clear bookmarks',
    description: 'Delete all of the user\'s bookmarks. Call this only when the user clearly asks to delete or clear all of them; to remove one, call delete_bookmark. It does not delete at once: it shows the user a card asking them to confirm, and the result says what they chose ("Deleted all N bookmarks." or "Kept all bookmarks."). It needs a conversation to ask in; elsewhere it fails with confirmation_required.',
    input: NoInput,
    target: clearTarget,
    annotations: { destructiveHint: true },
  },
  {
    name: 'whoami',
    displayName: 'Who am I',
    description: 'Tell who the current user and installation are, as the bookmarks app sees them, and where the call came from. Call this when the user asks who they are signed in as, or to check that identity reaches the app.',
    input: NoInput,
    target: whoamiTarget,
    annotations: { readOnlyHint: true },
  },
  {
    name: 'read_draft',
    displayName: 'Read the draft',
    description: 'Read the bookmark draft the user is editing on the page (its URL, title and tags). Call this before saving a bookmark the user has drafted on the page, or when the user asks about the draft.',
    input: NoInput,
    target: readDraftTarget,
    annotations: { readOnlyHint: true },
  },
] as const satisfies readonly KazzleTool[];

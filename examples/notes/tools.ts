// The notes example's tools, in the shape of the tool contract's tools.ts:
// Zod input schemas, shared target objects, `satisfies readonly KazzleTool[]`.
// toolgate loads this file directly (`manifest examples/notes/tools.ts` in
// Caddyfile.example: it runs toolgate-tools at load), and the component in
// src/server.ts imports it too: it checks bodies with the same schemas and
// puts deleteAllNotesTarget on its card's button.
import { z } from 'zod';
import type { KazzleTool } from '@toolgate/kit/tools';

// The name toolgate's configuration gives the component
// (`component notes http://127.0.0.1:9002`), which is also the audience of
// the identity tokens it gets.
export const component = 'notes';

export const AddNoteInput = z.object({
  text: z.string().min(1).max(2000).describe('The note, as the user said it.'),
  tags: z.array(z.string().min(1).max(32)).max(10).optional().describe('Tags the user mentions, if any.'),
}).strict();

// The tools that take nothing: whose notes they are comes from the identity
// token, never from the input.
const NoInput = z.object({}).strict();

const addNoteTarget = { type: 'app', component, method: 'POST', path: '/notes', body: '${input}' } as const;
const clearNotesTarget = { type: 'app', component, method: 'POST', path: '/notes/clear' } as const;
const exportNotesTarget = { type: 'app', component, method: 'GET', path: '/notes/export' } as const;

// Not a tool: the target of clear_notes' "Delete all" button. toolgate runs
// it when the button is pressed, with the identity of the paused call.
export const deleteAllNotesTarget = { type: 'app', component, method: 'POST', path: '/notes/clear/confirm' } as const;

export const tools = [
  {
    name: 'add_note',
    displayName: 'Add note',
    description: 'Add a short note for the user. Call this when the user asks to note, jot down or remember something. Give the note\'s text and any tags the user mentions.',
    input: AddNoteInput,
    target: addNoteTarget,
  },
  {
    name: 'clear_notes',
    displayName: 'Clear notes',
    description: 'Delete all of the user\'s notes. Call this only when the user clearly asks to delete or clear their notes. It does not delete at once: it shows the user a card asking them to confirm, and the result says what they chose ("Deleted all N notes." or "Kept all notes."). It needs a conversation to ask in; elsewhere it fails with confirmation_required.',
    input: NoInput,
    target: clearNotesTarget,
    annotations: { destructiveHint: true },
  },
  {
    name: 'export_notes',
    displayName: 'Export notes',
    description: 'Give all of the user\'s notes with their tags, oldest first. Call this when the user asks to see, list or export their notes. In a conversation the user also sees them as a list; through the Tools API the result is JSON: {"notes": [{"id", "text", "tags"}]}.',
    input: NoInput,
    target: exportNotesTarget,
    annotations: { readOnlyHint: true },
  },
] as const satisfies readonly KazzleTool[];

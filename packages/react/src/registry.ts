import type { ClientToolCall, ToolgateClientElement } from "./elements.js";

/** A client tool handler: gets the call's input and the call, returns a value or a promise. */
export type ToolHandler = (input: any, call: ClientToolCall) => unknown;

/** One mounted useToolgateTool: the hook keeps its latest handler in `current`. */
export interface ToolEntry {
  current: ToolHandler;
}

/** One mounted useToolgateReadable and the value it last gave. */
export interface ReadableEntry {
  name: string;
  value: unknown;
}

declare const process: { env: { NODE_ENV?: string } };

/** Whether to warn: bundlers replace process.env.NODE_ENV; a page without one has no process. */
function development(): boolean {
  try {
    return process.env.NODE_ENV !== "production";
  } catch {
    return true;
  }
}

function push<T>(stacks: Map<string, T[]>, name: string, entry: T, kind: string): void {
  const stack = stacks.get(name);
  if (!stack) {
    stacks.set(name, [entry]);
    return;
  }
  if (development()) {
    console.warn(`toolgate: ${kind} "${name}" registered again; the last mounted one is used until it unmounts`);
  }
  stack.push(entry);
}

/** Removes entry from its stack and tells whether it was the one in use (the top). */
function pull<T>(stacks: Map<string, T[]>, name: string, entry: T): boolean {
  const stack = stacks.get(name);
  const i = stack?.indexOf(entry) ?? -1;
  if (!stack || i < 0) return false;
  stack.splice(i, 1);
  if (!stack.length) stacks.delete(name);
  return i === stack.length;
}

/**
 * What the hooks of one <ToolgateProvider> (or one <ToolgateClient> without a
 * provider) registered, mirrored into the <toolgate-client> elements attached
 * to it.
 *
 * Per name, registrations form a stack: the last mounted is the one in use,
 * and when it unmounts the one below it is used again. The stacks live here,
 * not in the element, so registrations made before the element is attached
 * (a hook outside <ToolgateClient>, or effects that run before its own) are
 * not lost.
 */
export class Registry {
  #tools = new Map<string, ToolEntry[]>();
  #readables = new Map<string, ReadableEntry[]>();
  #clients = new Set<ToolgateClientElement>();
  #checker: ToolgateClientElement | null = null;

  addTool(name: string, entry: ToolEntry): () => void {
    push(this.#tools, name, entry, "tool");
    return () => {
      pull(this.#tools, name, entry);
    };
  }

  /**
   * Runs a call with the tool's handler in use, else with fallback (the
   * <ToolgateClient onClientTool> prop); with neither, the error result
   * `unknown tool <name>`, as the element requires of any handler.
   */
  dispatch(call: ClientToolCall, fallback: ((call: ClientToolCall) => unknown) | null | undefined): unknown {
    const top = this.#tools.get(call.name)?.at(-1);
    if (top) return top.current(call.input, call);
    if (fallback) return fallback(call);
    throw new Error(`unknown tool ${call.name}`);
  }

  /**
   * Registers a readable. A bad name or value throws the element's own
   * TypeError and registers nothing.
   */
  addReadable(name: string, value: unknown): ReadableEntry {
    this.#check(name, value);
    const entry = { name, value };
    push(this.#readables, name, entry, "readable");
    for (const el of this.#clients) el.setReadable(name, value);
    return entry;
  }

  /** Gives a registered readable a new value; a bad one throws and the old value stays. */
  updateReadable(entry: ReadableEntry, value: unknown): void {
    this.#check(entry.name, value);
    entry.value = value;
    if (this.#readables.get(entry.name)?.at(-1) !== entry) return; // not the one in use
    for (const el of this.#clients) el.setReadable(entry.name, value);
  }

  removeReadable(entry: ReadableEntry): void {
    if (!pull(this.#readables, entry.name, entry)) return;
    const below = this.#readables.get(entry.name)?.at(-1);
    for (const el of this.#clients) {
      if (below) el.setReadable(entry.name, below.value);
      else el.removeReadable(entry.name);
    }
  }

  /**
   * Mirrors the readables into el from now on, starting with those in use
   * now, in the order they were registered. Returns the detach function.
   */
  attach(el: ToolgateClientElement): () => void {
    this.#clients.add(el);
    for (const [name, stack] of this.#readables) el.setReadable(name, stack.at(-1)!.value);
    return () => {
      this.#clients.delete(el);
    };
  }

  /**
   * Checks a readable by the element's own rules (ReadableRegistry in
   * internal/web/client.js), whether or not an
   * element is attached yet: a <toolgate-client> that is never connected, and
   * so never opens a call stream, takes the value and lets it go again.
   */
  #check(name: string, value: unknown): void {
    this.#checker ??= document.createElement("toolgate-client") as ToolgateClientElement;
    this.#checker.setReadable(name, value);
    this.#checker.removeReadable(name);
  }
}

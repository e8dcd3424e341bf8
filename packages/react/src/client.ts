import {
  createContext, createElement, useContext, useEffect, useLayoutEffect, useRef, useState,
  type ReactElement, type ReactNode,
} from "react";
import type {
  ClientOptions, ClientToolCall, GetToken, ToolChange, ToolgateClientElement, ToolgateLog,
} from "./elements.js";
import { Registry, type ReadableEntry, type ToolHandler } from "./registry.js";

const RegistryContext = createContext<Registry | null>(null);

/**
 * Lets components anywhere below it register tools and readables, also
 * outside <ToolgateClient>. Wrap the tree in it when the hooks and the
 * client are not one inside the other.
 */
export function ToolgateProvider({ children }: { children?: ReactNode }): ReactElement {
  const [registry] = useState(() => new Registry());
  return createElement(RegistryContext.Provider, { value: registry }, children);
}

export interface ToolgateClientProps {
  /**
   * Where the gateway is mounted and the page's thread: `{api: {url}, threadId}`.
   * Compared by reference: each new object reopens the call stream, so keep
   * it stable (useMemo). Until it is given, the client waits.
   */
  options?: ClientOptions | null | undefined;
  /** Gives a page token for the thread; the latest one given is used (else options.api.getToken). */
  getToken?: GetToken | undefined;
  /** Runs the calls of tools no useToolgateTool registered: `({id, name, input}) => result`. */
  onClientTool?: ((call: ClientToolCall) => unknown) | undefined;
  /** `toolgate.tool.change` events: `e.detail` is `{id, name, status, isError?}`. */
  onToolChange?: ((event: CustomEvent<ToolChange>) => void) | undefined;
  /** `toolgate.log` events: `e.detail` is `{level, message, data?}`. */
  onLog?: ((event: CustomEvent<ToolgateLog>) => void) | undefined;
  children?: ReactNode;
}

/** latest keeps the value of this render where effects and callbacks read it. */
function useLatest<T>(value: T): { readonly current: T } {
  const ref = useRef(value);
  // A layout effect, not an assignment during render: a render React throws
  // away must not leak its value. It runs before any effect or event.
  useLayoutEffect(() => {
    ref.current = value;
  });
  return ref;
}

/**
 * Renders <toolgate-client> and gives its subtree the registry the hooks use
 * (its <ToolgateProvider>'s, if it has one). The element's onClientTool is
 * set once, to a function that finds the handler in use when a call comes.
 */
export function ToolgateClient({ options, getToken, onClientTool, onToolChange, onLog, children }: ToolgateClientProps): ReactElement {
  const outer = useContext(RegistryContext);
  const [own] = useState(() => new Registry());
  const registry = outer ?? own;
  const ref = useRef<ToolgateClientElement>(null);
  const props = useLatest({ options, getToken, onClientTool, onToolChange, onLog });
  // One dispatcher for this component's life: under StrictMode the effect
  // below runs twice and sets the same function again.
  const [dispatch] = useState(() => (call: ClientToolCall) => registry.dispatch(call, props.current.onClientTool));

  useEffect(() => {
    const el = ref.current!;
    el.onClientTool = dispatch;
    const detach = registry.attach(el);
    const change = (e: Event) => props.current.onToolChange?.(e as CustomEvent<ToolChange>);
    const log = (e: Event) => props.current.onLog?.(e as CustomEvent<ToolgateLog>);
    el.addEventListener("toolgate.tool.change", change);
    el.addEventListener("toolgate.log", log);
    return () => {
      detach();
      el.removeEventListener("toolgate.tool.change", change);
      el.removeEventListener("toolgate.log", log);
    };
  }, [registry, dispatch, props]);

  // setOptions closes the call stream and opens another, so it is called
  // only for an options object this element has not been given yet (a
  // StrictMode rerun of this effect gives it the same one).
  const applied = useRef<ClientOptions | null>(null);
  useEffect(() => {
    if (applied.current === (options ?? null)) return;
    if (!options) {
      ref.current!.close(); // no thread any more: stop taking its calls
      applied.current = null;
      return;
    }
    if (typeof getToken !== "function" && typeof options.api?.getToken !== "function") {
      throw new TypeError("<ToolgateClient> needs getToken, or options.api.getToken");
    }
    ref.current!.setOptions({
      ...options,
      api: {
        ...options.api,
        // The element keeps this function: it calls whichever getToken is current.
        getToken: () => (props.current.getToken ?? options.api.getToken)!(),
      },
    });
    applied.current = options;
  }, [options]); // getToken is read when called, so it is not a dependency

  return createElement(
    RegistryContext.Provider,
    { value: registry },
    createElement("toolgate-client", { ref }),
    children,
  );
}

function useRegistry(hook: string): Registry {
  const registry = useContext(RegistryContext);
  if (!registry) throw new Error(`${hook} must be used inside <ToolgateClient> or <ToolgateProvider>`);
  return registry;
}

/**
 * Registers a client tool while the component is mounted. handler gets
 * `(input, call)` and returns the result or a promise of it; a new handler
 * function takes effect at once, without registering again. Of two mounted
 * registrations of one name the last mounted is used (with a warning in
 * development); when it unmounts, the other is used again.
 */
export function useToolgateTool(name: string, handler: ToolHandler): void {
  const registry = useRegistry("useToolgateTool");
  const entry = useLatest(handler) as { current: ToolHandler };
  useEffect(() => registry.addTool(name, entry), [registry, name, entry]);
}

/**
 * Registers a page fact (a readable: docs/http-api.md, "Page context") while
 * the component is mounted: set on
 * mount, set again when JSON.stringify(value) changes (keeping its place),
 * removed on unmount. A bad name or value throws the element's TypeError
 * from the effect, to the nearest error boundary, and the previous value
 * stays. Two mounted registrations of one name: as for useToolgateTool.
 */
export function useToolgateReadable(name: string, value: unknown): void {
  const registry = useRegistry("useToolgateReadable");
  // A new object with the same JSON is no change, and an object changed in
  // place is one. A value JSON.stringify throws on (a cycle, a BigInt) is
  // keyed by identity: the element says what is wrong with it.
  let key: unknown;
  try {
    key = JSON.stringify(value);
  } catch {
    key = value;
  }
  const latest = useLatest({ value, key });
  const entry = useRef<ReadableEntry | null>(null);
  const appliedKey = useRef<unknown>(undefined);

  useEffect(() => {
    const e = registry.addReadable(name, latest.current.value);
    entry.current = e;
    appliedKey.current = latest.current.key;
    return () => {
      registry.removeReadable(e);
      entry.current = null;
    };
  }, [registry, name, latest]);

  useEffect(() => {
    const e = entry.current;
    if (!e || appliedKey.current === key) return;
    registry.updateReadable(e, latest.current.value);
    appliedKey.current = key;
  }, [registry, key, latest]);
}

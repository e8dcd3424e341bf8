// <ToolgateClient>, <ToolgateProvider>, useToolgateTool and useToolgateReadable,
// rendered with react-dom into jsdom against the package's built output and
// the real <toolgate-client> it brings. Calls are run as the element runs
// them: through the element's onClientTool, with {id, name, input}.
import { useMemo } from "react";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import {
  ToolgateClient, ToolgateProvider, useToolgateReadable, useToolgateTool,
  type ClientOptions, type ToolgateClientElement, type ToolHandler,
} from "../dist/index.js";
import { Registry } from "../dist/registry.js";
import { call, mount } from "./render.js";

// A page token that never comes: setOptions opens no connection in these tests.
const never = () => new Promise<string>(() => {});
const options: ClientOptions = { api: { url: "http://gateway.test/toolgate" }, threadId: "th_1" };

function Tool({ name, handler }: { name: string; handler: ToolHandler }) {
  useToolgateTool(name, handler);
  return null;
}

function Readable({ name, value }: { name: string; value: unknown }) {
  useToolgateReadable(name, value);
  return null;
}

let warn: ReturnType<typeof vi.spyOn>;
beforeEach(() => {
  warn = vi.spyOn(console, "warn").mockImplementation(() => {});
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe("useToolgateTool", () => {
  test("a hook's handler answers with (input, call), a value or a promise", async () => {
    const seen: unknown[] = [];
    const r = mount(
      <ToolgateClient options={options} getToken={never}>
        <Tool name="sync" handler={(input, c) => (seen.push([input, c]), { got: input.n })} />
        <Tool name="async" handler={async () => "later"} />
      </ToolgateClient>,
    );
    expect(await call(r.client(), "sync", { n: 2 }, "c1")).toEqual({ got: 2 });
    expect(seen).toEqual([[{ n: 2 }, { id: "c1", name: "sync", input: { n: 2 } }]]);
    expect(await call(r.client(), "async")).toBe("later");
    r.unmount();
  });

  test("a handler swapped between renders answers at once, without registering again", async () => {
    const addTool = vi.spyOn(Registry.prototype, "addTool");
    const proto = Object.getPrototypeOf(document.createElement("toolgate-client"));
    const setHandler = vi.spyOn(proto, "onClientTool", "set");
    const page = (n: number) => (
      <ToolgateClient options={options} getToken={never}>
        <Tool name="count" handler={() => n} />
      </ToolgateClient>
    );
    const r = mount(page(1));
    expect(await call(r.client(), "count")).toBe(1);
    r.rerender(page(2));
    expect(await call(r.client(), "count")).toBe(2);
    r.rerender(page(3));
    expect(await call(r.client(), "count")).toBe(3);
    expect(addTool).toHaveBeenCalledTimes(1);
    expect(setHandler).toHaveBeenCalledTimes(1); // the element's handler is set once
    r.unmount();
  });

  test("the last mounted registration wins, with a warning; its unmount restores the one before", async () => {
    const page = (second: boolean, third = false) => (
      <ToolgateClient options={options} getToken={never}>
        <Tool name="who" handler={() => "first"} />
        {second && <Tool name="who" handler={() => "second"} />}
        {third && <Tool name="who" handler={() => "third"} />}
      </ToolgateClient>
    );
    const r = mount(page(false));
    expect(warn).not.toHaveBeenCalled();
    r.rerender(page(true));
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]![0]).toMatch(/tool "who" registered again/);
    expect(await call(r.client(), "who")).toBe("second");

    r.rerender(page(true, true));
    expect(await call(r.client(), "who")).toBe("third");
    r.rerender(page(false, true)); // one below the top goes: the top stays
    expect(await call(r.client(), "who")).toBe("third");
    r.rerender(page(false, false));
    expect(await call(r.client(), "who")).toBe("first");
    r.unmount();
  });

  test("a handler swapped below the top does not take over", async () => {
    const page = (n: number) => (
      <ToolgateClient options={options} getToken={never}>
        <Tool name="who" handler={() => `first ${n}`} />
        <Tool name="who" handler={() => "second"} />
      </ToolgateClient>
    );
    const r = mount(page(1));
    r.rerender(page(2));
    expect(await call(r.client(), "who")).toBe("second");
    r.unmount();
  });

  test("names no hook registered go to onClientTool, the latest one given", async () => {
    const page = (tag: string) => (
      <ToolgateClient options={options} getToken={never} onClientTool={({ name, input }) => `${tag} ${name} ${input.x}`}>
        <Tool name="hooked" handler={() => "hook"} />
      </ToolgateClient>
    );
    const r = mount(page("a"));
    expect(await call(r.client(), "hooked")).toBe("hook");
    expect(await call(r.client(), "other", { x: 1 })).toBe("a other 1");
    r.rerender(page("b"));
    expect(await call(r.client(), "other", { x: 2 })).toBe("b other 2");
    r.unmount();
  });

  test("a name nobody handles is the error unknown tool <name>; so is one whose hook unmounted", async () => {
    const page = (on: boolean) => (
      <ToolgateClient options={options} getToken={never}>{on && <Tool name="t" handler={() => 1} />}</ToolgateClient>
    );
    const r = mount(page(true));
    expect(await call(r.client(), "t")).toBe(1);
    await expect(call(r.client(), "nope")).rejects.toThrow(new Error("unknown tool nope"));
    r.rerender(page(false));
    await expect(call(r.client(), "t")).rejects.toThrow(new Error("unknown tool t"));
    r.unmount();
  });

  test("outside <ToolgateClient>, a <ToolgateProvider> takes the registrations", async () => {
    const r = mount(
      <ToolgateProvider>
        <section>
          <Tool name="outside" handler={() => "from a sibling"} />
          <Readable name="where" value="sidebar" />
        </section>
        <ToolgateClient options={options} getToken={never} />
      </ToolgateProvider>,
    );
    expect(await call(r.client(), "outside")).toBe("from a sibling");
    expect(r.client().pageContext()).toEqual([{ name: "where", value: "sidebar" }]);
    r.unmount();
  });

  test("a hook with neither a client nor a provider above it throws", () => {
    const r = mount(<Tool name="t" handler={() => 1} />);
    expect(r.errors).toHaveLength(1);
    expect(String(r.errors[0])).toMatch(/useToolgateTool must be used inside <ToolgateClient> or <ToolgateProvider>/);
  });
});

describe("useToolgateReadable", () => {
  test("set on mount, set again only when its JSON changes, in place; removed on unmount", () => {
    const page = (lesson: unknown, more = true) => (
      <ToolgateClient options={options} getToken={never}>
        <Readable name="lesson" value={lesson} />
        {more && <Readable name="playback" value={{ positionSeconds: 83 }} />}
      </ToolgateClient>
    );
    const r = mount(page({ number: 3 }));
    const el = r.client();
    expect(el.pageContext()).toEqual([
      { name: "lesson", value: { number: 3 } },
      { name: "playback", value: { positionSeconds: 83 } },
    ]);
    const set = vi.spyOn(el, "setReadable");
    r.rerender(page({ number: 3 })); // a new object, the same JSON (and a new playback object too)
    expect(set).not.toHaveBeenCalled();
    r.rerender(page({ number: 4 }));
    expect(set.mock.calls).toEqual([["lesson", { number: 4 }]]);
    // Updated in place: still first.
    expect(el.pageContext().map((i) => i.name)).toEqual(["lesson", "playback"]);
    r.rerender(page({ number: 4 }, false));
    expect(el.pageContext()).toEqual([{ name: "lesson", value: { number: 4 } }]);
    r.unmount();
  });

  test("an object changed in place and rendered again is a change", () => {
    const state = { positionSeconds: 1 };
    const page = () => (
      <ToolgateClient options={options} getToken={never}>
        <Readable name="playback" value={state} />
      </ToolgateClient>
    );
    const r = mount(page());
    state.positionSeconds = 2;
    r.rerender(page());
    expect(r.client().pageContext()).toEqual([{ name: "playback", value: { positionSeconds: 2 } }]);
    r.unmount();
  });

  test("two of one name: the last mounted is used, its unmount restores the other", () => {
    const page = (second: boolean) => (
      <ToolgateClient options={options} getToken={never}>
        <Readable name="lesson" value="from the page" />
        {second && <Readable name="lesson" value="from the dialog" />}
      </ToolgateClient>
    );
    const r = mount(page(true));
    expect(warn.mock.calls[0]![0]).toMatch(/readable "lesson" registered again/);
    expect(r.client().pageContext()).toEqual([{ name: "lesson", value: "from the dialog" }]);
    r.rerender(page(false));
    expect(r.client().pageContext()).toEqual([{ name: "lesson", value: "from the page" }]);
    r.unmount();
  });

  test.each([
    ["a bad name", "no spaces", "x"],
    ["a value JSON cannot carry", "n", { n: 1n }],
    ["a cycle", "c", (() => { const o: Record<string, unknown> = {}; o.self = o; return o; })()],
    ["undefined", "u", undefined],
  ])("%s throws the element's TypeError from the hook", (_, name, value) => {
    let expected: unknown;
    try {
      (document.createElement("toolgate-client") as ToolgateClientElement).setReadable(name, value);
    } catch (e) {
      expected = e;
    }
    expect(expected).toBeInstanceOf(TypeError);
    const r = mount(
      <ToolgateClient options={options} getToken={never}>
        <Readable name={name} value={value} />
      </ToolgateClient>,
    );
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toBeInstanceOf(TypeError);
    expect((r.errors[0] as Error).message).toBe((expected as Error).message);
  });

  test("a bad value in an update throws, and the element keeps the value it had", () => {
    const registry = new Registry();
    const el = document.createElement("toolgate-client") as ToolgateClientElement;
    registry.attach(el);
    const entry = registry.addReadable("x", "ok");
    expect(() => registry.updateReadable(entry, Symbol("no"))).toThrow(TypeError);
    expect(el.pageContext()).toEqual([{ name: "x", value: "ok" }]);
    expect(entry.value).toBe("ok");
    expect(() => registry.addReadable("x", () => 1)).toThrow(TypeError);
    expect(el.pageContext()).toEqual([{ name: "x", value: "ok" }]);
  });
});

describe("<ToolgateClient>", () => {
  test("options are compared by reference: setOptions once per new object", () => {
    const proto = Object.getPrototypeOf(document.createElement("toolgate-client"));
    const setOptions = vi.spyOn(proto, "setOptions").mockImplementation(() => {});
    const page = (o: ClientOptions) => <ToolgateClient options={o} getToken={never} />;
    const r = mount(page(options));
    r.rerender(page(options));
    expect(setOptions).toHaveBeenCalledTimes(1);
    const other = { ...options, threadId: "th_2" };
    r.rerender(page(other));
    expect(setOptions).toHaveBeenCalledTimes(2);
    expect(setOptions.mock.calls[1]![0]).toMatchObject({ api: { url: options.api.url }, threadId: "th_2" });
    r.unmount();
  });

  test("useMemo'd options in a component that renders again keep the stream", () => {
    const proto = Object.getPrototypeOf(document.createElement("toolgate-client"));
    const setOptions = vi.spyOn(proto, "setOptions").mockImplementation(() => {});
    function Page({ thread, tick }: { thread: string; tick: number }) {
      const o = useMemo(() => ({ api: { url: "/toolgate" }, threadId: thread }), [thread]);
      return <ToolgateClient options={o} getToken={async () => `token ${tick}`} />;
    }
    const r = mount(<Page thread="th_1" tick={1} />);
    r.rerender(<Page thread="th_1" tick={2} />);
    expect(setOptions).toHaveBeenCalledTimes(1);
    r.rerender(<Page thread="th_2" tick={2} />);
    expect(setOptions).toHaveBeenCalledTimes(2);
  });

  test("the element's getToken calls the latest getToken prop", async () => {
    const proto = Object.getPrototypeOf(document.createElement("toolgate-client"));
    const setOptions = vi.spyOn(proto, "setOptions").mockImplementation(() => {});
    const page = (t: string) => <ToolgateClient options={options} getToken={async () => t} />;
    const r = mount(page("t1"));
    const given = setOptions.mock.calls[0]![0] as { api: { getToken: () => Promise<string> } };
    expect(await given.api.getToken()).toBe("t1");
    r.rerender(page("t2"));
    expect(await given.api.getToken()).toBe("t2");
    r.unmount();
  });

  test("options.api.getToken serves when there is no getToken prop; with neither it throws", async () => {
    const proto = Object.getPrototypeOf(document.createElement("toolgate-client"));
    const setOptions = vi.spyOn(proto, "setOptions").mockImplementation(() => {});
    const r = mount(<ToolgateClient options={{ ...options, api: { ...options.api, getToken: () => "inner" } }} />);
    const given = setOptions.mock.calls[0]![0] as { api: { getToken: () => string } };
    expect(given.api.getToken()).toBe("inner");
    r.unmount();
    const bad = mount(<ToolgateClient options={options} />);
    expect(String(bad.errors[0])).toMatch(/needs getToken/);
  });

  test("no options yet: no stream; options taken away: the stream closes", () => {
    const proto = Object.getPrototypeOf(document.createElement("toolgate-client"));
    const setOptions = vi.spyOn(proto, "setOptions").mockImplementation(() => {});
    const close = vi.spyOn(proto, "close");
    const r = mount(<ToolgateClient options={null} getToken={never} />);
    expect(setOptions).not.toHaveBeenCalled();
    r.rerender(<ToolgateClient options={options} getToken={never} />);
    expect(setOptions).toHaveBeenCalledTimes(1);
    close.mockClear();
    r.rerender(<ToolgateClient options={null} getToken={never} />);
    expect(close).toHaveBeenCalledTimes(1);
    r.unmount();
  });

  test("toolgate.tool.change and toolgate.log reach the latest onToolChange and onLog", () => {
    const seen: string[] = [];
    const page = (tag: string) => (
      <ToolgateClient
        options={options}
        getToken={never}
        onToolChange={(e) => seen.push(`${tag} change ${e.detail.name} ${e.detail.status}`)}
        onLog={(e) => seen.push(`${tag} log ${e.detail.level} ${e.detail.message}`)}
      />
    );
    const r = mount(page("a"));
    const el = r.client();
    const fire = (type: string, detail: unknown) => el.dispatchEvent(new CustomEvent(type, { detail, bubbles: true }));
    fire("toolgate.tool.change", { id: "c1", name: "t", status: "start" });
    r.rerender(page("b"));
    fire("toolgate.log", { level: "warn", message: "careful" });
    expect(seen).toEqual(["a change t start", "b log warn careful"]);
    r.unmount();
    fire("toolgate.log", { level: "info", message: "after" });
    expect(seen).toHaveLength(2);
  });

  test("the element's own log events arrive: a page context over its limits", () => {
    const logs: unknown[] = [];
    const r = mount(
      <ToolgateClient options={options} getToken={never} onLog={(e) => logs.push(e.detail)}>
        {Array.from({ length: 33 }, (_, i) => <Readable key={i} name={`r${i}`} value={i} />)}
      </ToolgateClient>,
    );
    expect(r.client().pageContext()).toHaveLength(32);
    expect(logs).toEqual([{ level: "warn", message: "page context over its limits: 1 item(s) dropped", data: { names: ["r0"] } }]);
    r.unmount();
  });
});

describe("StrictMode (mount, unmount, mount)", () => {
  test("leaves one registration, one readable, one setOptions and no warning", async () => {
    const proto = Object.getPrototypeOf(document.createElement("toolgate-client"));
    const setOptions = vi.spyOn(proto, "setOptions").mockImplementation(() => {});
    // Registrations alive now: added and not yet removed.
    let live = 0;
    const addTool = Registry.prototype.addTool;
    vi.spyOn(Registry.prototype, "addTool").mockImplementation(function (this: Registry, name, entry) {
      live++;
      const remove = addTool.call(this, name, entry);
      return () => {
        live--;
        remove();
      };
    });
    const page = (
      <ToolgateClient options={options} getToken={never}>
        <Tool name="t" handler={() => "once"} />
        <Readable name="lesson" value="Watching lesson 3" />
      </ToolgateClient>
    );
    const r = mount(page, { strict: true });
    expect(live).toBe(1);
    expect(warn).not.toHaveBeenCalled(); // a second live registration would warn
    expect(await call(r.client(), "t")).toBe("once");
    expect(r.client().pageContext()).toEqual([{ name: "lesson", value: "Watching lesson 3" }]);
    expect(setOptions).toHaveBeenCalledTimes(1);
    const el = r.client();
    r.unmount(); // one unmount removes everything: nothing was left registered twice
    expect(live).toBe(0);
    await expect(call(el, "t")).rejects.toThrow("unknown tool t");
  });
});

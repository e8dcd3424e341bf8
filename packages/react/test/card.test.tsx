// <ToolgateCard>: its props become the element's properties and its events
// onResolved / onError. The card is the real <toolgate-card>; the gateway it
// talks to is a stubbed fetch, and buttons are pressed in its shadow root.
import { afterEach, expect, test, vi } from "vitest";
import { ToolgateCard, type Answer } from "../dist/index.js";
import { mount } from "./render.js";

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

const actionRequired: Answer = {
  callId: "call_clear",
  tool: "clear_bookmarks",
  status: "action_required",
  card: {
    type: "action_required",
    title: "Clear all bookmarks?",
    elements: [{ type: "button", id: "confirm", label: "Clear", variant: "danger" }],
  },
};
const done: Answer = { callId: "call_clear", tool: "clear_bookmarks", status: "done", isError: false, content: "Cleared 2 bookmarks." };

function button(el: Element, label: string): HTMLButtonElement {
  const b = [...el.shadowRoot!.querySelectorAll("button")].find((x) => x.textContent === label);
  if (!b) throw new Error(`no button ${label}`);
  return b;
}

/** settle lets the card's fetch and its answer's promises run. */
const settle = () => new Promise((r) => setTimeout(r, 0));

test("props are the element's properties", () => {
  const getToken = async () => "tok";
  const r = mount(
    <ToolgateCard answer={done} gateway="http://gw.test/toolgate" getToken={getToken}
      identity={{ user: "u_1", install: "in_1" }} device="laptop" className="wide" />,
  );
  const el = r.card();
  expect(el.answer).toBe(done);
  expect(el.gateway).toBe("http://gw.test/toolgate");
  expect(el.getToken).toBe(getToken);
  expect(el.identity).toEqual({ user: "u_1", install: "in_1" });
  expect(el.device).toBe("laptop");
  expect(el.className).toBe("wide");
  expect(el.shadowRoot!.textContent).toContain("Cleared 2 bookmarks.");
  r.unmount();
});

test("the answer is handed over only when it is a new object: a card keeps what it shows", async () => {
  const fetch = vi.fn(async () => new Response(JSON.stringify(done), { status: 200 }));
  vi.stubGlobal("fetch", fetch);
  const page = (device: string) => (
    <ToolgateCard answer={actionRequired} gateway="/toolgate" identity={{ user: "u_1" }} device={device} />
  );
  const r = mount(page("laptop"));
  const el = r.card();
  const setAnswer = vi.spyOn(el, "answer", "set");
  button(el, "Clear").click();
  await settle();
  expect(el.shadowRoot!.textContent).toContain("Cleared 2 bookmarks.");
  r.rerender(page("laptop")); // the parent renders again with the same answer
  expect(setAnswer).toHaveBeenCalledTimes(1); // only the card's own, with the resumed answer
  expect(el.shadowRoot!.textContent).toContain("Cleared 2 bookmarks.");
  r.unmount();
});

test("a button press resumes the call, and the done answer reaches onResolved", async () => {
  const fetch = vi.fn(async (_url: string, _init: RequestInit) => new Response(JSON.stringify(done), { status: 200 }));
  vi.stubGlobal("fetch", fetch);
  const resolved: unknown[] = [];
  const r = mount(
    <ToolgateCard answer={actionRequired} gateway="/toolgate/" identity={{ user: "u_1", install: "in_1" }}
      onResolved={(e) => resolved.push(e.detail)} />,
  );
  button(r.card(), "Clear").click();
  await settle();
  expect(fetch).toHaveBeenCalledTimes(1);
  const [url, init] = fetch.mock.calls[0]!;
  expect(url).toBe("/toolgate/calls/call_clear/resume");
  expect(JSON.parse(init.body as string)).toEqual({ buttonId: "confirm", identity: { user: "u_1", install: "in_1" } });
  expect(resolved).toEqual([done]);
  r.unmount();
});

test("a refused press reaches onError, the latest one given", async () => {
  vi.stubGlobal("fetch", async () =>
    new Response(JSON.stringify({ error: { code: "conflict", message: "the card was answered otherwise" } }), { status: 409 }));
  const errors: string[] = [];
  const page = (tag: string) => (
    <ToolgateCard answer={actionRequired} gateway="/toolgate" identity={{ user: "u_1" }}
      onError={(e) => errors.push(`${tag} ${e.detail.status} ${e.detail.code} ${e.detail.message}`)} />
  );
  const r = mount(page("a"));
  r.rerender(page("b"));
  button(r.card(), "Skip").click();
  await settle();
  expect(errors).toEqual(["b 409 conflict the card was answered otherwise"]);
  r.unmount();
});

test("a card assigned to another device disables its buttons until device names it", () => {
  const assigned: Answer = { ...actionRequired, card: { ...(actionRequired.card as object), assignee: { computerId: "phone" } } };
  const page = (device?: string) => <ToolgateCard answer={assigned} gateway="/toolgate" device={device} />;
  const r = mount(page("laptop"));
  expect(button(r.card(), "Clear").disabled).toBe(true);
  expect(r.card().shadowRoot!.textContent).toContain("Continue on phone");
  r.rerender(page("phone"));
  expect(button(r.card(), "Clear").disabled).toBe(false);
  r.unmount();
});

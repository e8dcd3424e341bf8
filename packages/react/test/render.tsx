// Renders real React trees into jsdom with react-dom/client, inside act().
import { act, StrictMode, type ReactNode } from "react";
import { createRoot } from "react-dom/client";
import type { ToolgateCardElement, ToolgateClientElement } from "../dist/index.js";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

export function mount(node: ReactNode, { strict = false } = {}) {
  const container = document.createElement("div");
  document.body.append(container);
  // What a render or an effect threw: with no error boundary React unmounts
  // the tree, and act() throws the error again.
  const errors: unknown[] = [];
  const root = createRoot(container);
  const wrap = (n: ReactNode) => (strict ? <StrictMode>{n}</StrictMode> : n);
  try {
    act(() => root.render(wrap(node)));
  } catch (e) {
    errors.push(e);
  }
  return {
    container,
    errors,
    rerender(n: ReactNode) {
      act(() => root.render(wrap(n)));
    },
    unmount() {
      act(() => root.unmount());
      container.remove();
    },
    client(): ToolgateClientElement {
      return container.querySelector("toolgate-client") as ToolgateClientElement;
    },
    card(): ToolgateCardElement {
      return container.querySelector("toolgate-card") as ToolgateCardElement;
    },
  };
}

/** call runs a client tool call the way the element does: through its onClientTool. */
export async function call(el: ToolgateClientElement, name: string, input: unknown = {}, id = "call_1") {
  return el.onClientTool!({ id, name, input });
}

import { createElement, useEffect, useLayoutEffect, useRef, type CSSProperties, type ReactElement } from "react";
import type { Answer, CardError, Identity, ToolgateCardElement } from "./elements.js";

export interface ToolgateCardProps {
  /** The answer to show, as `POST /tools/{name}` or `GET /calls/{id}` give it. */
  answer: Answer | null | undefined;
  /** The gateway's base URL, for resuming and polling (`…/toolgate`). */
  gateway: string;
  /** Gives a caller token for resume and polling, if the gateway takes callers. */
  getToken?: (() => string | Promise<string>) | undefined;
  /** Loopback mode, without a token: who presses the buttons. */
  identity?: Identity | undefined;
  /** This device, for cards assigned to one. */
  device?: string | undefined;
  /** `toolgate.card.resolved`: `e.detail` is the done answer the card obtained. */
  onResolved?: ((event: CustomEvent<Answer>) => void) | undefined;
  /** `toolgate.card.error`: `e.detail` is `{status, code, message}`. */
  onError?: ((event: CustomEvent<CardError>) => void) | undefined;
  className?: string | undefined;
  style?: CSSProperties | undefined;
}

/**
 * Renders <toolgate-card>: its props are the element's properties, its events
 * call onResolved and onError. A card keeps its own state once shown (a
 * button pressed, the answer it resumed to): answer is handed to the element
 * only when it is a new object, and device only when it changes, since both
 * render the card again.
 */
export function ToolgateCard({ answer, gateway, getToken, identity, device, onResolved, onError, className, style }: ToolgateCardProps): ReactElement {
  const ref = useRef<ToolgateCardElement>(null);
  const handlers = useRef({ onResolved, onError });
  useLayoutEffect(() => {
    handlers.current = { onResolved, onError };
  });

  // Layout effects, in this order: the card has what it needs to resume or
  // poll before it is given its answer, and it is drawn before the browser paints.
  useLayoutEffect(() => {
    const el = ref.current!;
    el.gateway = gateway;
    el.getToken = getToken;
    el.identity = identity;
  }, [gateway, getToken, identity]);
  useLayoutEffect(() => {
    ref.current!.device = device ?? "";
  }, [device]);
  useLayoutEffect(() => {
    ref.current!.answer = answer ?? null;
  }, [answer]);

  useEffect(() => {
    const el = ref.current!;
    const resolved = (e: Event) => handlers.current.onResolved?.(e as CustomEvent<Answer>);
    const error = (e: Event) => handlers.current.onError?.(e as CustomEvent<CardError>);
    el.addEventListener("toolgate.card.resolved", resolved);
    el.addEventListener("toolgate.card.error", error);
    return () => {
      el.removeEventListener("toolgate.card.resolved", resolved);
      el.removeEventListener("toolgate.card.error", error);
    };
  }, []);

  return createElement("toolgate-card", { ref, className, style });
}

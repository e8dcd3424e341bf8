// React bindings for toolgate's page client (client tools and page context)
// and its cards (docs/kits.md, "@toolgate/react"), on top of the
// <toolgate-client> and <toolgate-card> elements,
// which this import defines (unless the page defined them already).
import "./elements.js";

export { ToolgateClient, ToolgateProvider, useToolgateTool, useToolgateReadable } from "./client.js";
export type { ToolgateClientProps } from "./client.js";
export { ToolgateCard } from "./card.js";
export type { ToolgateCardProps } from "./card.js";
export type { ToolHandler } from "./registry.js";
export type {
  Answer, CardChoice, CardError, ClientOptions, ClientToolCall, GetToken, Identity, ToolChange, ToolgateCardElement,
  ToolgateClientElement, ToolgateLog,
} from "./elements.js";

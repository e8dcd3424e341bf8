// @toolgate/kit: the component's half of the toolgate contract for Node
// (docs/kits.md, "TypeScript: @toolgate/kit"), and the types a tools.ts
// file declares its tools with.

export type * from './types.js';
export { CONTEXT_HEADER, IDEMPOTENCY_HEADER, ToolContextError, idempotencyKey, isThreadToolInvocation, toolContext } from './context.js';
export type { RequestLike } from './context.js';
export { DEFAULT_ISSUER, IdentityError, bearerToken, identityVerifier, jwksURL, verifyIdentity } from './verify.js';
export type { Identity, Verifier, VerifyOptions } from './verify.js';
export {
  AnswerError,
  NotThreadError,
  button,
  card,
  cardAnswer,
  cardResponse,
  domainError,
  errorResponse,
  result,
  resultResponse,
  writeCard,
  writeError,
  writeResult,
  writeText,
} from './card.js';
export type { ButtonInit, CardInit, CardOptions } from './card.js';
export { ToolgateError, getToolgateCall, isToolgateAnswer, pausedToolgateCalls, resumeToolgateCall, toolgateAnswerText, toolgateCallId, toolgateTools } from './ai.js';
export type {
  ResumeToolgateCallOptions,
  ToolgateActionRequiredAnswer,
  ToolgateAnswer,
  ToolgateConnection,
  ToolgateDoneAnswer,
  ToolgateIdentity,
  ToolgateInput,
  ToolgateListedTool,
  ToolgateModelOutput,
  ToolgatePendingAnswer,
  ToolgateTool,
  ToolgateToolsOptions,
} from './ai.js';

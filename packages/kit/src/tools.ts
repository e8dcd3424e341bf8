// '@toolgate/kit/tools': what a tools.ts file and a tool's handler import,
// as '@kazzle/app/tools' of the platform the protocol came from (see
// docs/configuration.md, `kazzle`) has them (the tool types, toolContext and
// isThreadToolInvocation).

export type {
  Annotations,
  AppTarget,
  Approval,
  ApprovalInfo,
  KazzleTarget,
  KazzleTool,
  McpTarget,
  Method,
  Operation,
  OperationParam,
  RequestSpec,
  Target,
  Tool,
  ToolContext,
  UrlTarget,
} from './types.js';
export { isThreadToolInvocation, toolContext } from './context.js';

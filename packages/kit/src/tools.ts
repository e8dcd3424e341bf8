// '@toolgate/kit/tools': what a tools.ts file and a tool's handler import,
// as the seed's '@kazzle/app/tools'.

export type {
  Annotations,
  AppTarget,
  KazzleTarget,
  KazzleTool,
  Method,
  RequestSpec,
  Target,
  Tool,
  UrlTarget,
} from './types.js';

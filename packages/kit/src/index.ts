// @toolgate/kit: the component's half of the toolgate contract for
// Node, and the types a tools.ts file declares its tools with.

export type * from './types.js';

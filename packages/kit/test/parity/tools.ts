// The parity test's tools: one schema per area where Zod and JSON Schema
// 2020-12 could disagree. parity.test.mjs feeds the same inputs to these
// Zod schemas and to a gateway serving this file.
import { z } from 'zod';
import type { KazzleTool } from '@toolgate/kit/tools';

const parity = { type: 'app', component: 'parity', method: 'POST', path: '/call' } as const;

export const tools = [
  {
    name: 'contact',
    displayName: 'Contact',
    description: 'String formats.',
    input: z.object({
      email: z.email(),
      site: z.url().optional(),
      id: z.uuid().optional(),
      at: z.iso.datetime().optional(),
      ip: z.ipv4().optional(),
    }).strict(),
    target: parity,
  },
  {
    name: 'order',
    displayName: 'Order',
    description: 'Numbers, arrays, enums, nested objects, nullable.',
    input: z.object({
      qty: z.int().min(1).max(10),
      price: z.number().gt(0).lt(1000).multipleOf(0.01),
      size: z.enum(['s', 'm', 'l']),
      items: z.array(z.object({
        sku: z.string().regex(/^[A-Z]{3}-\d{3}$/),
        n: z.int().positive(),
      }).strict()).min(1).max(3),
      ship: z.object({
        city: z.string().min(2).max(20),
        zip: z.string().length(5).optional(),
      }).strict(),
      note: z.string().max(5).nullable(),
      weight: z.number().optional(),
    }).strict(),
    target: parity,
  },
  {
    name: 'search',
    displayName: 'Search',
    description: 'A plain (stripping) object and a default.',
    input: z.object({
      q: z.string().min(1),
      limit: z.int().min(1).max(50).default(10),
    }),
    target: parity,
  },
] as const satisfies readonly KazzleTool[];

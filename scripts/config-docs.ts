/**
 * Prints the README's configuration table from the config schema, so the two never disagree:
 * `npx tsx scripts/config-docs.ts`.
 */
import type { z } from 'zod';
import { ConfigSchema } from '../src/platform/config.js';

interface Def {
  type: string;
  defaultValue?: unknown;
  in?: { _zod: { def: Def } };
  innerType?: { _zod: { def: Def } };
}

function defaultOf(schema: z.ZodType): string {
  let def = (schema as unknown as { _zod: { def: Def } })._zod.def;
  for (;;) {
    if (def.type === 'default') {
      const v = typeof def.defaultValue === 'function' ? (def.defaultValue as () => unknown)() : def.defaultValue;
      return v === '' ? '(empty)' : `\`${String(v)}\``;
    }
    if (def.type === 'pipe' && def.in) def = def.in._zod.def;
    else if (def.type === 'optional' && def.innerType) return '(unset)';
    else return '(required)';
  }
}

const rows = Object.entries(ConfigSchema.shape).map(
  ([name, schema]) =>
    `| \`${name}\` | ${defaultOf(schema as z.ZodType)} | ${(schema as z.ZodType).description ?? ''} |`,
);
console.log(['| Variable | Default | Meaning |', '| --- | --- | --- |', ...rows].join('\n'));

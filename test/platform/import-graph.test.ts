import { describe, expect, it } from 'vitest';
import { checkImports, readSources } from '../../scripts/import-graph.js';
import { repoRoot } from '../helpers/cli.js';

/** The house's import rules (scripts/import-graph.ts, run by `npm test`): the tree keeps them, and a probe breaks each. */
describe('the import graph of src/ and jobs/', () => {
  const files = readSources(repoRoot);

  it('has no cycle and no import from a lower layer to a higher one', () => {
    expect(files.size).toBeGreaterThan(200);
    expect(checkImports(files)).toEqual([]);
  });

  it('finds an import from a lower layer to a higher one, a type-only one included', () => {
    const probe = new Map(files);
    probe.set('src/platform/lib/probe.ts', "import type { ScimActor } from '../../features/scim/audit.js';\n");
    probe.set('src/profiles/probe.ts', "export { runShard } from '../pipelines/exports/shard/run-shard.js';\n");
    expect(checkImports(probe).map((f) => f.text)).toEqual([
      'src/platform/lib/probe.ts (platform: helpers) imports src/features/scim/audit.ts (features), a higher layer',
      'src/profiles/probe.ts (profiles) imports src/pipelines/exports/shard/run-shard.ts (pipelines), a higher layer',
    ]);
  });

  it('finds a cycle made of a type-only import and a dynamic one', () => {
    const probe = new Map(files);
    probe.set('src/features/feed/probe-a.ts', "import type { B } from './probe-b.js';\nexport type A = B;\n");
    probe.set(
      'src/features/feed/probe-b.ts',
      "export type B = string;\nexport const a = () => import('./probe-a.js');\n",
    );
    expect(checkImports(probe)).toEqual([
      {
        kind: 'cycle',
        text: 'import cycle (type-only and dynamic imports count): src/features/feed/probe-a.ts, src/features/feed/probe-b.ts',
      },
    ]);
  });

  it('finds a file in no layer', () => {
    const probe = new Map(files);
    probe.set('src/loose.ts', 'export const x = 1;\n');
    expect(checkImports(probe).map((f) => f.text)).toEqual(['src/loose.ts is in no layer: add its folder to LAYERS']);
  });
});

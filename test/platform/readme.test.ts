import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/platform/config.js';
import { QUEUE_NAMES } from '../../src/platform/queues/index.js';
import { createTestEnv } from '../helpers/context.js';
import { repoRoot } from '../helpers/cli.js';

const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');

describe('README stays true', () => {
  it('opens with the two set-up commands', () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    expect(firstBlock).toMatch(/^npm ci && npm run demo\b/m);
    expect(firstBlock).toMatch(/^npm ci && npm test\b/m);
  });

  it('documents every environment variable with its description', () => {
    for (const [name, schema] of Object.entries(ConfigSchema.shape)) {
      const row = readme.split('\n').find((l) => l.startsWith(`| \`${name}\` |`));
      expect(
        row,
        `${name} missing from the README's configuration table (npx tsx scripts/config-docs.ts)`,
      ).toBeDefined();
      expect(row).toContain((schema as { description?: string }).description ?? '');
    }
  });

  it('names every queue and every route', async () => {
    for (const q of QUEUE_NAMES) expect(readme, q).toContain(`\`${q}\``);
    const env = await createTestEnv();
    try {
      for (const r of env.app.routeCatalog.filter(
        (r) => r.method !== 'HEAD' && (r.config.permission || r.config.auth === 'scim'),
      )) {
        expect(readme, `${r.method} ${r.url}`).toContain(`| ${r.method} | \`${r.url}\` |`);
      }
    } finally {
      await env.close();
    }
  });
});

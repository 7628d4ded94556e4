import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { generateUsers } from '../../src/features/synthetic-users/generate.js';
import { cliEnvOf, repoRoot } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment } from '../helpers/export-fixtures.js';
import { seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';
import { openWarehouse, runShell } from '../helpers/warehouse-duckdb.js';

/**
 * docs/cdi.md "A round trip", run as written (blocks marked `<!-- cdi-example: NAME -->`): a Parquet export of a
 * segment, a tier changed in DuckDB and dropped as Parquet under the integration's prefix, `ces cdi sync --wait`, and
 * an incremental export that holds exactly the changed members, each with the new tier. Only `<export>`, `<delta>`
 * and `<drops>` are replaced, by the directories a reader finds as the page says; the names the blocks use (the
 * demo's workspace, segment and integration) are this test's own.
 */

const DOC = path.join(repoRoot, 'docs/cdi.md');
const env = useTestEnv();
let ws: SeededWorkspace;
let blocks: Map<string, { lang: string; code: string }>;

beforeAll(async () => {
  const markdown = await readFile(DOC, 'utf8');
  blocks = new Map(
    [...markdown.matchAll(/<!-- cdi-example: ([\w-]+) -->\n```(\w+)\n([\s\S]*?)\n```\n/g)].map((m) => [
      m[1]!,
      { lang: m[2]!, code: m[3]! },
    ]),
  );
  expect([...blocks.keys()]).toEqual(['export', 'change-tier', 'sync', 'delta', 'check']);
  ws = await seedWorkspace(env.ctx.pool, 'Demo Workspace');
  await createSegment(env.ctx.pool, ws.workspaceId, 'seg-all-users', { all: [] });
  await generateUsers(env.ctx.pool, { workspaceId: ws.workspaceId, count: 2_000, seed: 42 });
  await env.ctx.pool.query(
    `INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ('0c3d9b71-5e2a-4f60-8b14-6a7d2e9f3c88', $1, 'lake drops', $2)`,
    [ws.workspaceId, JSON.stringify({ type: 'bucket', prefix: 'cdi/users/', format: 'parquet' })],
  );
  env.startWorkers([segmentExportJob, exportShardJob]);
}, 120_000);

const store = () => localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws);

/** Runs a shell block in the repository, as `ces` for this test's schema; returns the export directory it printed, if any. */
async function shell(name: string): Promise<{ stdout: string; dir?: string }> {
  const block = blocks.get(name)!;
  expect(block.lang).toBe('sh');
  const cli = Object.entries(cliEnvOf(env.config))
    .map(([k, v]) => `export ${k}='${v}'`)
    .join('\n');
  const { stdout } = await runShell(`${cli}\n${block.code}`, repoRoot);
  const manifest = /manifest: (\S+)/.exec(stdout)?.[1];
  return { stdout, dir: manifest ? path.join(store(), path.dirname(manifest)) : undefined };
}

describe('docs/cdi.md: a round trip', () => {
  it('exports, changes a tier in DuckDB, syncs it back, and finds exactly the changed members in the next incremental export', async () => {
    const exported = await shell('export');
    expect(exported.dir).toBeDefined();
    const drops = path.join(store(), 'cdi/users');
    await mkdir(drops, { recursive: true });

    const warehouse = await openWarehouse(repoRoot);
    try {
      const gold = await warehouse.query(
        `SELECT count(*)::INTEGER AS n FROM read_parquet('${exported.dir}/*.parquet') WHERE json_extract_string(custom_attributes, '$.loyalty_tier') = 'gold'`,
      );
      const golds = Number(gold[0]!.n);
      expect(golds).toBeGreaterThan(50);

      await warehouse.query(
        blocks.get('change-tier')!.code.replaceAll('<export>', exported.dir!).replaceAll('<drops>', drops),
      );
      const synced = await shell('sync');
      expect(synced.stdout).toContain(`success: ${golds.toLocaleString('en-US')} row(s) synced, 0 refused`);

      const delta = await shell('delta');
      expect(delta.dir).toBeDefined();
      const check = await warehouse.query(blocks.get('check')!.code.replaceAll('<delta>', delta.dir!));
      expect(check).toEqual([{ loyalty_tier: 'platinum', members: BigInt(golds) }]);
    } finally {
      warehouse.close();
    }
  }, 240_000);
});

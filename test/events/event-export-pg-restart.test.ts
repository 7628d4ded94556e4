import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventExportJob } from '../../jobs/event-export.js';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { startReconciler } from '../../src/runtime/reconcile/reconciler.js';
import { waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import {
  allDelivered,
  expectExactlyOnce,
  fileProgress,
  keepLogging,
  localFiles,
  logEvents,
  type Format,
} from '../helpers/event-delivery.js';
import { startOwnPostgres, type OwnPostgres } from '../helpers/own-servers.js';

/**
 * PostgreSQL restarted (a fast stop, and an immediate one, as a crash) while an event export writes its files and
 * events keep being logged; and an outage longer than a pass's retries. Every logged event is in exactly one file.
 */

// A PostgreSQL of this file's own, stopped and started; Redis is the shared one.
let pg: OwnPostgres;
let env: TestEnv;
const tag = randomUUID().slice(0, 8);
const TYPES = ['users.behaviors.CustomEvent', 'users.behaviors.Purchase'] as const;

beforeAll(async () => {
  pg = await startOwnPostgres();
  env = await createTestEnv({
    DATABASE_URL: pg.url,
    DATABASE_CONNECT_TIMEOUT_MS: '2000',
    EVENT_EXPORT_SWEEP_SECONDS: '1',
  });
}, 120_000);
afterAll(async () => {
  await env?.close();
  await pg?.close();
});

async function exportOf(format: Format, name: string): Promise<{ exportId: string; workspaceId: string; dir: string }> {
  const exportId = randomUUID();
  const applied = await applyWorkspaceFile(
    env.ctx.pool,
    parseWorkspaceFile(`
company: { name: Restart ${name} ${tag} }
workspaces:
  - name: Restart ${name} ${tag}
    event_exports:
      - { id: ${exportId}, name: lake, format: ${format}, flush_seconds: 1, max_events_per_file: 20 }
`),
  );
  const workspaceId = Object.values(applied.workspaceIds)[0]!;
  const dir = localWorkspaceDir(env.config.LOCAL_STORE_DIR, { companyId: applied.companyId, workspaceId });
  return { exportId, workspaceId, dir };
}

/** Delivers a backlog, restarts PostgreSQL once some of the pass's files are written and not all, counts the files. */
async function deliverThrough(format: Format, name: string, restart: () => Promise<void>): Promise<void> {
  const { exportId, workspaceId, dir } = await exportOf(format, name);
  await logEvents(env.ctx.pool, workspaceId, {
    transactions: 20,
    perTransaction: 500,
    types: [...TYPES],
    hoursAgo: [1, 0],
  });
  const workers = env.startWorkers([eventExportJob]);
  const reconciler = startReconciler(env.ctx, { intervalMs: 1_000 });
  const logging = keepLogging(env.ctx.pool, workspaceId, [...TYPES]);
  try {
    await waitFor(
      async () => {
        const p = await fileProgress(env.ctx.pool, exportId);
        return p.written >= 30 && p.unwritten >= 30;
      },
      60_000,
      10,
    );
    await restart();
    await new Promise((r) => setTimeout(r, 3_000));
    const logged = await logging.stop();
    expect(logged.batches).toBeGreaterThan(0);
    await waitFor(() => allDelivered(env.ctx.pool, exportId).catch(() => false), 120_000, 250);
    const files = await localFiles(dir, format);
    const counted = await expectExactlyOnce(env.ctx.pool, exportId, files);
    expect(counted.events).toBeGreaterThan(10_000);
    for (const records of files.values()) expect(records.length).toBeLessThanOrEqual(20);
  } finally {
    await logging.stop();
    await reconciler.stop();
    await workers.close(5_000);
  }
}

describe('PostgreSQL restarted while an event export delivers', () => {
  it('stopped fast and started again: every event in exactly one file', async () => {
    await deliverThrough('ndjson', 'fast', async () => {
      await pg.stop('fast');
      await new Promise((r) => setTimeout(r, 1_000));
      await pg.start();
    });
  }, 180_000);

  it('stopped immediately (as a crash) and started again: every event in exactly one file', async () => {
    await deliverThrough('avro', 'immediate', async () => {
      await pg.stop('immediate');
      await new Promise((r) => setTimeout(r, 1_000));
      await pg.start();
    });
  }, 180_000);

  it('away longer than a pass is retried: delivery resumes when it is back, every event in exactly one file', async () => {
    await deliverThrough('ndjson', 'long', async () => {
      await pg.stop('immediate');
      // A pass that failed meanwhile has spent its attempts (five, 2 s apart and doubling: about 30 s).
      await new Promise((r) => setTimeout(r, 40_000));
      await pg.start();
    });
  }, 240_000);
});

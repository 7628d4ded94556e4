import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventExportJob } from '../../jobs/event-export.js';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { EVENT_EXPORT_QUEUE } from '../../src/platform/queues/event-export.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { startReconciler, type Reconciler } from '../../src/runtime/reconcile/reconciler.js';
import type { RunningWorkers } from '../../src/runtime/workers.js';
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
import { startOwnRedis, type OwnRedis } from '../helpers/own-servers.js';

/**
 * Redis loses everything while an event export delivers, and events keep being logged: the sweep's job scheduler and
 * the queued and running passes are gone. The export's files are planned in PostgreSQL, so once the sweep is back (the
 * reconciler's pass after a FLUSHALL; the worker's start hook after a restart, which drops its connection) every
 * logged event is in exactly one file.
 */

// A Redis of this file's own, without persistence, flushed and restarted; PostgreSQL is the shared one.
let redis: OwnRedis;
let env: TestEnv;
const tag = randomUUID().slice(0, 8);
const TYPES = ['users.behaviors.CustomEvent', 'users.behaviors.Purchase'] as const;

beforeAll(async () => {
  redis = await startOwnRedis();
  env = await createTestEnv({ REDIS_URL: redis.url, EVENT_EXPORT_SWEEP_SECONDS: '1' });
}, 60_000);
afterAll(async () => {
  await env?.close();
  await redis?.close();
});

/** A workspace of its own with one export of the format, files of 20 events. */
async function exportOf(format: Format): Promise<{ exportId: string; workspaceId: string; dir: string }> {
  const exportId = randomUUID();
  const name = `${format}-${tag}`;
  const applied = await applyWorkspaceFile(
    env.ctx.pool,
    parseWorkspaceFile(`
company: { name: Redis Loss ${name} }
workspaces:
  - name: Redis Loss ${name}
    event_exports:
      - { id: ${exportId}, name: lake, format: ${format}, flush_seconds: 1, max_events_per_file: 20 }
`),
  );
  const workspaceId = Object.values(applied.workspaceIds)[0]!;
  const dir = localWorkspaceDir(env.config.LOCAL_STORE_DIR, { companyId: applied.companyId, workspaceId });
  return { exportId, workspaceId, dir };
}

const schedulers = async () =>
  (await env.ctx.queues.get(EVENT_EXPORT_QUEUE).getJobSchedulers(0, -1)).map((s) => String(s.key));

/** Delivers a backlog, breaks Redis once some files of the pass are written and not all, and counts the files. */
async function deliverThrough(format: Format, fault: () => Promise<void>, withReconciler: boolean): Promise<void> {
  const { exportId, workspaceId, dir } = await exportOf(format);
  await logEvents(env.ctx.pool, workspaceId, {
    transactions: 30,
    perTransaction: 500,
    types: [...TYPES],
    hoursAgo: [1, 0],
  });
  const workers: RunningWorkers = env.startWorkers([eventExportJob]);
  const reconciler: Reconciler | undefined = withReconciler
    ? startReconciler(env.ctx, { intervalMs: 1_000 })
    : undefined;
  const logging = keepLogging(env.ctx.pool, workspaceId, [...TYPES]);
  try {
    await waitFor(
      async () => {
        const p = await fileProgress(env.ctx.pool, exportId);
        return p.written >= 50 && p.unwritten >= 50;
      },
      60_000,
      10,
    );
    await fault();
    // Some time with events logged and passes made after the fault, then the log stops growing.
    await new Promise((r) => setTimeout(r, 3_000));
    const logged = await logging.stop();
    expect(logged.batches).toBeGreaterThan(0);
    await waitFor(() => allDelivered(env.ctx.pool, exportId), 90_000, 250);
    expect(await schedulers()).toEqual(['event-export-sweep']);
    const files = await localFiles(dir, format);
    const counted = await expectExactlyOnce(env.ctx.pool, exportId, files);
    expect(counted.events).toBeGreaterThan(15_000);
    for (const records of files.values()) expect(records.length).toBeLessThanOrEqual(20);
  } finally {
    await logging.stop();
    await reconciler?.stop();
    await workers.close(5_000);
  }
}

describe('Redis lost while an event export delivers', () => {
  it('FLUSHALL: the reconciler brings the sweep back, and every event is in exactly one file', async () => {
    await deliverThrough(
      'avro',
      async () => {
        expect(await schedulers()).toEqual(['event-export-sweep']);
        await redis.flush();
        expect(await schedulers()).toEqual([]);
      },
      true,
    );
  }, 180_000);

  it("restarted empty: the worker's start hook brings the sweep back, and every event is in exactly one file", async () => {
    await deliverThrough(
      'parquet',
      async () => {
        await redis.kill();
        await new Promise((r) => setTimeout(r, 1_000));
        await redis.start();
      },
      false,
    );
  }, 180_000);
});

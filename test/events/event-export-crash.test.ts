import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventExportJob } from '../../jobs/event-export.js';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { cliEnvOf, QUICK_STALLED_CHECK, spawnCli, waitFor } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { allDelivered, expectExactlyOnce, fileProgress, localFiles, logEvents } from '../helpers/event-delivery.js';

/**
 * A worker process SIGKILLed while it writes an event export's files: the export had planned its files (the rows of
 * each recorded) and written some. Another worker takes the pass up again once BullMQ sees the job stalled: every
 * logged event of the export's types is in exactly one file, and the files written before the kill are the same
 * objects after.
 */

const env = useTestEnv({ config: { EVENT_EXPORT_SWEEP_SECONDS: '1', ...QUICK_STALLED_CHECK } });
const tag = randomUUID().slice(0, 8);
const EXPORT_ID = randomUUID();
// Uninstalls are logged too, and not the export's: none may be delivered.
const TYPES = ['users.behaviors.CustomEvent', 'users.behaviors.Purchase'] as const;
let workspaceId: string;
let dir: string;
let child: ChildProcess | undefined;

const FILE = `
company: { name: Crash Co ${tag} }
workspaces:
  - name: Crash ${tag}
    event_exports:
      - id: ${EXPORT_ID}
        name: lake
        format: ndjson
        event_types: [${TYPES.join(', ')}]
        flush_seconds: 1
        max_events_per_file: 20
`;

beforeAll(async () => {
  const applied = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(FILE));
  workspaceId = Object.values(applied.workspaceIds)[0]!;
  dir = localWorkspaceDir(env.config.LOCAL_STORE_DIR, { companyId: applied.companyId, workspaceId });
});
afterAll(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
});

describe('a worker SIGKILLed in the middle of an event export pass', () => {
  it('loses no event and doubles none: another worker writes what the killed pass planned', async () => {
    // About 2,000 files of 20 (two types, three hours, many transactions), and uninstalls that are not the export's.
    await logEvents(env.ctx.pool, workspaceId, {
      transactions: 60,
      perTransaction: 600,
      types: [...TYPES, 'users.behaviors.Uninstall'],
      hoursAgo: [2, 1, 0],
    });

    child = spawnCli(
      ['worker', '--queues', 'event-export'],
      cliEnvOf(env.config, {
        EVENT_EXPORT_SWEEP_SECONDS: '1',
        MIGRATE_ON_START: 'false',
        WORKER_CONCURRENCY: '1',
        WORKER_METRICS_PORT: '0',
        ...QUICK_STALLED_CHECK,
      }),
    );
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child!.once('exit', (_c, signal) => resolve(signal)),
    );
    // Killed once it has written some of the files it planned, and not all.
    let atKill = { written: 0, unwritten: 0 };
    await waitFor(
      async () => {
        if (child!.exitCode !== null) throw new Error(`the worker exited: ${stderr}`);
        atKill = await fileProgress(env.ctx.pool, EXPORT_ID);
        return atKill.written >= 100 && atKill.unwritten >= 100;
      },
      90_000,
      10,
    );
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    child = undefined;
    const afterKill = await fileProgress(env.ctx.pool, EXPORT_ID);
    expect(afterKill.unwritten, 'planned files left unwritten by the killed pass').toBeGreaterThan(0);
    expect(afterKill.written).toBeGreaterThanOrEqual(atKill.written);
    // What the dead pass wrote, to compare with what is there at the end.
    const before = await localFiles(dir, 'ndjson');
    const bytesBefore = new Map<string, Buffer>();
    for (const key of before.keys()) bytesBefore.set(key, await readFile(path.join(dir, key)));
    expect(bytesBefore.size).toBeGreaterThanOrEqual(atKill.written);

    // Events logged while no worker runs are delivered too.
    await logEvents(env.ctx.pool, workspaceId, { transactions: 3, perTransaction: 100, types: [...TYPES] });
    // Another worker: BullMQ hands it the dead worker's pass once that job's lock lapses (its sweep's passes wait):
    // seconds with QUICK_STALLED_CHECK.
    env.startWorkers([eventExportJob]);
    await waitFor(() => allDelivered(env.ctx.pool, EXPORT_ID), 120_000, 250);

    const files = await localFiles(dir, 'ndjson');
    const counted = await expectExactlyOnce(env.ctx.pool, EXPORT_ID, files);
    expect(counted.events).toBe((60 * 600 * 2) / 3 + 300);
    for (const records of files.values()) expect(records.length).toBeLessThanOrEqual(20);
    // The killed pass's files are the same objects: rewritten (if at all) with the same bytes.
    for (const [key, bytes] of bytesBefore) expect((await readFile(path.join(dir, key))).equals(bytes), key).toBe(true);
    // The two hours that have ended are closed: _SUCCESS beside their files.
    const past = [1, 2].map((h) => new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - h * 3_600_000));
    const folders = TYPES.flatMap((t) =>
      past.map(
        (h) =>
          `event-export/${EXPORT_ID}/event_type=${t}/date=${h.toISOString().slice(0, 10)}/hour=${h.toISOString().slice(11, 13)}/`,
      ),
    );
    await waitFor(
      async () => {
        const present = await Promise.all(
          folders.map((f) =>
            readFile(path.join(dir, f, '_SUCCESS')).then(
              () => true,
              () => false,
            ),
          ),
        );
        return present.every(Boolean);
      },
      60_000,
      250,
    );
  }, 240_000);
});

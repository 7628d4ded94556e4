import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { flushEventExport } from '../../src/pipelines/events/flush-export.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { useTestEnv } from '../helpers/context.js';
import { expectExactlyOnce, localFiles } from '../helpers/event-delivery.js';

/**
 * How a plan cuts a (type, hour) that holds more than max_events_per_file: at row keys (xid, id), in transaction
 * order. Transaction ids grow past a power of ten now and then (999 to 1,000 on a new server, 999,999,999 to
 * 1,000,000,000 on an old one): the cuts must follow the numbers, not their text.
 */

const env = useTestEnv();
const tag = randomUUID().slice(0, 8);
const EXPORT_ID = randomUUID();
let workspaceId: string;
let dir: string;

beforeAll(async () => {
  const applied = await applyWorkspaceFile(
    env.ctx.pool,
    parseWorkspaceFile(`
company: { name: Plan Co ${tag} }
workspaces:
  - name: Plan ${tag}
    event_exports:
      - { id: ${EXPORT_ID}, name: lake, format: ndjson, flush_seconds: 1, max_events_per_file: 3 }
`),
  );
  workspaceId = Object.values(applied.workspaceIds)[0]!;
  dir = localWorkspaceDir(env.config.LOCAL_STORE_DIR, { companyId: applied.companyId, workspaceId });
});

describe('planning an event export', () => {
  it('cuts an hour into files in transaction order where transaction ids gain a digit', async () => {
    const { rows } = await env.ctx.pool.query<{ xmin: string }>(
      `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`,
    );
    // The largest power of ten the server's transactions have passed: rows of ids around it have all ended.
    const xmin = BigInt(rows[0]!.xmin);
    expect(xmin).toBeGreaterThan(1_000n);
    let boundary = 1_000n;
    while (boundary * 10n < xmin) boundary *= 10n;
    // Two events in each of five transactions, 998..1,002 (or 99,998..100,002, ...): ten events, files of three.
    const xids = [-2n, -1n, 0n, 1n, 2n].map((d) => (boundary + d).toString());
    await env.ctx.pool.query(
      `INSERT INTO event_log (workspace_id, accepted_at, xid, id, type, time, user_id, name)
       SELECT $1, date_trunc('hour', now()) - interval '1 hour' + interval '1 minute', x::bigint, gen_random_uuid(),
              'users.behaviors.CustomEvent', now(), 'svc-1', 'opened'
         FROM unnest($2::text[]) x, generate_series(1, 2)`,
      [workspaceId, xids],
    );
    const pass = await flushEventExport(env.ctx, EXPORT_ID);
    expect(pass).toMatchObject({ ran: true, events: 10 });
    const files = await localFiles(dir, 'ndjson');
    expect([...files.values()].map((f) => f.length)).toEqual([3, 3, 3, 1]);
    await expectExactlyOnce(env.ctx.pool, EXPORT_ID, files);
  });
});

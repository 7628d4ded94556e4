import { randomUUID } from 'node:crypto';
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventExportJob } from '../../jobs/event-export.js';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { cliEnvOf, runCli } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

/**
 * An erasure reaches the files an event export delivered: the hours that held the person's events are written again
 * from the log without them (a file they alone filled is deleted), and `users.Deleted` is delivered. A backfill
 * rewrites an hour's files at the same keys, with the same bytes.
 */

const env = useTestEnv({ config: { EVENT_EXPORT_SWEEP_SECONDS: '1' } });
const tag = randomUUID().slice(0, 8);
const API_KEY = `ces_key_redeliver_${tag}_0000000000000`;
const EXPORT_ID = randomUUID();
const ALICE = `alice-${tag}`;
const BOB = `bob-${tag}`;
let companyId: string;
let workspaceId: string;

const FILE = `
company: { name: Redeliver Co ${tag} }
workspaces:
  - name: Redeliver ${tag}
    api_keys: [{ name: ops, secret: ${API_KEY}, permissions: all }]
    event_exports:
      - { id: ${EXPORT_ID}, name: lake, format: ndjson, flush_seconds: 1, max_events_per_file: 2 }
`;

const root = () => localWorkspaceDir(env.config.LOCAL_STORE_DIR, { companyId, workspaceId });

/** Every delivered line, by file key (schemas and _SUCCESS aside). */
async function delivered(): Promise<Map<string, Record<string, unknown>[]>> {
  const all = await readdir(root(), { recursive: true, withFileTypes: true }).catch(() => []);
  const files = new Map<string, Record<string, unknown>[]>();
  for (const d of all) {
    if (!d.isFile() || !d.name.endsWith('.ndjson.gz')) continue;
    const key = path.relative(root(), path.join(d.parentPath, d.name));
    const text = gunzipSync(await readFile(path.join(root(), key))).toString();
    files.set(
      key,
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l)),
    );
  }
  return files;
}

async function until<T>(probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function post(url: string, body: unknown): Promise<void> {
  const res = await env.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(API_KEY), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBeLessThan(300);
}

const customEvents = (files: Map<string, Record<string, unknown>[]>) =>
  [...files.entries()].filter(([k]) => k.includes('event_type=users.behaviors.CustomEvent/'));

beforeAll(async () => {
  const applied = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(FILE));
  companyId = applied.companyId;
  workspaceId = Object.values(applied.workspaceIds)[0]!;
  env.startWorkers([trackIngestJob, eventExportJob]);
  // One request: Alice's and Bob's events, in one hour, two to a file.
  await post('/users/track', {
    events: [ALICE, BOB, ALICE, BOB, BOB].map((u, i) => ({
      external_id: u,
      name: 'viewed',
      time: `2026-11-20T10:0${i}:00Z`,
    })),
  });
  await until(async () => {
    const n = customEvents(await delivered()).flatMap(([, l]) => l).length;
    return n === 5 ? true : undefined;
  });
});

describe('event exports, erasure and backfill', () => {
  it("re-delivers the hours that held an erased person's events without them, and delivers users.Deleted", async () => {
    await post('/users/delete', { external_ids: [ALICE] });
    const files = await until(async () => {
      const f = await delivered();
      const lines = customEvents(f).flatMap(([, l]) => l);
      const deletedDelivered = [...f.keys()].some((k) => k.includes('event_type=users.Deleted/'));
      return lines.length === 3 && deletedDelivered ? f : undefined;
    });
    // Bob's three events remain, each once, two to a file; no file names Alice but the Deleted event's.
    const remaining = customEvents(files);
    expect(remaining.map(([, l]) => l.length).sort()).toEqual([1, 2]);
    expect(remaining.flatMap(([, l]) => l).map((r) => r.external_user_id)).toEqual([BOB, BOB, BOB]);
    for (const [key, lines] of files)
      if (!key.includes('users.Deleted')) for (const l of lines) expect(JSON.stringify(l)).not.toContain(ALICE);
    const deleted = [...files.entries()].find(([k]) => k.includes('event_type=users.Deleted/'))![1];
    expect(deleted).toEqual([expect.objectContaining({ external_user_id: ALICE })]);
    // The export's records agree with the bucket.
    const { rows } = await env.ctx.pool.query(
      `SELECT count(*)::int AS n FROM event_export_files WHERE export_id = $1 AND event_type = 'users.behaviors.CustomEvent'`,
      [EXPORT_ID],
    );
    expect(rows[0].n).toBe(2);
  });

  it('ces events backfill writes an hour again at the same keys, with the same bytes', async () => {
    const before = customEvents(await delivered());
    const bytes = new Map(
      await Promise.all(before.map(async ([k]) => [k, await readFile(path.join(root(), k))] as const)),
    );
    // A file lost from the bucket, as an operator's mistaken delete would lose it.
    const [lost] = before[0]!;
    await rm(path.join(root(), lost));
    const hour = /date=(\d{4}-\d\d-\d\d)\/hour=(\d\d)/.exec(lost)!;
    const from = `${hour[1]}T${hour[2]}:00:00Z`;
    const to = new Date(Date.parse(from) + 3_600_000).toISOString();
    const res = await runCli(
      ['events', 'backfill', '--workspace', workspaceId, '--integration', 'lake', '--from', from, '--to', to],
      cliEnvOf(env.config),
    );
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/lake: \d+ hour\(s\) of a type re-planned; \d+ file\(s\) written/);
    const after = customEvents(await delivered());
    expect(after.map(([k]) => k).sort()).toEqual(before.map(([k]) => k).sort());
    for (const [k] of after) expect((await readFile(path.join(root(), k))).equals(bytes.get(k)!)).toBe(true);
  });
});

import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import avro from 'avsc';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventExportJob } from '../../jobs/event-export.js';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { flushEventExport } from '../../src/pipelines/events/flush-export.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

/**
 * The event stream delivered to the built-in store, read as a warehouse reads it: every logged event in exactly one
 * file, each file at its fixed key, at most max_events_per_file events a file, Currents' Avro layout read by avsc,
 * `_SUCCESS` once an hour has closed, and the type's schemas beside the files.
 */

const env = useTestEnv({ config: { EVENT_EXPORT_SWEEP_SECONDS: '1' } });
const tag = randomUUID().slice(0, 8);
const API_KEY = `ces_key_events_${tag}_00000000000000000`;
const NDJSON_ID = randomUUID();
const AVRO_ID = randomUUID();
let workspaceId: string;
let companyId: string;

const FILE = `
company: { name: Events Co ${tag} }
workspaces:
  - name: Events ${tag}
    api_keys: [{ name: ops, secret: ${API_KEY}, permissions: all }]
    event_exports:
      - { id: ${NDJSON_ID}, name: lake, format: ndjson, flush_seconds: 1, max_events_per_file: 3 }
      - { id: ${AVRO_ID}, name: currents, format: avro, event_types: [users.behaviors.CustomEvent], flush_seconds: 1 }
`;

/** Every file under a folder of the workspace's store, by key. */
async function storedKeys(prefix = ''): Promise<string[]> {
  const root = localWorkspaceDir(env.config.LOCAL_STORE_DIR, { companyId, workspaceId });
  const all = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  return all
    .filter((d) => d.isFile())
    .map((d) => path.relative(root, path.join(d.parentPath, d.name)))
    .filter((k) => k.startsWith(prefix))
    .sort();
}

const readStored = async (key: string) =>
  readFile(path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, { companyId, workspaceId }), key));

async function waitFor<T>(probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function track(body: unknown): Promise<void> {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/track',
    headers: { ...bearer(API_KEY), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBe(201);
}

beforeAll(async () => {
  const applied = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(FILE));
  companyId = applied.companyId;
  workspaceId = Object.values(applied.workspaceIds)[0]!;
  env.startWorkers([trackIngestJob, eventExportJob]);
});

describe('event exports', () => {
  it('delivers every logged event once, in files of at most max_events_per_file, at fixed keys', async () => {
    await track({
      events: [1, 2, 3, 4, 5].map((i) => ({
        external_id: `u${i}-${tag}`,
        name: i % 2 ? 'opened' : 'clicked',
        time: `2026-11-0${i}T10:00:00Z`,
        properties: { n: i, nested: { ok: true } },
      })),
      purchases: [
        {
          external_id: `u1-${tag}`,
          product_id: 'sku-1',
          currency: 'EUR',
          price: 9.5,
          quantity: 2,
          time: '2026-11-06T00:00:00Z',
        },
      ],
    });
    const logged = await waitFor(async () => {
      const { rows } = await env.ctx.pool.query<{ id: string; type: string }>(
        `SELECT id, type FROM event_log WHERE workspace_id = $1 ORDER BY id`,
        [workspaceId],
      );
      return rows.length === 6 ? rows : undefined;
    });
    const prefix = `event-export/${NDJSON_ID}/`;
    const lines = await waitFor(async () => {
      const files = (await storedKeys(prefix)).filter((k) => k.endsWith('.ndjson.gz'));
      const read = await Promise.all(
        files.map(async (k) => ({ k, lines: gunzipSync(await readStored(k)).toString() })),
      );
      const all = read.flatMap((f) =>
        f.lines
          .split('\n')
          .filter(Boolean)
          .map((l) => ({ key: f.k, row: JSON.parse(l) })),
      );
      return all.length >= 6 ? all : undefined;
    });
    // Each event once, in a file of its own type, never more than 3 to a file.
    expect(lines.map((l) => l.row.id).sort()).toEqual(logged.map((r) => r.id));
    const perFile = new Map<string, number>();
    for (const l of lines) perFile.set(l.key, (perFile.get(l.key) ?? 0) + 1);
    for (const n of perFile.values()) expect(n).toBeLessThanOrEqual(3);
    // Each at its key: its type, the hour it entered the log (UTC), its file's number in that hour.
    const { rows: hours } = await env.ctx.pool.query<{ id: string; type: string; h: string }>(
      `SELECT id, type, to_char(accepted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"/hour="HH24') AS h FROM event_log
        WHERE workspace_id = $1`,
      [workspaceId],
    );
    for (const l of lines) {
      const logged = hours.find((h) => h.id === l.row.id)!;
      expect(l.key).toMatch(
        new RegExp(
          `^${prefix}event_type=${logged.type.replaceAll('.', '\\.')}/date=${logged.h}/part-\\d{5}\\.ndjson\\.gz$`,
        ),
      );
    }
    expect(lines.filter((l) => l.key.includes('CustomEvent'))).toHaveLength(5);
    const purchase = lines.find((l) => l.key.includes('Purchase'))!.row;
    expect(purchase).toMatchObject({ product_id: 'sku-1', currency: 'EUR', price: 9.5, quantity: 2 });
    // The schema beside the files.
    expect(await storedKeys(`${prefix}event_type=users.behaviors.Purchase/_schemas/`)).toEqual([
      `${prefix}event_type=users.behaviors.Purchase/_schemas/version=1.json`,
    ]);
  });

  it('writes Currents Avro files that avsc reads, under the Currents key layout, with only the types asked for', async () => {
    const root = `dataexport.ces.local.integration.${AVRO_ID}/`;
    const files = await waitFor(async () => {
      const keys = (await storedKeys(root)).filter((k) => k.endsWith('.avro'));
      return keys.length > 0 ? keys : undefined;
    });
    for (const k of files)
      expect(k).toMatch(
        new RegExp(
          `^${root}event_type=users\\.behaviors\\.CustomEvent/date=\\d{4}-\\d\\d-\\d\\d-\\d\\d/version=1/local/dataexport\\.ces\\.local\\.integration\\.${AVRO_ID}\\+0\\+\\d+\\.avro$`,
        ),
      );
    const records: Record<string, unknown>[] = [];
    for (const k of files) {
      const decoder = new avro.streams.BlockDecoder();
      const done = new Promise<void>((resolve, reject) => {
        decoder.on('data', (r: Record<string, unknown>) => records.push(r));
        decoder.on('end', resolve);
        decoder.on('error', reject);
      });
      decoder.end(await readStored(k));
      await done;
    }
    expect(records).toHaveLength(5);
    const first = records.find((r) => r.external_user_id === `u1-${tag}`)!;
    expect(first).toMatchObject({ name: 'opened', time: Date.parse('2026-11-01T10:00:00Z') / 1000 });
    // Properties as the log keeps them (the validation turns a nested object into its JSON text), as one JSON string.
    const { rows } = await env.ctx.pool.query(`SELECT properties FROM event_log WHERE external_user_id = $1`, [
      `u1-${tag}`,
    ]);
    expect(JSON.parse(first.properties as string)).toEqual(rows.find((r) => r.properties?.n === 1)!.properties);
    expect(JSON.parse(first.properties as string)).toEqual({ n: 1, nested: '{"ok":true}' });
    expect(await storedKeys(`${root}event_type=users.behaviors.CustomEvent/_schemas/`)).toEqual([
      `${root}event_type=users.behaviors.CustomEvent/_schemas/version=1.avsc`,
      `${root}event_type=users.behaviors.CustomEvent/_schemas/version=1.json`,
    ]);
    expect(await storedKeys(`${root}event_type=users.behaviors.Purchase`)).toEqual([]);
  });

  it('writes _SUCCESS in an hour once it has closed, and nothing more into it', async () => {
    // Events logged two hours ago (as a backlog drained late would be): their hour has ended and no transaction runs.
    await env.ctx.pool.query(
      `INSERT INTO event_log (workspace_id, accepted_at, id, type, time, user_id, name)
       SELECT $1, date_trunc('hour', now()) - interval '2 hours' + g * interval '1 minute', gen_random_uuid(),
              'users.behaviors.CustomEvent', now(), 'svc', 'late'
         FROM generate_series(1, 4) g`,
      [workspaceId],
    );
    const past = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000);
    const hourFolder = `event-export/${NDJSON_ID}/event_type=users.behaviors.CustomEvent/date=${past.toISOString().slice(0, 10)}/hour=${past.toISOString().slice(11, 13)}/`;
    const keys = await waitFor(async () => {
      const k = await storedKeys(hourFolder);
      return k.includes(`${hourFolder}_SUCCESS`) ? k : undefined;
    });
    expect(keys).toEqual([
      `${hourFolder}_SUCCESS`,
      `${hourFolder}part-00000.ndjson.gz`,
      `${hourFolder}part-00001.ndjson.gz`,
    ]);
    // Another pass writes nothing more there.
    await flushEventExport(env.ctx, NDJSON_ID);
    expect(await storedKeys(hourFolder)).toEqual(keys);
  });
});

import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Storage } from '@google-cloud/storage';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventExportJob } from '../../jobs/event-export.js';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { EVENT_TYPES } from '../../src/profiles/event-log-types.js';
import { allDelivered, expectExactlyOnce, isEventFile, readEventFile, type Format } from '../helpers/event-delivery.js';
import { asAvro, asNdjson, asParquet, FIXTURES } from '../helpers/event-fixtures.js';
import { startGcsEmulator, type RunningGcs } from '../helpers/gcs-emulator.js';
import { startS3rver, type RunningS3 } from '../helpers/s3rver.js';
import { bearer } from '../helpers/seed.js';
import { openWarehouse } from '../helpers/warehouse-duckdb.js';

/**
 * Event exports delivered to real buckets, read back as a warehouse reads them: on S3 (s3rver) an Avro export with a
 * destination of its own (Currents' layout, read by avsc) and a Parquet one writing to the workspace's
 * export_destination (a Hive layout, read by DuckDB's read_parquet with hive_partitioning, whose partition columns
 * must agree with each event), on GCS (the emulator) an NDJSON one (gunzip, JSON.parse). Then a deletion: no event of
 * the person is left in any file of an hour the log still holds, in any of the three.
 */

let env: TestEnv;
let s3: RunningS3;
let gcs: RunningGcs;
let s3Client: S3Client;
let storage: Storage;
let scratch: string;
const tag = randomUUID().slice(0, 8);
const API_KEY = `ces_key_evbuckets_${tag}_000000000000`;
const AVRO_ID = randomUUID();
const PARQUET_ID = randomUUID();
const NDJSON_ID = randomUUID();
// A second workspace, of every type's fixtures, delivered to the same buckets under other prefixes.
const FX = { avro: randomUUID(), parquet: randomUUID(), ndjson: randomUUID() };
let fxWorkspaceId: string;
const ALICE = `alice-${tag}`;
const BOB = `bob-${tag}`;

beforeAll(async () => {
  [env, s3, gcs] = await Promise.all([
    createTestEnv({ EVENT_EXPORT_SWEEP_SECONDS: '1' }),
    startS3rver('lake'),
    startGcsEmulator('events'),
  ]);
  scratch = await mkdtemp(path.join(tmpdir(), 'ces-event-buckets-'));
  s3Client = new S3Client({
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: s3.destination.credentials,
  });
  storage = new Storage({ apiEndpoint: gcs.endpoint, projectId: gcs.projectId });
  const json = (v: unknown) => JSON.stringify(v);
  const exportsOf = (ids: { avro: string; parquet: string; ndjson: string }, p: string) => `
    export_destination: ${json({ ...s3.destination, prefix: `${p}warehouse/` })}
    event_exports:
      - id: ${ids.avro}
        name: currents
        destination: ${json({ ...s3.destination, prefix: `${p}currents/` })}
        format: avro
        flush_seconds: 1
        max_events_per_file: 2
      - { id: ${ids.parquet}, name: lake, format: parquet, flush_seconds: 1, max_events_per_file: 2 }
      - id: ${ids.ndjson}
        name: stream
        destination: ${json({ ...gcs.destination, prefix: `${p}stream/` })}
        format: ndjson
        flush_seconds: 1
        max_events_per_file: 2`;
  const applied = await applyWorkspaceFile(
    env.ctx.pool,
    parseWorkspaceFile(`
company: { name: Event Buckets ${tag} }
workspaces:
  - name: Event Buckets ${tag}
    api_keys: [{ name: ops, secret: ${API_KEY}, permissions: all }]
${exportsOf({ avro: AVRO_ID, parquet: PARQUET_ID, ndjson: NDJSON_ID }, '')}
  - name: Event Fixtures ${tag}
${exportsOf(FX, 'fx-')}
`),
  );
  fxWorkspaceId = applied.workspaceIds[`Event Fixtures ${tag}`]!;
  env.startWorkers([trackIngestJob, eventExportJob]);
}, 120_000);
afterAll(async () => {
  s3Client?.destroy();
  await env?.close();
  await Promise.all([s3?.close(), gcs?.close()]);
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** Every object under a prefix of the S3 bucket, with its bytes. */
async function s3Objects(prefix: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  let token: string | undefined;
  do {
    const page = await s3Client.send(
      new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix, ContinuationToken: token }),
    );
    for (const o of page.Contents ?? []) {
      const got = await s3Client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: o.Key! }));
      out.set(o.Key!, Buffer.from(await got.Body!.transformToByteArray()));
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return out;
}

async function gcsObjects(prefix: string): Promise<Map<string, Buffer>> {
  const [files] = await storage.bucket(gcs.bucket).getFiles({ prefix });
  const out = new Map<string, Buffer>();
  for (const f of files) out.set(f.name, (await f.download())[0]);
  return out;
}

/** The export's event files in its bucket, read. */
async function eventFiles(format: Format, objects: Map<string, Buffer>) {
  const files = new Map<string, Record<string, unknown>[]>();
  for (const [key, bytes] of objects) if (isEventFile(format, key)) files.set(key, await readEventFile(format, bytes));
  return files;
}

interface Delivery {
  id: string;
  format: Format;
  /** Where its files are, under the bucket. */
  prefix: string;
  objects: () => Promise<Map<string, Buffer>>;
}

/** The three exports of a workspace: Avro and Parquet on S3, NDJSON on GCS. */
function deliveries(ids: { avro: string; parquet: string; ndjson: string }, p: string): Delivery[] {
  return [
    {
      id: ids.avro,
      format: 'avro',
      prefix: `${p}currents/dataexport.ces.S3.integration.${ids.avro}/`,
      objects: () => s3Objects(`${p}currents/`),
    },
    {
      id: ids.parquet,
      format: 'parquet',
      prefix: `${p}warehouse/event-export/${ids.parquet}/`,
      objects: () => s3Objects(`${p}warehouse/`),
    },
    { id: ids.ndjson, format: 'ndjson', prefix: `${p}stream/`, objects: () => gcsObjects(`${p}stream/`) },
  ];
}

const EXPORTS = deliveries({ avro: AVRO_ID, parquet: PARQUET_ID, ndjson: NDJSON_ID }, '');

async function track(body: unknown): Promise<void> {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/track',
    headers: { ...bearer(API_KEY), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBe(201);
}

/** Nothing left for the export to do: every row planned and written, no hour waiting to be written again. */
async function settled(exportId: string): Promise<boolean> {
  const { rows } = await env.ctx.pool.query<{ pending: number }>(
    `SELECT (SELECT count(*) FROM event_redeliveries WHERE export_id = $1)
          + (SELECT count(*) FROM event_export_stale_keys WHERE export_id = $1) AS pending`,
    [exportId],
  );
  return Number(rows[0]!.pending) === 0 && (await allDelivered(env.ctx.pool, exportId));
}

const hourOf = (d: Date) => d.toISOString().slice(0, 13);

describe('event exports to S3 and GCS', () => {
  it('writes each format at its documented keys, readable by avsc, DuckDB (hive partitions) and gunzip', async () => {
    await track({
      events: [ALICE, BOB, ALICE, BOB, ALICE].map((u, i) => ({
        external_id: u,
        name: i % 2 ? 'clicked' : 'opened',
        time: `2026-11-2${i}T10:00:00Z`,
        properties: { n: i },
      })),
      purchases: [ALICE, BOB].map((u) => ({
        external_id: u,
        product_id: 'sku-1',
        currency: 'EUR',
        price: 9.5,
        quantity: 1,
        time: '2026-11-26T00:00:00Z',
      })),
    });
    await waitFor(async () => {
      const { rows } = await env.ctx.pool.query(`SELECT 1 FROM event_log WHERE external_user_id = ANY($1)`, [
        [ALICE, BOB],
      ]);
      return rows.length === 7;
    });
    for (const e of EXPORTS) await waitFor(() => settled(e.id), 60_000, 250);
    const { rows: logged } = await env.ctx.pool.query<{ id: string; type: string; accepted_at: Date }>(
      `SELECT id, type, accepted_at FROM event_log WHERE external_user_id = ANY($1)`,
      [[ALICE, BOB]],
    );
    const day = (d: Date) => d.toISOString().slice(0, 10);
    const hh = (d: Date) => d.toISOString().slice(11, 13);
    const byId = new Map(logged.map((r) => [r.id, r]));

    for (const e of EXPORTS) {
      const objects = await e.objects();
      const files = await eventFiles(e.format, objects);
      const counted = await expectExactlyOnce(env.ctx.pool, e.id, files);
      expect(counted.events).toBe(7);
      for (const [key, records] of files) {
        expect(records.length).toBeLessThanOrEqual(2);
        const first = byId.get(String(records[0]!.id))!;
        const at = first.accepted_at;
        const esc = (s: string) => s.replaceAll('.', '\\.');
        const layout =
          e.format === 'avro'
            ? `^currents/dataexport\\.ces\\.S3\\.integration\\.${AVRO_ID}/event_type=${esc(first.type)}/date=${day(at)}-${hh(at)}/version=1/local/dataexport\\.ces\\.S3\\.integration\\.${AVRO_ID}\\+0\\+\\d+\\.avro$`
            : `^${esc(e.prefix)}event_type=${esc(first.type)}/date=${day(at)}/hour=${hh(at)}/part-\\d{5}\\.${e.format === 'parquet' ? 'parquet' : 'ndjson\\.gz'}$`;
        expect(key).toMatch(new RegExp(layout));
        for (const r of records) expect(hourOf(byId.get(String(r.id))!.accepted_at)).toBe(hourOf(at));
      }
      // The schemas beside the files, in every bucket.
      const schemaKeys = [...objects.keys()].filter((k) => k.includes('/_schemas/')).sort();
      expect(schemaKeys).toContain(`${e.prefix}event_type=users.behaviors.Purchase/_schemas/version=1.json`);
      if (e.format === 'avro')
        expect(schemaKeys).toContain(`${e.prefix}event_type=users.behaviors.Purchase/_schemas/version=1.avsc`);
      const purchase = [...files.values()].flat().find((r) => r.external_user_id === ALICE && 'product_id' in r)!;
      expect(purchase).toMatchObject({ product_id: 'sku-1', currency: 'EUR', price: 9.5 });
    }

    // The Parquet files as a warehouse loads them: DuckDB over the hive layout, the partition columns from the keys.
    const dir = path.join(scratch, 'parquet');
    for (const [key, bytes] of await s3Objects(`warehouse/event-export/${PARQUET_ID}/`)) {
      if (!key.endsWith('.parquet')) continue;
      const file = path.join(dir, key.slice(`warehouse/event-export/${PARQUET_ID}/`.length));
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, bytes);
    }
    const warehouse = await openWarehouse(dir);
    try {
      const rows = await warehouse.query(
        `SELECT id::VARCHAR AS id, event_type, CAST(date AS VARCHAR) AS date, CAST(hour AS INTEGER) AS hour
           FROM read_parquet('**/*.parquet', hive_partitioning = true) ORDER BY id`,
      );
      expect(rows).toHaveLength(7);
      for (const r of rows) {
        const l = byId.get(String(r.id))!;
        expect(r).toEqual({ id: l.id, event_type: l.type, date: day(l.accepted_at), hour: Number(hh(l.accepted_at)) });
      }
    } finally {
      warehouse.close();
    }
  });

  it('a deletion leaves no event of the person in any file of a retained hour, in every bucket, and users.Deleted', async () => {
    const { rows: alices } = await env.ctx.pool.query<{ id: string; user_id: string }>(
      `SELECT id, user_id FROM event_log WHERE external_user_id = $1`,
      [ALICE],
    );
    expect(alices).toHaveLength(4);
    const serviceId = alices[0]!.user_id;
    const res = await env.app.inject({
      method: 'POST',
      url: '/users/delete',
      headers: { ...bearer(API_KEY), 'content-type': 'application/json' },
      payload: JSON.stringify({ external_ids: [ALICE] }),
    });
    expect(res.statusCode, res.body).toBeLessThan(300);
    await waitFor(
      async () =>
        (
          await env.ctx.pool.query(`SELECT 1 FROM event_log WHERE type = 'users.Deleted' AND external_user_id = $1`, [
            ALICE,
          ])
        ).rowCount === 1,
      30_000,
    );
    for (const e of EXPORTS) {
      await waitFor(() => settled(e.id), 60_000, 250);
      const files = await eventFiles(e.format, await e.objects());
      const lines = [...files.entries()].flatMap(([key, records]) => records.map((r) => ({ key, r })));
      const text = (r: Record<string, unknown>) =>
        JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
      const leftovers = lines.filter(
        ({ key, r }) =>
          !key.includes('event_type=users.Deleted/') &&
          (alices.some((a) => a.id === r.id) || text(r).includes(ALICE) || text(r).includes(serviceId)),
      );
      expect(leftovers.map((l) => l.key)).toEqual([]);
      expect(lines.filter(({ r }) => r.external_user_id === BOB)).toHaveLength(3);
      const deleted = lines.filter(({ key }) => key.includes('event_type=users.Deleted/'));
      expect(deleted.map(({ r }) => r.external_user_id)).toEqual([ALICE]);
      await expectExactlyOnce(env.ctx.pool, e.id, files);
    }
  });

  it("every type's records, field by field and in Currents' order, as each bucket holds them", async () => {
    const fixtures = Object.values(FIXTURES).flat();
    await env.ctx.pool.query(
      `INSERT INTO event_log (workspace_id, id, type, time, user_id, external_user_id, app_id, name, properties, data)
       SELECT $1, * FROM unnest($2::uuid[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[],
                                $9::jsonb[], $10::jsonb[])`,
      [
        fxWorkspaceId,
        fixtures.map((f) => f.event.id),
        fixtures.map((f) => f.event.type),
        fixtures.map((f) => f.event.time),
        fixtures.map((f) => f.event.userId),
        fixtures.map((f) => f.event.externalUserId),
        fixtures.map((f) => f.event.appId),
        fixtures.map((f) => f.event.name),
        fixtures.map((f) => (f.event.properties === null ? null : JSON.stringify(f.event.properties))),
        fixtures.map((f) => JSON.stringify(f.event.data)),
      ],
    );
    for (const e of deliveries(FX, 'fx-')) {
      await waitFor(() => settled(e.id), 60_000, 250);
      const files = await eventFiles(e.format, await e.objects());
      await expectExactlyOnce(env.ctx.pool, e.id, files);
      for (const type of EVENT_TYPES) {
        const expected = FIXTURES[type].map((f) => ({ ...f.expected, app_group_id: fxWorkspaceId }));
        const keys = [...files.keys()].filter((k) => k.includes(`/event_type=${type}/`)).sort();
        const records =
          e.format === 'parquet'
            ? await parquetRows(keys, await e.objects())
            : keys.flatMap((k) => files.get(k)!.map((r) => ({ ...r })));
        const want = expected.map(e.format === 'avro' ? asAvro : e.format === 'ndjson' ? asNdjson : asParquet);
        // The log keeps properties as jsonb, which orders an object's keys its own way: the JSON text says the same.
        expect(records.map(parsedProperties), `${e.format} ${type}`).toEqual(want.map(parsedProperties));
        for (const [i, r] of records.entries()) expect(Object.keys(r)).toEqual(Object.keys(expected[i]!));
      }
    }
  });
});

const parsedProperties = (r: Record<string, unknown>) =>
  typeof r.properties === 'string' ? { ...r, properties: JSON.parse(r.properties) as unknown } : r;

/** The rows of Parquet files as DuckDB's read_parquet gives them, file after file. */
async function parquetRows(keys: string[], objects: Map<string, Buffer>): Promise<Record<string, unknown>[]> {
  const dir = await mkdtemp(path.join(scratch, 'fx-'));
  const warehouse = await openWarehouse(dir);
  try {
    const rows: Record<string, unknown>[] = [];
    for (const [i, key] of keys.entries()) {
      await writeFile(path.join(dir, `f${i}.parquet`), objects.get(key)!);
      rows.push(...(await warehouse.query(`SELECT * FROM read_parquet('f${i}.parquet')`)));
    }
    return rows;
  } finally {
    warehouse.close();
  }
}

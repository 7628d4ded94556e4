import { writeFile, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parquetSchema, type SchemaTree } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  REMOVED_PARQUET_COLUMNS,
  usersParquetColumns,
  writeParquetFile,
} from '../../src/pipelines/exports/shard/parquet-writer.js';
import { EXPORT_FIELDS, type ExportField } from '../../src/pipelines/exports/request/request-body.js';
import { compareParquet, fromParquet, readParquet } from '../helpers/parquet-values.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'ces-parquet-test-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const file = (name: string) => path.join(dir, name);
const ndjson = (rows: unknown[]) => rows.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n';

// ---- The schema as the file declares it, described independently of the writer's own representation.
const TS = 'TIMESTAMP(MICROS, UTC)';

function describeNode(node: SchemaTree): string {
  const e = node.element;
  if (e.converted_type === 'LIST' || e.logical_type?.type === 'LIST')
    return `LIST<${describeNode(node.children[0]!.children[0]!)}>`;
  if (e.converted_type === 'MAP' || e.logical_type?.type === 'MAP') {
    const entry = node.children[0]!;
    return `MAP<${describeNode(entry.children[0]!)}, ${describeNode(entry.children[1]!)}>`;
  }
  if (node.children.length > 0)
    return `STRUCT<${node.children.map((c) => `${c.element.name}: ${describeNode(c)}`).join(', ')}>`;
  const lt = e.logical_type;
  if (e.type === 'BYTE_ARRAY' && (e.converted_type === 'UTF8' || lt?.type === 'STRING')) return 'STRING';
  if (e.type === 'INT64' && lt?.type === 'TIMESTAMP')
    return `TIMESTAMP(${lt.unit}${lt.isAdjustedToUTC ? ', UTC' : ''})`;
  if (e.type === 'INT32' && (e.converted_type === 'DATE' || lt?.type === 'DATE')) return 'DATE';
  if (e.type === 'INT64' && (e.converted_type === undefined || e.converted_type === 'INT_64') && lt === undefined)
    return 'INT64';
  if (e.type === 'DOUBLE' || e.type === 'BOOLEAN') return e.type;
  return `unexpected ${e.type}/${e.converted_type}/${JSON.stringify(lt)}`;
}

/** Every column and struct member must be nullable; only LIST/MAP's repeated groups and a MAP's key are not. */
function notNullable(node: SchemaTree, out: string[] = []): string[] {
  for (const child of node.children) {
    const structural =
      child.element.repetition_type === 'REPEATED' ||
      (child.element.name === 'key' && node.element.repetition_type === 'REPEATED');
    if (!structural && child.element.repetition_type !== 'OPTIONAL') out.push(child.path.join('.'));
    notNullable(child, out);
  }
  return out;
}

const HISTORY = `LIST<STRUCT<name: STRING, first: ${TS}, last: ${TS}, count: INT64>>`;
/** The issue's types, written out: each export field's Parquet type. */
const EXPECTED_TYPES: Record<ExportField, string> = {
  apps: `LIST<STRUCT<name: STRING, platform: STRING, version: STRING, sessions: INT64, first_used: ${TS}, last_used: ${TS}>>`,
  attributed_campaign: 'STRING',
  attributed_source: 'STRING',
  attributed_adgroup: 'STRING',
  attributed_ad: 'STRING',
  service_id: 'STRING',
  country: 'STRING',
  created_at: TS,
  custom_attributes: 'STRING',
  custom_events: HISTORY,
  devices:
    'LIST<STRUCT<model: STRING, os: STRING, carrier: STRING, idfv: STRING, idfa: STRING, device_id: STRING, store_ad_id: STRING, tv_ad_id: STRING, ad_tracking_enabled: BOOLEAN>>',
  dob: 'DATE',
  email: 'STRING',
  external_id: 'STRING',
  first_name: 'STRING',
  gender: 'STRING',
  home_city: 'STRING',
  language: 'STRING',
  last_coordinates: 'LIST<DOUBLE>',
  last_name: 'STRING',
  phone: 'STRING',
  purchases: HISTORY,
  push_tokens:
    'LIST<STRUCT<app: STRING, platform: STRING, token: STRING, device_id: STRING, notifications_enabled: BOOLEAN>>',
  random_bucket: 'INT64',
  time_zone: 'STRING',
  total_revenue: 'DOUBLE',
  uninstalled_at: TS,
  user_aliases: 'LIST<STRUCT<alias_name: STRING, alias_label: STRING>>',
  campaigns_received:
    `LIST<STRUCT<name: STRING, api_campaign_id: STRING, last_received: ${TS}, ` +
    'engaged: STRUCT<opened_email: BOOLEAN, opened_push: BOOLEAN, clicked_email: BOOLEAN, clicked_triggered_in_app_message: BOOLEAN>, ' +
    'converted: BOOLEAN, multiple_converted: MAP<STRING, BOOLEAN>, variation_name: STRING, variation_api_id: STRING, in_control: BOOLEAN>>',
  canvases_received:
    `LIST<STRUCT<name: STRING, api_canvas_id: STRING, last_received_message: ${TS}, last_entered: ${TS}, variation_name: STRING, ` +
    `in_control: BOOLEAN, last_entered_control_at: ${TS}, last_exited: ${TS}, steps_received: LIST<STRUCT<name: STRING, api_canvas_step_id: STRING, last_received: ${TS}>>>>`,
  cards_clicked: 'LIST<STRUCT<name: STRING>>',
  push_subscribe: 'STRING',
  email_subscribe: 'STRING',
  push_opted_in_at: TS,
  subscription_groups: 'LIST<STRUCT<subscription_group_id: STRING, subscription_state: STRING>>',
};

const ALL = usersParquetColumns({ fields: EXPORT_FIELDS, customAttributes: null });

/** A user with every field, as exportLineSelect prints one: nested values in jsonb's text form. */
const FULL_LINE =
  '{"apps":[{"name": "iOS app", "version": "4.1.0", "platform": "ios", "sessions": 163, "last_used": "2026-09-12T07:02:19.978Z", "first_used": "2025-12-27T19:16:14.451Z"}],' +
  '"attributed_campaign":"spring_sale_2025","attributed_source":"google_ads","attributed_adgroup":"lookalike_1pct","attributed_ad":"video_15s_b",' +
  '"service_id":"addc76bc000000006950307e","country":"US","created_at":"2025-12-27T19:16:14.451Z",' +
  '"custom_attributes":{"nps_score": null, "preferences": {"theme": "dark", "notifications": {"sms": false}}, "loyalty_tier": "bronze", "lifetime_value": 60.27, "favorite_categories": ["outdoor", "beauty"]},' +
  '"custom_events":[{"last": "2026-09-12T07:02:19.978Z", "name": "app_opened", "count": 163, "first": "2026-03-19T14:17:56.640Z"}],' +
  '"devices":[{"os": "iOS 18.5", "idfa": null, "idfv": "6C96E992-32E8-4C3D-9794-E5C3ABC7AD8F", "model": "iPhone 15", "carrier": "AT&T", "device_id": "677f6449-c13f-45b8-9603-0607573062ac", "ad_tracking_enabled": false}, ' +
  '{"os": "Android 14", "model": "Pixel 7a", "carrier": null, "device_id": "ad1c2432", "store_ad_id": "0d597613", "ad_tracking_enabled": true}],' +
  '"dob":"2000-07-18","email":"matthew.brown.0@mail.example.com","external_id":"u-1-0000000000","first_name":"Matthew","gender":"M","home_city":"Boston",' +
  '"language":"en","last_coordinates":[-71.05599,42.33947],"last_name":"Brown","phone":"+13129554786",' +
  '"purchases":[{"last": "2026-10-01T00:00:00.000Z", "name": "premium_plan", "count": 3, "first": "2025-01-01T00:00:00.000Z"}],' +
  '"push_tokens":[{"app": "iOS app", "token": "60bc67d3", "platform": "ios", "device_id": "677f6449-c13f-45b8-9603-0607573062ac", "notifications_enabled": true}],' +
  '"random_bucket":1628,"time_zone":"America/New_York","total_revenue":58.5,"uninstalled_at":"2026-11-01T12:00:00.000Z",' +
  '"user_aliases":[{"alias_name": "amp-1-0000000000", "alias_label": "amplitude_id"}],' +
  '"campaigns_received":[{"name": "Cart abandonment push", "engaged": {"opened_push": true, "clicked_email": false, "opened_email": false, "clicked_triggered_in_app_message": false}, "converted": true, ' +
  '"in_control": true, "last_received": "2026-11-12T01:26:17.482Z", "variation_name": "Control", "api_campaign_id": "2a7d617f", "variation_api_id": "8bb3c7ec", ' +
  '"multiple_converted": {"Conversion Event - B": false, "Primary Conversion Event - A": true}}],' +
  '"canvases_received":[{"name": "Premium upsell", "in_control": false, "last_exited": "2026-10-13T08:23:28.490Z", "last_entered": "2026-10-11T08:05:48.622Z", "api_canvas_id": "canvas-upsell", ' +
  '"steps_received": [{"name": "Entry message", "last_received": "2026-10-11T08:05:48.622Z", "api_canvas_step_id": "72754b99"}], "variation_name": "Variant 2", ' +
  '"last_received_message": "2026-10-11T09:58:40.124Z", "last_entered_control_at": null}],' +
  '"cards_clicked":[{"name": "Refer a friend"}],"push_subscribe":"opted_in","email_subscribe":"subscribed","push_opted_in_at":"2026-08-28T11:07:59.307Z",' +
  '"subscription_groups":[{"subscription_state": "subscribed", "subscription_group_id": "0b7e6c1a-2f3d-4c5b-8a9e-1f2a3b4c5d6e"}]}';

const UNICODE = 'Zoë 🎉 東京 "quoted" back\\slash\ttab\nnewline \u0001';
const SPARSE_LINES: Record<string, unknown>[] = [
  // Only the service id: every other column null.
  { service_id: 'svc-only' },
  // Explicit nulls, empty lists, nested nulls and a null list element, unicode everywhere, other time offsets.
  {
    service_id: 'svc-nulls',
    external_id: null,
    first_name: UNICODE,
    home_city: 'São Paulo',
    created_at: '2026-01-01T10:00:00.123+02:00',
    dob: '1969-12-31',
    random_bucket: 0,
    total_revenue: 0,
    custom_attributes: { ключ: UNICODE, nested: { k: null }, list: [1, 'two', null] },
    devices: [],
    user_aliases: [{ alias_name: UNICODE, alias_label: null }, null],
    apps: [{ name: 'TV', sessions: null }],
    custom_events: [{ name: 'e', first: '2026-03-01T00:00:00.000-05:00', last: null, count: 9007199254740991 }],
    campaigns_received: [{ name: 'c', engaged: null, multiple_converted: {}, in_control: null }],
    canvases_received: [{ name: 'v', steps_received: [] }],
    last_coordinates: [null, 1.5],
    cards_clicked: [{ name: '🎉' }],
  },
];

describe('Parquet parts (writeParquetFile)', () => {
  it('declares every column with the type of its field, all nullable', async () => {
    await writeFile(file('schema.ndjson'), ndjson([FULL_LINE]));
    expect(await writeParquetFile(file('schema.ndjson'), file('schema.parquet'), ALL)).toEqual({ rows: 1 });
    const { metadata } = await readParquet(file('schema.parquet'));
    const root = parquetSchema(metadata);
    expect(root.children.map((c) => c.element.name)).toEqual([...EXPORT_FIELDS]);
    expect(Object.fromEntries(root.children.map((c) => [c.element.name, describeNode(c)]))).toEqual(EXPECTED_TYPES);
    expect(notNullable(root)).toEqual([]);
    expect(metadata.row_groups[0]!.columns.every((c) => c.meta_data?.codec === 'ZSTD')).toBe(true);
  });

  it('holds the NDJSON values: missing fields, nulls, empty lists, nested nulls, unicode; times as instants', async () => {
    const lines = [FULL_LINE, ...SPARSE_LINES];
    await writeFile(file('values.ndjson'), ndjson(lines));
    expect(await writeParquetFile(file('values.ndjson'), file('values.parquet'), ALL)).toEqual({ rows: 3 });
    const { rows } = await readParquet(file('values.parquet'));
    const parsed = lines.map((l) => (typeof l === 'string' ? (JSON.parse(l) as Record<string, unknown>) : l));
    const { want, got } = compareParquet(ALL, parsed, rows);
    expect(got).toEqual(want);

    // A few values spelled out, so that the comparison above is not its own only witness.
    const [full, only, nulls] = rows;
    expect(full!.created_at).toEqual(new Date('2025-12-27T19:16:14.451Z'));
    expect((full!.dob as Date).toISOString()).toBe('2000-07-18T00:00:00.000Z');
    expect(full!.random_bucket).toBe(1628n);
    expect(full!.total_revenue).toBe(58.5);
    expect(full!.last_coordinates).toEqual([-71.05599, 42.33947]);
    expect(JSON.parse(full!.custom_attributes as string)).toEqual({
      nps_score: null,
      preferences: { theme: 'dark', notifications: { sms: false } },
      loyalty_tier: 'bronze',
      lifetime_value: 60.27,
      favorite_categories: ['outdoor', 'beauty'],
    });
    expect((full!.devices as Record<string, unknown>[])[1]).toEqual({
      model: 'Pixel 7a',
      os: 'Android 14',
      carrier: null,
      idfv: null,
      idfa: null,
      device_id: 'ad1c2432',
      store_ad_id: '0d597613',
      tv_ad_id: null,
      ad_tracking_enabled: true,
    });
    expect((full!.campaigns_received as Record<string, unknown>[])[0]!.multiple_converted).toEqual({
      'Conversion Event - B': false,
      'Primary Conversion Event - A': true,
    });
    expect(only!.service_id).toBe('svc-only');
    expect(only!.email ?? null).toBeNull();
    expect(only!.devices ?? null).toBeNull();
    expect(nulls!.first_name).toBe(UNICODE);
    expect(nulls!.created_at).toEqual(new Date('2026-01-01T08:00:00.123Z'));
    expect(nulls!.devices).toEqual([]);
    // A null element of a list of structs: hyparquet reads it as undefined.
    expect(nulls!.user_aliases).toHaveLength(2);
    expect((nulls!.user_aliases as unknown[])[1] ?? null).toBeNull();
    expect((nulls!.custom_events as Record<string, unknown>[])[0]!.count).toBe(9007199254740991n);
  });

  it('makes values of an unexpected type null (or converts them, as documented) instead of failing', async () => {
    const columns = usersParquetColumns({
      fields: [
        'service_id',
        'random_bucket',
        'total_revenue',
        'dob',
        'created_at',
        'email',
        'last_coordinates',
        'devices',
        'campaigns_received',
        'custom_events',
      ],
      customAttributes: null,
    });
    const lines = [
      // Stored jsonb from old data: every nested member of another type than the schema's.
      {
        service_id: 'old-1',
        random_bucket: '12',
        total_revenue: 'lots',
        dob: '1990-02-30',
        created_at: 'yesterday',
        email: 7,
        last_coordinates: { lon: 1 },
        devices: [
          { model: { name: 'x' }, ad_tracking_enabled: 'maybe', carrier: 5, unknown_key: 'dropped' },
          'not an object',
        ],
        campaigns_received: [
          {
            name: 'c',
            engaged: 'yes',
            converted: 1,
            multiple_converted: { a: 'true', b: 'nope' },
            last_received: 1700000000000,
          },
        ],
        custom_events: { not: 'a list' },
      },
      {
        service_id: 'old-2',
        random_bucket: 1.5,
        total_revenue: '2.25',
        dob: '2026-01-01T23:00:00Z',
        created_at: '2026-01-01',
        email: true,
        custom_events: [{ name: 'e', count: 'many', first: '2026-01-01 10:00:00' }],
      },
    ];
    await writeFile(file('types.ndjson'), ndjson(lines));
    expect(await writeParquetFile(file('types.ndjson'), file('types.parquet'), columns)).toEqual({ rows: 2 });
    const { rows } = await readParquet(file('types.parquet'));
    const [a, b] = rows.map((r) => Object.fromEntries(columns.map((c) => [c.name, fromParquet(c.type, r[c.name])])));
    expect(a).toEqual({
      service_id: 'old-1',
      random_bucket: 12n,
      total_revenue: null,
      dob: null,
      created_at: null,
      email: '7',
      last_coordinates: null,
      devices: [
        {
          model: '{"name":"x"}',
          os: null,
          carrier: '5',
          idfv: null,
          idfa: null,
          device_id: null,
          store_ad_id: null,
          tv_ad_id: null,
          ad_tracking_enabled: null,
        },
        // DuckDB's lenient reader keeps a non-object element as a struct of nulls.
        {
          model: null,
          os: null,
          carrier: null,
          idfv: null,
          idfa: null,
          device_id: null,
          store_ad_id: null,
          tv_ad_id: null,
          ad_tracking_enabled: null,
        },
      ],
      campaigns_received: [
        {
          name: 'c',
          api_campaign_id: null,
          last_received: null,
          engaged: {
            opened_email: null,
            opened_push: null,
            clicked_email: null,
            clicked_triggered_in_app_message: null,
          },
          converted: true,
          multiple_converted: { a: true, b: null },
          variation_name: null,
          variation_api_id: null,
          in_control: null,
        },
      ],
      custom_events: null,
    });
    expect(b).toMatchObject({
      service_id: 'old-2',
      random_bucket: 2n,
      total_revenue: 2.25,
      dob: '2026-01-01',
      created_at: Date.parse('2026-01-01T00:00:00Z'),
      email: 'true',
      custom_events: [{ name: 'e', first: Date.parse('2026-01-01T10:00:00Z'), last: null, count: null }],
    });
  });

  it('rejects a line that is not JSON, naming the line but not its content, and leaves no file', async () => {
    await writeFile(
      file('bad.ndjson'),
      ndjson([{ service_id: 'a' }, { service_id: 'b' }, '{"service_id": secret@example.com}', { service_id: 'd' }]),
    );
    await writeFile(file('bad.parquet'), 'an older file');
    const failure = writeParquetFile(file('bad.ndjson'), file('bad.parquet'), ALL);
    await expect(failure).rejects.toThrow(/bad\.ndjson: line 3 is not valid JSON/);
    await expect(failure).rejects.not.toThrow(/secret/);
    await expect(stat(file('bad.parquet'))).rejects.toThrow(/ENOENT/);

    await writeFile(file('array.ndjson'), ndjson([{ service_id: 'a' }, '[1, 2]']));
    await expect(writeParquetFile(file('array.ndjson'), file('array.parquet'), ALL)).rejects.toThrow(
      /line 2 is JSON but not an object \(an array\)/,
    );
  });

  it('writes the removed- part columns: external_id (nullable) and service_id, as strings', async () => {
    await writeFile(file('removed.ndjson'), ndjson([{ external_id: 'u-1', service_id: 's-1' }, { service_id: 's-2' }]));
    expect(await writeParquetFile(file('removed.ndjson'), file('removed.parquet'), REMOVED_PARQUET_COLUMNS)).toEqual({
      rows: 2,
    });
    const { metadata, rows } = await readParquet(file('removed.parquet'));
    const root = parquetSchema(metadata);
    expect(root.children.map((c) => [c.element.name, describeNode(c), c.element.repetition_type])).toEqual([
      ['external_id', 'STRING', 'OPTIONAL'],
      ['service_id', 'STRING', 'OPTIONAL'],
    ]);
    expect(rows.map((r) => [r.external_id ?? null, r.service_id])).toEqual([
      ['u-1', 's-1'],
      [null, 's-2'],
    ]);
  });

  it('cuts large parts into row groups, in order: by rows for short lines, by bytes for long ones', async () => {
    const short = 200_000;
    const text: string[] = [];
    for (let i = 0; i < short; i++)
      text.push(`{"service_id":"s-${i}","random_bucket":${i % 10_000},"created_at":"2026-01-01T00:00:00.000Z"}\n`);
    await writeFile(file('many.ndjson'), text.join(''));
    const columns = usersParquetColumns({
      fields: ['service_id', 'random_bucket', 'created_at'],
      customAttributes: null,
    });
    expect(await writeParquetFile(file('many.ndjson'), file('many.parquet'), columns)).toEqual({ rows: short });
    const many = await readParquet(file('many.parquet'), ['service_id']);
    expect(many.metadata.row_groups.map((g) => Number(g.num_rows))).toEqual([122_880, short - 122_880]);
    expect(many.rows.every((r, i) => r.service_id === `s-${i}`)).toBe(true);

    // About 12 KB a line: a row group holds about 64 MB of NDJSON, not 122,880 lines.
    const pad = 'x'.repeat(12_000);
    const long = 8_000;
    const fat: string[] = [];
    for (let i = 0; i < long; i++) fat.push(`{"service_id":"s-${i}","custom_attributes":{"note":"${pad}"}}\n`);
    await writeFile(file('fat.ndjson'), fat.join(''));
    const fatColumns = usersParquetColumns({ fields: ['service_id'], customAttributes: ['note'] });
    expect(await writeParquetFile(file('fat.ndjson'), file('fat.parquet'), fatColumns)).toEqual({ rows: long });
    const { metadata } = await readParquet(file('fat.parquet'), ['service_id']);
    const groups = metadata.row_groups.map((g) => Number(g.num_rows));
    expect(groups.length).toBeGreaterThan(1);
    expect(groups.reduce((a, b) => a + b, 0)).toBe(long);
    expect(Math.max(...groups)).toBeLessThanOrEqual(8_192);
  });

  it('runs several conversions at once in one process, each with its own rows', async () => {
    const columns = usersParquetColumns({ fields: ['service_id', 'random_bucket', 'devices'], customAttributes: null });
    const parts = Array.from({ length: 5 }, (_, p) =>
      Array.from({ length: 3_000 + p * 500 }, (_, i) => ({
        service_id: `p${p}-${i}`,
        random_bucket: p,
        devices: [{ model: `m${p}`, device_id: `${i}` }],
      })),
    );
    await Promise.all(parts.map((lines, p) => writeFile(file(`par-${p}.ndjson`), ndjson(lines))));
    const results = await Promise.all(
      parts.map((_, p) => writeParquetFile(file(`par-${p}.ndjson`), file(`par-${p}.parquet`), columns)),
    );
    expect(results).toEqual(parts.map((lines) => ({ rows: lines.length })));
    for (const [p, lines] of parts.entries()) {
      const { rows } = await readParquet(file(`par-${p}.parquet`));
      const { want, got } = compareParquet(columns, lines, rows);
      expect(got).toEqual(want);
    }
  });
});

describe('usersParquetColumns', () => {
  it('follows the request order and appends custom_attributes as exportLineSelect does', () => {
    const names = (fields: ExportField[], customAttributes: string[] | null) =>
      usersParquetColumns({ fields, customAttributes }).map((c) => c.name);
    expect(names(['email', 'created_at', 'external_id'], null)).toEqual(['email', 'created_at', 'external_id']);
    expect(names(['email', 'created_at'], ['tier'])).toEqual(['email', 'created_at', 'custom_attributes']);
    expect(names(['custom_attributes', 'email'], ['tier'])).toEqual(['custom_attributes', 'email']);
    expect(usersParquetColumns({ fields: ['dob'], customAttributes: null })).toEqual([{ name: 'dob', type: 'date' }]);
  });
});

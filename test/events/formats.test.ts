import avro from 'avsc';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEvents, FORMAT_EXTENSIONS } from '../../src/pipelines/events/formats/encoders.js';
import { removeOrphanSpoolDirs } from '../../src/pipelines/exports/shard/spool.js';
import {
  avroSchemaText,
  jsonSchemaText,
  SCHEMA_VERSIONS,
  type EventFormat,
} from '../../src/pipelines/events/formats/schemas.js';
import { EVENT_TYPES, type EventType, type LoggedEvent } from '../../src/profiles/event-log-types.js';
import { asAvro, asNdjson, asParquet, FIXTURES } from '../helpers/event-fixtures.js';
import { openWarehouse, type Warehouse } from '../helpers/warehouse-duckdb.js';

/*
 * The event stream's file formats (src/pipelines/events/formats/, docs/events-schemas.md): each type's fixtures
 * encoded in each format and read back by readers that share no code with the writers (avsc's container decoder,
 * DuckDB's read_parquet, zlib and JSON.parse), field by field, with Currents' field order and types; every record
 * checked against the type's JSON Schema by Ajv; the same input giving the same bytes, in this process and another.
 */

// ajv-formats is CommonJS: its default import is the function itself at run time.
const withFormats = addFormats as unknown as (ajv: Ajv2020) => Ajv2020;
const run = promisify(execFile);
const FORMATS: EventFormat[] = ['avro', 'parquet', 'ndjson'];
const INT_MAX = 2 ** 31 - 1;
const INT_MIN = -(2 ** 31);

/**
 * Currents' storage schema of each of its types, from Braze's event glossary ("Cloud Storage" tabs): name and Avro
 * type, `?` for optional (["null", T]). Our files must have exactly these fields and types (ours may add nullable ones).
 */
const CURRENTS: Partial<Record<EventType, string>> = {
  'users.behaviors.CustomEvent':
    'id string, user_id string, external_user_id ?string, app_id ?string, time int, timezone ?string, platform ?string, os_version ?string, device_model ?string, device_id ?string, name string, properties string, ad_id ?string, ad_id_type ?string, ad_tracking_enabled ?boolean, app_group_id ?string',
  'users.behaviors.Purchase':
    'id string, user_id string, external_user_id ?string, app_id ?string, time int, platform ?string, os_version ?string, device_model ?string, device_id ?string, product_id string, price float, currency string, properties string, ad_id ?string, ad_id_type ?string, ad_tracking_enabled ?boolean, app_group_id ?string',
  'users.behaviors.Uninstall':
    'id string, user_id string, external_user_id ?string, device_id ?string, app_id string, time int, app_group_id ?string',
  'users.behaviors.subscription.GlobalStateChange':
    'id string, user_id string, external_user_id ?string, email_address ?string, state_change_source ?string, subscription_status string, channel ?string, time int, timezone ?string, app_group_id ?string, app_id ?string, campaign_id ?string, campaign_name ?string, message_variation_id ?string, canvas_id ?string, canvas_name ?string, canvas_variation_id ?string, canvas_variation_name ?string, canvas_step_id ?string, canvas_step_name ?string, send_id ?string, channel_identifier ?string',
  // The glossary's Cloud Storage tab, in the order of src/pipelines/events/formats/fields.ts (the tab is alphabetical).
  'users.behaviors.subscriptiongroup.StateChange':
    'id string, user_id string, external_user_id ?string, email_address ?string, phone_number ?string, state_change_source ?string, subscription_group_id string, subscription_status string, channel ?string, time int, timezone ?string, app_group_id ?string, app_id ?string, campaign_id ?string, campaign_name ?string, message_variation_id ?string, message_variation_name ?string, canvas_id ?string, canvas_name ?string, canvas_variation_id ?string, canvas_variation_name ?string, canvas_step_id ?string, canvas_step_name ?string, send_id ?string, dispatch_id ?string, channel_identifier ?string',
  'users.canvas.Entry':
    'id string, user_id string, external_user_id ?string, time int, timezone ?string, canvas_id string, canvas_name ?string, canvas_variation_id string, canvas_variation_name ?string, canvas_step_id ?string, canvas_step_name ?string, in_control_group boolean, app_group_id ?string',
};

function currentsFields(type: EventType): { name: string; type: string | string[] }[] {
  return CURRENTS[type]!.split(', ').map((f) => {
    const [name, t] = f.split(' ') as [string, string];
    return { name, type: t.startsWith('?') ? ['null', t.slice(1)] : t };
  });
}

/** Parquet column types that are not VARCHAR. */
const PARQUET_TYPES: Record<string, string> = {
  time: 'TIMESTAMP WITH TIME ZONE',
  price: 'DOUBLE',
  quantity: 'BIGINT',
  ad_tracking_enabled: 'BOOLEAN',
  in_control_group: 'BOOLEAN',
};

/** A Parquet row as JSON, as a loader would print it: instants RFC 3339, int64 as numbers. */
const parquetAsJson = (r: Record<string, unknown>) =>
  Object.fromEntries(
    Object.entries(r).map(([k, v]) => [
      k,
      v instanceof Date ? v.toISOString().replace('.000Z', 'Z') : typeof v === 'bigint' ? Number(v) : v,
    ]),
  );

function validator(type: EventType, format: EventFormat) {
  const ajv = new Ajv2020({ strict: true, allErrors: false });
  withFormats(ajv);
  return ajv.compile(JSON.parse(jsonSchemaText(type, format)));
}

let dir: string;
let warehouse: Warehouse;
let fileNo = 0;

async function readAvro(bytes: Buffer, readerSchema?: object) {
  const file = path.join(dir, `f${++fileNo}.avro`);
  await writeFile(file, bytes);
  return new Promise<{ schema: unknown; codec: string; sync: Buffer; records: Record<string, unknown>[] }>(
    (resolve, reject) => {
      const records: Record<string, unknown>[] = [];
      let meta: { schema: unknown; codec: string; sync: Buffer } = {
        schema: undefined,
        codec: '',
        sync: Buffer.alloc(0),
      };
      avro
        .createFileDecoder(file, readerSchema ? { readerSchema: readerSchema as avro.Schema } : undefined)
        .on('metadata', (_type, codec: string, header: { meta: Record<string, Buffer>; sync: Buffer }) => {
          meta = { schema: JSON.parse(header.meta['avro.schema']!.toString()), codec, sync: header.sync };
        })
        // Plain objects: avsc decodes into instances of a generated record class.
        .on('data', (r: Record<string, unknown>) => records.push({ ...r }))
        .on('error', reject)
        .on('end', () => resolve({ ...meta, records }));
    },
  );
}

async function readParquet(bytes: Buffer) {
  const name = `f${++fileNo}.parquet`;
  await writeFile(path.join(dir, name), bytes);
  const types = await warehouse.query(`DESCRIBE SELECT * FROM read_parquet('${name}')`);
  return {
    columns: Object.fromEntries(types.map((t) => [String(t.column_name), String(t.column_type)])),
    rows: await warehouse.query(`SELECT * FROM read_parquet('${name}')`),
  };
}

const readNdjson = (bytes: Buffer): Record<string, unknown>[] =>
  gunzipSync(bytes)
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'ces-event-formats-'));
  warehouse = await openWarehouse(dir);
});
afterAll(async () => {
  warehouse?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.each(EVENT_TYPES)('%s', (type) => {
  const fixtures = FIXTURES[type];
  const events = fixtures.map((f) => f.event);
  const expected = fixtures.map((f) => f.expected);

  it('avro: avsc reads every record, field by field in Currents order, from a deflate file whose header holds the .avsc', async () => {
    const read = await readAvro(await encodeEvents('avro', type, events));
    expect(read.codec).toBe('deflate');
    expect(read.schema).toEqual(JSON.parse(avroSchemaText(type)));
    expect(read.records).toEqual(expected.map(asAvro));
    for (const [i, r] of read.records.entries()) expect(Object.keys(r)).toEqual(Object.keys(expected[i]!));
    const validate = validator(type, 'avro');
    for (const r of read.records) expect(validate(r) ? [] : validate.errors).toEqual([]);
  });

  it('parquet: DuckDB reads typed columns in Currents order and every value', async () => {
    const { columns, rows } = await readParquet(await encodeEvents('parquet', type, events));
    expect(Object.keys(columns)).toEqual(Object.keys(expected[0]!));
    for (const [name, t] of Object.entries(columns)) expect(t, name).toBe(PARQUET_TYPES[name] ?? 'VARCHAR');
    expect(rows).toEqual(expected.map(asParquet));
    const validate = validator(type, 'parquet');
    for (const r of rows) expect(validate(parquetAsJson(r)) ? [] : validate.errors).toEqual([]);
  });

  it('ndjson: gunzip and JSON.parse give one object a line, every field present, valid against the JSON Schema', async () => {
    const lines = readNdjson(await encodeEvents('ndjson', type, events));
    expect(lines).toEqual(expected.map(asNdjson));
    for (const [i, l] of lines.entries()) expect(Object.keys(l)).toEqual(Object.keys(expected[i]!));
    const validate = validator(type, 'ndjson');
    for (const l of lines) expect(validate(l) ? [] : validate.errors).toEqual([]);
    // The check is real: a wrong time and a missing required field are refused.
    expect(validate({ ...lines[0], time: 'yesterday' })).toBe(false);
    const { id: _id, ...withoutId } = lines[0]!;
    expect(validate(withoutId)).toBe(false);
  });

  it.each(FORMATS)('%s: the same events give the same bytes, from an array or an async iterable', async (format) => {
    const first = await encodeEvents(format, type, events);
    const again = await encodeEvents(format, type, events);
    async function* rows() {
      for (const e of events) yield e;
    }
    const streamed = await encodeEvents(format, type, rows());
    expect(again.equals(first)).toBe(true);
    expect(streamed.equals(first)).toBe(true);
  });

  it('no events: a valid file of no records in each format', async () => {
    const a = await readAvro(await encodeEvents('avro', type, []));
    expect(a.records).toEqual([]);
    expect(a.schema).toEqual(JSON.parse(avroSchemaText(type)));
    const p = await readParquet(await encodeEvents('parquet', type, []));
    expect(p.rows).toEqual([]);
    expect(Object.keys(p.columns)).toEqual(Object.keys(expected[0]!));
    expect(readNdjson(await encodeEvents('ndjson', type, []))).toEqual([]);
  });
});

describe("Braze's Currents storage schemas", () => {
  const currentsTypes = Object.keys(CURRENTS) as EventType[];

  it.each(currentsTypes)('%s: every Currents field, with its Avro type, in Currents order', (type) => {
    const ours = JSON.parse(avroSchemaText(type)) as { fields: { name: string; type: unknown; default?: null }[] };
    const theirs = currentsFields(type);
    expect(ours.fields.slice(0, theirs.length).map((f) => ({ name: f.name, type: f.type }))).toEqual(theirs);
    // Anything beyond Currents is nullable with a null default: a reader of Currents' schema skips it.
    for (const extra of ours.fields.slice(theirs.length)) {
      expect(extra.type, extra.name).toEqual(['null', expect.any(String)]);
      expect(extra.default, extra.name).toBeNull();
    }
  });

  it.each(currentsTypes)("%s: a reader with Currents' schema reads our files", async (type) => {
    const ours = JSON.parse(avroSchemaText(type)) as { name: string; namespace: string };
    const readerSchema = {
      type: 'record',
      name: ours.name,
      namespace: ours.namespace,
      fields: currentsFields(type).map((f) => (Array.isArray(f.type) ? { ...f, default: null } : f)),
    };
    const read = await readAvro(
      await encodeEvents(
        'avro',
        type,
        FIXTURES[type].map((f) => f.event),
      ),
      readerSchema,
    );
    const names = currentsFields(type).map((f) => f.name);
    expect(read.records).toEqual(
      FIXTURES[type].map((f) => Object.fromEntries(names.map((n) => [n, asAvro(f.expected)[n]]))),
    );
  });

  it('record names and namespaces are those of Currents (ours beside them for the two types beyond it)', () => {
    const names = Object.fromEntries(
      EVENT_TYPES.map((t) => {
        const s = JSON.parse(avroSchemaText(t)) as { name: string; namespace: string };
        return [t, `${s.namespace}.${s.name}`];
      }),
    );
    expect(names).toEqual({
      'users.behaviors.CustomEvent': 'dataexport.S3.inner.users.behaviors.CustomEvent',
      'users.behaviors.Purchase': 'dataexport.S3.inner.users.behaviors.Purchase',
      'users.behaviors.subscription.GlobalStateChange':
        'dataexport.S3.inner.users.behaviors.subscription.GlobalStateChange',
      'users.behaviors.subscriptiongroup.StateChange':
        'dataexport.S3.inner.users.behaviors.subscriptiongroup.StateChange',
      'users.behaviors.Uninstall': 'dataexport.S3.inner.users.behaviors.Uninstall',
      'users.canvas.Entry': 'dataexport.S3.inner.users.canvas.Entry',
      'users.Deleted': 'dataexport.S3.inner.users.Deleted',
      'users.Merged': 'dataexport.S3.inner.users.Merged',
    });
  });
});

describe('schema files', () => {
  it('every type is at version 1; the extensions name each format', () => {
    expect(SCHEMA_VERSIONS).toEqual(Object.fromEntries(EVENT_TYPES.map((t) => [t, 1])));
    expect(FORMAT_EXTENSIONS).toEqual({ avro: 'avro', parquet: 'parquet', ndjson: 'ndjson.gz' });
  });

  it.each(EVENT_TYPES)('%s: the .avsc is a schema avsc accepts, and each JSON Schema one Ajv compiles', (type) => {
    expect(() => avro.Type.forSchema(JSON.parse(avroSchemaText(type)) as avro.Schema)).not.toThrow();
    expect(avroSchemaText(type).endsWith('}\n')).toBe(true);
    for (const format of FORMATS) {
      const text = jsonSchemaText(type, format);
      expect(text.endsWith('\n') && !text.slice(0, -1).includes('\n')).toBe(true);
      expect(() => validator(type, format)).not.toThrow();
    }
    // Time is Unix seconds in Avro, RFC 3339 in the others; properties JSON text except in NDJSON.
    const props = (format: EventFormat) => JSON.parse(jsonSchemaText(type, format)).properties;
    expect(props('avro').time.type).toBe('integer');
    expect(props('ndjson').time).toMatchObject({ type: 'string', format: 'date-time' });
    expect(props('parquet').time).toMatchObject({ type: 'string', format: 'date-time' });
  });
});

describe('encoding edges', () => {
  const purchase = FIXTURES['users.behaviors.Purchase'][0]!.event;
  const many = (n: number, props: Record<string, unknown> = { i: 0 }): LoggedEvent[] =>
    Array.from({ length: n }, (_, i) => ({
      ...purchase,
      id: `f0000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      properties: { ...props, i },
    }));

  it('a file of many blocks keeps every record in order, and one record larger than a block is read back whole', async () => {
    const events = [...many(20_000), ...many(1, { big: 'x'.repeat(200_000) }), ...many(3)];
    const avroFile = await readAvro(await encodeEvents('avro', 'users.behaviors.Purchase', events));
    expect(avroFile.records.map((r) => r.id)).toEqual(events.map((e) => e.id));
    expect(JSON.parse(avroFile.records[20_000]!.properties as string).big).toHaveLength(200_000);
    const { rows } = await readParquet(await encodeEvents('parquet', 'users.behaviors.Purchase', events));
    expect(rows.map((r) => r.id)).toEqual(events.map((e) => e.id));
    const lines = readNdjson(await encodeEvents('ndjson', 'users.behaviors.Purchase', events));
    expect(lines.map((l) => l.id)).toEqual(events.map((e) => e.id));
  });

  it('the Avro sync marker is fixed per type and version, whatever the events', async () => {
    const [a, b, c] = await Promise.all([
      readAvro(await encodeEvents('avro', 'users.behaviors.Purchase', many(2))),
      readAvro(await encodeEvents('avro', 'users.behaviors.Purchase', many(5))),
      readAvro(
        await encodeEvents(
          'avro',
          'users.Deleted',
          FIXTURES['users.Deleted'].map((f) => f.event),
        ),
      ),
    ]);
    expect(a.sync.equals(b.sync)).toBe(true);
    expect(a.sync.equals(c.sync)).toBe(false);
  });

  it("times Currents' 32-bit int cannot hold are its bounds in Avro and exact in Parquet and NDJSON", async () => {
    const times = [new Date('2100-03-04T05:06:07Z'), new Date('1850-01-02T03:04:05Z')];
    const events = times.map((time, i) => ({ ...many(2)[i]!, time }));
    const a = await readAvro(await encodeEvents('avro', 'users.behaviors.Purchase', events));
    expect(a.records.map((r) => r.time)).toEqual([INT_MAX, INT_MIN]);
    const { rows } = await readParquet(await encodeEvents('parquet', 'users.behaviors.Purchase', events));
    expect(rows.map((r) => r.time)).toEqual(times);
    const lines = readNdjson(await encodeEvents('ndjson', 'users.behaviors.Purchase', events));
    expect(lines.map((l) => l.time)).toEqual(['2100-03-04T05:06:07Z', '1850-01-02T03:04:05Z']);
  });

  it.each(FORMATS)('%s: an optional value of the wrong type is null, the rest of the record intact', async (format) => {
    const oddQuantity = { ...purchase, data: { price: 5, currency: 'USD', quantity: 1.5 } } as LoggedEvent;
    const change = FIXTURES['users.behaviors.subscription.GlobalStateChange'][0]!;
    const numberEmail = {
      ...change.event,
      data: { subscription_status: 'subscribed', channel: 'email', email_address: 42, state_change_source: 'api' },
    } as unknown as LoggedEvent;
    const read = async (type: EventType, e: LoggedEvent): Promise<Record<string, unknown>> => {
      const bytes = await encodeEvents(format, type, [e]);
      if (format === 'avro') return (await readAvro(bytes)).records[0]!;
      if (format === 'parquet') return (await readParquet(bytes)).rows[0]!;
      return readNdjson(bytes)[0]!;
    };
    expect(await read('users.behaviors.Purchase', oddQuantity)).toMatchObject({ quantity: null, price: 5 });
    expect(await read('users.behaviors.subscription.GlobalStateChange', numberEmail)).toMatchObject({
      email_address: null,
      channel_identifier: null,
      subscription_status: 'Subscribed',
    });
  });

  it.each(FORMATS)(
    '%s: an event of another type, or without a required value, fails the file naming its id, not its values',
    async (format) => {
      const deleted = FIXTURES['users.Deleted'][0]!.event;
      await expect(encodeEvents(format, 'users.behaviors.Purchase', [purchase, deleted])).rejects.toThrow(
        `event ${deleted.id} is a users.Deleted, not a users.behaviors.Purchase`,
      );
      // A purchase row whose data lost its currency: Currents requires one.
      const broken = { ...purchase, data: { price: 1, quantity: 1 } } as unknown as LoggedEvent;
      const failure = await encodeEvents(format, 'users.behaviors.Purchase', [broken]).catch((err: Error) => err);
      expect(failure).toBeInstanceOf(Error);
      expect((failure as Error).message).toBe(
        `event ${purchase.id} (users.behaviors.Purchase) has no value for its required currency`,
      );
      // A price of another type (an old row's jsonb) is no price: required, so the file fails too.
      const textPrice = {
        ...purchase,
        data: { price: '19.99', currency: 'USD', quantity: 1 },
      } as unknown as LoggedEvent;
      await expect(encodeEvents(format, 'users.behaviors.Purchase', [textPrice])).rejects.toThrow(
        `event ${purchase.id} (users.behaviors.Purchase) has no value for its required price`,
      );
      // A failed Parquet file leaves DuckDB usable for the next one.
      if (format === 'parquet')
        expect(
          (await readParquet(await encodeEvents(format, 'users.behaviors.Purchase', [purchase]))).rows,
        ).toHaveLength(1);
    },
  );

  it("a Parquet spool file of a killed process is removed by a starting worker's spool cleanup; a live one's stays", async () => {
    const parent = await mkdtemp(path.join(dir, 'spool-'));
    const { pid: deadPid } = spawnSync(process.execPath, ['-e', '0']);
    const dead = path.join(parent, `ces-export-${deadPid}-event-file-${'a'.repeat(8)}.parquet`);
    const live = path.join(parent, `ces-export-${process.pid}-event-file-${'b'.repeat(8)}.parquet`);
    await writeFile(dead, 'PAR1');
    await writeFile(live, 'PAR1');
    expect(await removeOrphanSpoolDirs(parent)).toBe(1);
    expect(await readdir(parent)).toEqual([path.basename(live)]);
  });

  it('a file rewritten by another process has the same bytes', async () => {
    const types = EVENT_TYPES.map((t) => t);
    const digest = async (format: EventFormat) => {
      const hash = createHash('sha256');
      for (const t of types)
        hash.update(
          await encodeEvents(
            format,
            t,
            FIXTURES[t].map((f) => f.event),
          ),
        );
      return hash.digest('hex');
    };
    const here = Object.fromEntries(await Promise.all(FORMATS.map(async (f) => [f, await digest(f)])));
    const root = path.resolve(import.meta.dirname, '../..');
    const url = (p: string) => pathToFileURL(path.join(root, p)).href;
    const script = `
      import { createHash } from 'node:crypto';
      const { encodeEvents } = await import(${JSON.stringify(url('src/pipelines/events/formats/encoders.ts'))});
      const { FIXTURES } = await import(${JSON.stringify(url('test/helpers/event-fixtures.ts'))});
      const out = {};
      for (const format of ${JSON.stringify(FORMATS)}) {
        const hash = createHash('sha256');
        for (const t of ${JSON.stringify(types)}) hash.update(await encodeEvents(format, t, FIXTURES[t].map((f) => f.event)));
        out[format] = hash.digest('hex');
      }
      console.log(JSON.stringify(out));`;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: root,
    });
    expect(JSON.parse(stdout)).toEqual(here);
  }, 60_000);
});

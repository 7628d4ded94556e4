import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { flushEventExport } from '../../src/pipelines/events/flush-export.js';
import { encodeEvents } from '../../src/pipelines/events/formats/encoders.js';
import { compactJsonb } from '../../src/pipelines/events/formats/json-text.js';
import type { EventFormat } from '../../src/pipelines/events/formats/schemas.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import type { EventType, LoggedEvent } from '../../src/profiles/event-log-types.js';
import { useTestEnv } from '../helpers/context.js';

/**
 * A delivery reads `properties` as jsonb's text and hands it on without parsing it (src/pipelines/events/
 * formats/json-text.ts). The files must hold the same bytes as when each row was parsed into objects (pg's jsonb
 * parsing, then JSON.stringify): properties whose jsonb text and JSON.stringify differ (numbers jsonb keeps as written,
 * integer keys JavaScript puts first, escapes, spacing inside strings) delivered in every format, and each file
 * compared byte for byte with the encoding of the same rows read the old way.
 */

const env = useTestEnv();
const tag = randomUUID().slice(0, 8);
const IDS: Record<EventFormat, string> = { ndjson: randomUUID(), parquet: randomUUID(), avro: randomUUID() };
let workspaceId: string;
let dir: string;

const TRICKY: unknown[] = [
  { a: 1, b: 'x' },
  { price: 1.5, ratio: 0.1, tiny: 1.5e-7, big: 1e21, neg: -12.99, zero: -0, many: 123456789012345 },
  { '10': 'ten', b: 1, '2': 'two', '01': 'zero-one', '1a': true },
  { text: 'a, b: c', quote: 'say "hi"', slash: 'a\\b', ctrl: '\u0001\t\n', emoji: 'é€😀', sep: '\u2028' },
  { nested: { list: [1, 2.5, { k: [] }], empty: {}, none: null }, flag: false },
  [1, 'two', { three: 3 }],
  {},
];
/** Numbers as a client may send them, whose jsonb text is not JavaScript's: kept apart from JSON.stringify. */
const WRITTEN = ['{"n": 1.50, "e": 1e2, "x": 1E-7, "huge": 1e400, "long": 12345678901234567890}', '{"a": 1.0}'];

beforeAll(async () => {
  const applied = await applyWorkspaceFile(
    env.ctx.pool,
    parseWorkspaceFile(`
company: { name: Bytes Co ${tag} }
workspaces:
  - name: Bytes ${tag}
    event_exports:
${Object.entries(IDS)
  .map(
    ([format, id]) =>
      `      - { id: ${id}, name: ${format}, format: ${format}, flush_seconds: 1, max_events_per_file: 4 }`,
  )
  .join('\n')}
`),
  );
  workspaceId = Object.values(applied.workspaceIds)[0]!;
  dir = localWorkspaceDir(env.config.LOCAL_STORE_DIR, { companyId: applied.companyId, workspaceId });
  const texts = [...TRICKY.map((p) => JSON.stringify(p)), ...WRITTEN, null];
  await env.ctx.pool.query(
    `INSERT INTO event_log (workspace_id, accepted_at, id, type, time, user_id, name, properties, data)
     SELECT $1, date_trunc('hour', now()) - interval '1 hour' + interval '1 minute', gen_random_uuid(), t,
            now() - i * interval '1 second', 'svc-' || i, 'opened', p::jsonb,
            CASE WHEN t = 'users.behaviors.Purchase' THEN '{"price": 2.50, "currency": "EUR", "quantity": 2}'
                 ELSE '{}' END::jsonb
       FROM unnest($2::text[]) WITH ORDINALITY AS x(p, i),
            unnest(ARRAY['users.behaviors.CustomEvent', 'users.behaviors.Purchase']) t`,
    [workspaceId, texts],
  );
  // A delivery takes only rows below every running transaction (pg_snapshot_xmin: src/pipelines/events/plan-files.ts).
  // The database is shared with the other test files, whose open transactions can hold that horizon for seconds.
  const deadline = Date.now() + 100_000;
  for (;;) {
    const { rows } = await env.ctx.pool.query<{ below: boolean }>(
      `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint > max(xid) AS below
         FROM event_log WHERE workspace_id = $1`,
      [workspaceId],
    );
    if (rows[0]!.below) break;
    if (Date.now() > deadline) throw new Error('the rows stayed above the delivery horizon for 100 s');
    await new Promise((r) => setTimeout(r, 200));
  }
});

/** The log's rows of one file as `pg` parses them (jsonb into objects), in the file's (xid, id) order. */
async function parsedRows(type: EventType, first: number, count: number): Promise<LoggedEvent[]> {
  const { rows } = await env.ctx.pool.query<LoggedEvent>(
    `SELECT id, type, workspace_id AS "workspaceId", accepted_at AS "acceptedAt", time, user_id AS "userId",
            external_user_id AS "externalUserId", app_id AS "appId", name, properties, data
       FROM event_log WHERE workspace_id = $1 AND type = $2 ORDER BY xid, id OFFSET $3 LIMIT $4`,
    [workspaceId, type, first, count],
  );
  return rows;
}

describe('delivered bytes', () => {
  it.each(Object.keys(IDS) as EventFormat[])(
    '%s: each file is the encoding of its rows parsed from jsonb',
    async (format) => {
      const pass = await flushEventExport(env.ctx, IDS[format]);
      expect(pass).toMatchObject({ ran: true, events: 20 });
      const { rows: files } = await env.ctx.pool.query<{ event_type: EventType; seq: number; key: string }>(
        `SELECT event_type, seq, key FROM event_export_files WHERE export_id = $1 ORDER BY event_type, seq`,
        [IDS[format]],
      );
      expect(files).toHaveLength(6);
      const stored = (await readdir(dir, { recursive: true })).map(String);
      for (const f of files) {
        const name = stored.find((k) => k.endsWith(path.basename(f.key)) && f.key.endsWith(k));
        expect(name, f.key).toBeDefined();
        const bytes = await readFile(path.join(dir, name!));
        const expected = await encodeEvents(format, f.event_type, await parsedRows(f.event_type, f.seq * 4, 4));
        expect(bytes.equals(expected), `${format} ${f.key}`).toBe(true);
      }
    },
  );
});

describe('jsonb text made compact', () => {
  it("gives JSON.stringify(JSON.parse(text)) for PostgreSQL's jsonb text of varied values", async () => {
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const pick = <T>(list: T[]): T => list[Math.floor(random() * list.length)]!;
    const numbers = ['0', '-0', '1', '-1', '1.0', '1.50', '0.1', '1e2', '1E-7', '0.000001', '123456789012345'];
    numbers.push('1234567890123456', '12345678901234567890', '1e21', '1e400', '-1e-400', '3.14159265358979323846');
    const strings = ['', 'a b', 'a, b', 'x: y', '"q"', 'a\\b', '\t\n', '\u0001\u001f', 'é€😀', '\u2028', '{', 'a\\"'];
    const keys = ['a', 'ab', '0', '1', '10', '01', '1a', '-1', ' k', 'k:', '"', '__proto__', 'é', '4294967295', ''];
    const value = (depth: number): string => {
      const r = random();
      if (depth > 3 || r < 0.35) return pick(numbers);
      if (r < 0.6) return JSON.stringify(pick(strings));
      if (r < 0.7) return pick(['true', 'false', 'null']);
      if (r < 0.85) return `[${Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1)).join(',')}]`;
      return object(depth + 1);
    };
    const object = (depth: number): string =>
      `{${Array.from({ length: Math.floor(random() * 5) }, () => `${JSON.stringify(pick(keys))}:${value(depth)}`).join(',')}}`;
    const inputs = Array.from({ length: 3_000 }, () => (random() < 0.1 ? `[${value(1)}]` : object(0)));
    const { rows } = await env.ctx.pool.query<{ t: string }>(`SELECT v::jsonb::text AS t FROM unnest($1::text[]) v`, [
      inputs,
    ]);
    const wrong = rows.filter(({ t }) => compactJsonb(t) !== JSON.stringify(JSON.parse(t)));
    expect(wrong).toEqual([]);
  });
});

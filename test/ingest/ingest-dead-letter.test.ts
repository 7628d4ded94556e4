import { describe, expect, it } from 'vitest';
import { restageDeadLetters } from '../../src/pipelines/ingest/apply/dead-letters.js';
import { runImport } from '../../src/pipelines/ingest/import/run-import.js';
import { createImport } from '../../src/pipelines/ingest/import/imports.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { stageObjects } from '../../src/pipelines/ingest/accept/staging-writer.js';
import type { TrackEvent } from '../../src/profiles/tracked-types.js';
import { LocalStore } from '../../src/platform/storage/local-store.js';
import { captureLogs, useTestEnv } from '../helpers/context.js';
import { entries } from '../helpers/aggregates.js';
import type { SeededWorkspace } from '../helpers/seed.js';

// Every line the process logs at error level, as the service writes it.
const { lines: logged, destination: capture } = captureLogs();

const env = useTestEnv({
  config: { LOG_LEVEL: 'error', INGEST_IMPORT_BATCH: '50' },
  logDestination: capture,
  workspaces: ['wsA', 'wsB'],
});

const TIME = '2024-01-01T00:00:00.000Z';
const event = (externalId: string, name = 'played'): TrackEvent => ({
  identity: { type: 'external_id', value: externalId },
  create: true,
  name,
  time: TIME,
});

/** Stages one request of events as the API would (without its validation), in partition 0; returns the row's id. */
async function stage(ws: SeededWorkspace, events: TrackEvent[]): Promise<number> {
  const [id] = await stageObjects(env.ctx.pool, ws.workspaceId, { events, purchases: [], attributes: [] }, 1);
  return id!;
}

/** Applies staged rows as a worker does, through `throughId` (default: everything staged). */
async function drain(throughId?: number, maxRows = 200) {
  return drainThrough(env.ctx.pool, throughId, { maxRows, partitions: 1, log: env.ctx.log, metrics: env.ctx.metrics });
}

async function eventsOf(ws: SeededWorkspace, externalId: string) {
  const { rows } = await env.ctx.pool.query(
    'SELECT custom_events FROM profiles WHERE workspace_id = $1 AND external_id = $2',
    [ws.workspaceId, externalId],
  );
  return entries(rows[0]?.custom_events);
}

const played = (count = 1) => [{ name: 'played', first: TIME, last: TIME, count }];

async function staged(ws?: SeededWorkspace) {
  const { rows } = await env.ctx.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM ingest_staging WHERE $1::uuid IS NULL OR workspace_id = $1',
    [ws?.workspaceId ?? null],
  );
  return rows[0]!.n;
}

async function deadLetter(stagedId: number) {
  const { rows } = await env.ctx.pool.query('SELECT * FROM ingest_dead_letters WHERE staged_id = $1', [stagedId]);
  return rows;
}

/** ces_ingest_dead_letters_total{source} as /metrics serves it. */
async function deadLetterMetric(source: 'track' | 'import') {
  const body = (await env.app.inject({ method: 'GET', url: '/metrics' })).body;
  const m = new RegExp(`^ces_ingest_dead_letters_total\\{source="${source}"\\} (\\d+)$`, 'm').exec(body);
  return m ? Number(m[1]) : 0;
}

describe('a staged row PostgreSQL refuses', () => {
  it.each([
    // Refused by PostgreSQL's text: 22021 invalid byte sequence.
    {
      what: 'a NUL in an external_id',
      bad: event('private-person\u0000one'),
      code: '22021',
      message: /invalid byte sequence for encoding "UTF8": 0x00/,
    },
    // Accepted by text (Node writes U+FFFD), refused inside the batch's jsonb: 22P02.
    {
      what: 'a lone surrogate in an event name',
      bad: event('private-person-two', 'played\ud800'),
      code: '22P02',
      message: /invalid input syntax for type json/,
    },
  ])(
    '($what) is set aside as a dead letter; the rows around it, of two workspaces, are applied',
    async ({ bad, code, message }) => {
      const tag = code.toLowerCase();
      const before = await deadLetterMetric('track');
      const good = [
        await stage(env.wsA, [event(`${tag}-a1`)]),
        await stage(env.wsB, [event(`${tag}-b1`)]),
        await stage(env.wsA, [event(`${tag}-a2`)]),
      ];
      const badId = await stage(env.wsA, [bad]);
      good.push(await stage(env.wsB, [event(`${tag}-b2`)]), await stage(env.wsA, [event(`${tag}-a1`)]));
      const payload = (
        await env.ctx.pool.query<{ payload: string }>('SELECT payload FROM ingest_staging WHERE id = $1', [badId])
      ).rows[0]!.payload;

      // One batch holds all six rows. It used to fail on every attempt, and the drain with it.
      const result = await drain();
      expect(result).toMatchObject({ batches: 1, rows: 6, events: 5, deadLetters: 1 });
      expect(await staged()).toBe(0);
      expect(await eventsOf(env.wsA, `${tag}-a1`)).toEqual(played(2));
      expect(await eventsOf(env.wsA, `${tag}-a2`)).toEqual(played());
      expect(await eventsOf(env.wsB, `${tag}-b1`)).toEqual(played());
      expect(await eventsOf(env.wsB, `${tag}-b2`)).toEqual(played());
      expect(await eventsOf(env.wsA, 'private-person-two')).toBeUndefined();

      const [letter, ...more] = await deadLetter(badId);
      expect(more).toEqual([]);
      expect(letter).toMatchObject({
        source: 'track',
        workspace_id: env.wsA.workspaceId,
        part: 0,
        objects: 1,
        payload,
        error_code: code,
        staged_id: badId,
      });
      expect(letter.error_message).toMatch(message);
      expect(await deadLetterMetric('track')).toBe(before + 1);
      // Logged once, with the workspace, the staged row and the reason, and nothing of the data.
      const lines = logged.filter((l) => l.includes('ingest_dead_letters') && l.includes(`"stagedId":${badId}`));
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ workspaceId: env.wsA.workspaceId, stagedId: badId, code });
      expect(logged.join('')).not.toContain('private-person');
    },
  );

  it('whose payload is not JSON, or not a payload, is a dead letter too', async () => {
    await stage(env.wsA, [event('pj-a1')]);
    const insert = (payload: string) =>
      env.ctx.pool
        .query<{ id: number }>(
          'INSERT INTO ingest_staging (workspace_id, objects, payload) VALUES ($1, 1, $2) RETURNING id',
          [env.wsB.workspaceId, payload],
        )
        .then((r) => r.rows[0]!.id);
    const notJson = await insert('{"events": [{"identity": ');
    const noUser = await insert(
      JSON.stringify({ events: [{ name: 'played', time: TIME }], purchases: [], attributes: [] }),
    );
    await stage(env.wsB, [event('pj-b1')]);
    const result = await drain();
    expect(result).toMatchObject({ rows: 4, events: 2, deadLetters: 2 });
    expect(await staged()).toBe(0);
    expect(await eventsOf(env.wsA, 'pj-a1')).toEqual(played());
    expect(await eventsOf(env.wsB, 'pj-b1')).toEqual(played());
    expect((await deadLetter(notJson))[0]).toMatchObject({
      workspace_id: env.wsB.workspaceId,
      error_code: 'payload',
      error_message: expect.stringMatching(/^not JSON/),
    });
    expect((await deadLetter(noUser))[0]).toMatchObject({
      error_code: 'payload',
      error_message: 'events[0] names no user',
    });
  });

  it('is applied once fixed and staged again', async () => {
    const badId = await stage(env.wsA, [event('fixed\u0000me')]);
    await drain();
    const [letter] = await deadLetter(badId);
    expect(letter.payload).toContain('fixed\\u0000me');
    // The operator's fix: the identifier without its NUL.
    await env.ctx.pool.query(`UPDATE ingest_dead_letters SET payload = replace(payload, '\\u0000', '') WHERE id = $1`, [
      letter.id,
    ]);
    const [restaged, ...more] = await restageDeadLetters(env.ctx.pool, [letter.id]);
    expect(more).toEqual([]);
    expect((await env.ctx.pool.query('SELECT 1 FROM ingest_dead_letters WHERE id = $1', [letter.id])).rowCount).toBe(0);
    const { rows } = await env.ctx.pool.query('SELECT workspace_id, accepted_at FROM ingest_staging WHERE id = $1', [
      restaged,
    ]);
    expect(rows).toEqual([{ workspace_id: env.wsA.workspaceId, accepted_at: letter.accepted_at }]);
    const result = await drain();
    expect(result).toMatchObject({ rows: 1, events: 1, deadLetters: 0 });
    expect(await eventsOf(env.wsA, 'fixedme')).toEqual(played());
  });
});

describe('fairness between workspaces', () => {
  it("a workspace's backlog delays another workspace's new row by one batch at most", async () => {
    // Workspace A: a backlog of 1,000 staged rows, twenty batches of 50 (INGEST_BATCH_MAX_JOBS=50).
    const { rows } = await env.ctx.pool.query<{ id: number }>(
      `INSERT INTO ingest_staging (workspace_id, objects, payload)
       SELECT $1, 1, json_build_object('events', json_build_array(json_build_object(
                'identity', json_build_object('type', 'external_id', 'value', 'backlog-' || (g % 100)),
                'create', true, 'name', 'played', 'time', $2::text)), 'purchases', '[]'::json, 'attributes', '[]'::json)::text
         FROM generate_series(1, 1000) g
       RETURNING id`,
      [env.wsA.workspaceId, TIME],
    );
    const oldest = Math.min(...rows.map((r) => r.id));
    // Workspace B stages one row after all of them.
    await stage(env.wsB, [event('fair-b')]);

    // A drain through A's oldest row applies one batch: B's row is in it.
    const first = await drain(oldest, 50);
    expect(first).toMatchObject({ batches: 1, rows: 50, events: 50 });
    expect(await eventsOf(env.wsB, 'fair-b')).toEqual(played());
    expect(await staged(env.wsB)).toBe(0);
    expect(await staged(env.wsA)).toBe(951);

    // A's backlog then drains whole, each row once.
    const rest = await drain(undefined, 50);
    expect(rest).toMatchObject({ rows: 951, events: 951 });
    const { rows: totals } = await env.ctx.pool.query<{ n: number }>(
      `SELECT sum((custom_events->'played'->>'count')::int)::int AS n FROM profiles WHERE workspace_id = $1 AND external_id LIKE 'backlog-%'`,
      [env.wsA.workspaceId],
    );
    expect(totals[0]!.n).toBe(1000);
  });
});

describe('a bulk import record PostgreSQL refuses', () => {
  it('goes to the rejects file and the dead letters, and the import completes', async () => {
    const store = LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, env.wsA);
    // A refusal PostgreSQL makes whatever the validation lets through: a CHECK constraint of this test's own schema.
    await env.ctx.pool.query(
      `ALTER TABLE profiles ADD CONSTRAINT refuses_blocked CHECK (external_id NOT LIKE 'blocked%')`,
    );
    try {
      const line = (external_id: string) => JSON.stringify({ external_id, name: 'played', time: TIME });
      const file = ['imp-1', 'imp-2', 'blocked-1', 'imp-3', 'imp-1'].map(line).join('\n');
      await store.put('imports/refused.ndjson', Buffer.from(`${file}\n`));
      const before = await deadLetterMetric('import');
      const deps = { pool: env.ctx.pool, config: env.config, log: env.ctx.log, metrics: env.ctx.metrics };
      const created = await createImport(
        deps,
        env.wsA.workspaceId,
        { source: 'local', key: 'imports/refused.ndjson' },
        'test',
      );
      const done = await runImport(deps, created.import_id);
      expect(done).toMatchObject({ status: 'completed', records_handled: 5, events_applied: 4, rejected: 1 });
      expect(await eventsOf(env.wsA, 'imp-1')).toEqual(played(2));
      expect(await eventsOf(env.wsA, 'imp-3')).toEqual(played());
      expect(await eventsOf(env.wsA, 'blocked-1')).toBeUndefined();
      const rejects = async () =>
        (await (await store.get('imports/refused.ndjson.rejects.ndjson')).toArray())
          .map(String)
          .join('')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l));
      const expected = [
        {
          line: 3,
          reason: expect.stringMatching(
            /^the database refused it: new row for relation "profiles" violates check constraint "refuses_blocked"/,
          ),
          object: expect.objectContaining({ identity: { type: 'external_id', value: 'blocked-1' } }),
        },
      ];
      expect(await rejects()).toEqual(expected);
      const { rows } = await env.ctx.pool.query(
        'SELECT source, import_id, line, error_code FROM ingest_dead_letters WHERE import_id = $1',
        [created.import_id],
      );
      expect(rows).toEqual([{ source: 'import', import_id: created.import_id, line: 3, error_code: '23514' }]);
      expect(await deadLetterMetric('import')).toBe(before + 1);

      // A resumed run (here of a failed one) writes the whole rejects file again, that line included, and applies
      // nothing twice.
      await env.ctx.pool.query(`UPDATE imports SET status = 'failed' WHERE id = $1`, [created.import_id]);
      expect(await runImport(deps, created.import_id)).toMatchObject({
        status: 'completed',
        events_applied: 4,
        rejected: 1,
      });
      expect(await rejects()).toEqual(expected);
      expect(await eventsOf(env.wsA, 'imp-1')).toEqual(played(2));
    } finally {
      await env.ctx.pool.query('ALTER TABLE profiles DROP CONSTRAINT refuses_blocked');
    }
  });
});

import { expect, it } from 'vitest';
import { eventId, logEvents } from '../../src/profiles/event-log.js';
import type { EventEntry } from '../../src/profiles/event-log-types.js';
import { useTestEnv } from '../helpers/context.js';

/**
 * The log is written by COPY in its binary format (src/profiles/event-log-copy.ts): every value must come back from the
 * table as it went in, whatever it holds (the test was first written for the text format, where a backslash, a tab, a
 * newline and a carriage return have a meaning, and holds the binary one to the same). `properties` are json (migration
 * 0450): their text is stored as JSON.stringify wrote it, escapes (even of a NUL or a lone surrogate, which the API
 * refuses and jsonb would too) included.
 */

const env = useTestEnv({ workspaces: ['ws'] });

const TRICKY = ['tab\there', 'line\nbreak', 'cr\rhere', 'back\\slash', '\\N', 'é€😀 \u2028', 'quote "q" \'s\'', ''];

it('logs values holding what COPY escapes exactly as they were given, in the caller transaction', async () => {
  const workspaceId = env.ws.workspaceId;
  const entries: EventEntry[] = TRICKY.map((text, i) => ({
    type: i % 2 ? 'users.behaviors.Purchase' : 'users.behaviors.CustomEvent',
    workspaceId,
    key: `key-${i}-${text}`,
    profileId: i === 0 ? null : i,
    userId: `user ${text}`,
    externalUserId: i === 1 ? null : `ext ${text}`,
    time: `2026-11-2${i}T10:00:00.000Z`,
    appId: i === 2 ? null : `app ${text}`,
    name: `name ${text}`,
    properties:
      i === 3 ? null : { text, nested: { list: [text, 1.5, null] }, [`key ${text}`]: true, nul: 'a\u0000b\ud800' },
    ...(i % 2 ? { data: { price: 2.5, currency: text, quantity: 2 } } : {}),
  }));
  const client = await env.ctx.pool.connect();
  try {
    await client.query('BEGIN');
    await logEvents(client, entries);
    await client.query('ROLLBACK');
    expect((await env.ctx.pool.query('SELECT count(*)::int AS n FROM event_log')).rows[0].n).toBe(0);
    await client.query('BEGIN');
    await logEvents(client, entries);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  const { rows } = await env.ctx.pool.query(
    `SELECT id, type, time, profile_id, user_id, external_user_id, app_id, name, properties::text, data
       FROM event_log WHERE workspace_id = $1`,
    [workspaceId],
  );
  // eventId gives the md5's hex; PostgreSQL prints the uuid with its dashes.
  const byId = new Map(rows.map((r) => [r.id.replaceAll('-', ''), { ...r, id: r.id.replaceAll('-', '') }]));
  expect(byId.size).toBe(entries.length);
  for (const e of entries) {
    const row = byId.get(eventId(workspaceId, e.key));
    expect(row, e.key!).toEqual({
      id: eventId(workspaceId, e.key),
      type: e.type,
      time: new Date(e.time),
      profile_id: e.profileId,
      user_id: e.userId,
      external_user_id: e.externalUserId,
      app_id: e.appId,
      name: e.name,
      properties: e.properties ? JSON.stringify(e.properties) : null,
      data: e.data ?? {},
    });
  }
});

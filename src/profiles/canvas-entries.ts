import type { Pool } from '../platform/db/pool.js';
import { eventIdSql } from './event-log.js';

/** What a canvas firing enters its audience with (src/features/canvases/fire.ts decides it). */
export interface CanvasEntry {
  canvasApiId: string;
  canvasName: string;
  /** The canvas_dispatches row whose users_entered counts the entries. */
  dispatchRowId: number;
  /** Every zone name PostgreSQL knows (when zones matter): a user's zone outside it counts as UTC. */
  knownZones: string[];
  /** Zones this firing enters (local mode); null for every zone. */
  zones: string[] | null;
  /** Zones already entered by an earlier firing of this schedule. */
  covered: string[];
}

/**
 * Enters the audience into the canvas: each user's canvases_received gets (or updates) the canvas's entry, in the
 * export record's shape, with last_entered and last_received_message at the fire time. The step engine is not part
 * of this service, so steps_received keeps what it had (empty for a first entry). Each entry is logged
 * (users.canvas.Entry, keyed by the dispatch and the profile) by the statement that makes it; a retried batch skips
 * the users this firing already entered, and so logs none twice.
 */
export async function enterUsers(
  pool: Pool,
  c: CanvasEntry,
  predicate: { sql: string; params: unknown[] },
  fireAt: Date,
  batchSize: number,
): Promise<number> {
  const params: unknown[] = [...predicate.params];
  const p = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const after = p(0);
  const limit = p(batchSize);
  const canvas = p(c.canvasApiId);
  const name = p(c.canvasName);
  const at = p(fireAt.toISOString());
  const dispatch = p(c.dispatchRowId);
  // Zone lists are bound as constant arrays, which PostgreSQL hashes, so the scan stays in id order and stops at LIMIT.
  const zone =
    c.knownZones.length > 0
      ? `(CASE WHEN p.time_zone = ANY(${p(c.knownZones)}::text[]) THEN p.time_zone ELSE 'UTC' END)`
      : `'UTC'`;
  const conditions = [`(${predicate.sql})`, `p.id > ${after}`];
  if (c.zones !== null) conditions.push(`${zone} = ANY(${p(c.zones)}::text[])`);
  if (c.covered.length > 0) conditions.push(`NOT (${zone} = ANY(${p(c.covered)}::text[]))`);
  const sql = `
    WITH batch AS (
      SELECT p.id FROM profiles p
       WHERE ${conditions.join(' AND ')}
       ORDER BY p.id LIMIT ${limit}
    ),
    upd AS (
      UPDATE profiles p SET
        canvases_received =
          COALESCE((SELECT jsonb_agg(x.e ORDER BY x.i) FROM jsonb_array_elements(p.canvases_received) WITH ORDINALITY AS x(e, i)
                     WHERE x.e->>'api_canvas_id' IS DISTINCT FROM ${canvas}::text), '[]'::jsonb)
          || jsonb_build_array(
               '{"in_control": false, "last_entered_control_at": null, "steps_received": []}'::jsonb
               || COALESCE((SELECT e FROM jsonb_array_elements(p.canvases_received) e WHERE e->>'api_canvas_id' = ${canvas}::text LIMIT 1), '{}'::jsonb)
               || jsonb_build_object('name', ${name}::text, 'api_canvas_id', ${canvas}::text, 'last_entered', ${at}::text, 'last_received_message', ${at}::text)),
        updated_at = now()
      FROM batch b
      WHERE p.id = b.id
        AND NOT p.canvases_received @> jsonb_build_array(jsonb_build_object('api_canvas_id', ${canvas}::text, 'last_entered', ${at}::text))
      RETURNING p.workspace_id, p.id, p.service_id, p.external_id
    ),
    logged AS (
      INSERT INTO event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, data)
      SELECT u.workspace_id, ${eventIdSql('u.workspace_id', `'canvas:' || ${dispatch}::text || ':' || u.id::text`)},
             'users.canvas.Entry', ${at}::text::timestamptz, u.id, u.service_id, u.external_id,
             jsonb_build_object('canvas_id', ${canvas}::text, 'canvas_name', ${name}::text, 'canvas_variation_id', NULL,
                                'in_control_group', false)
        FROM upd u
    ),
    counted AS (
      UPDATE canvas_dispatches SET users_entered = users_entered + (SELECT count(*) FROM upd) WHERE id = ${dispatch}::bigint
    )
    SELECT (SELECT max(id) FROM batch) AS last_id, (SELECT count(*) FROM upd)::int AS entered`;
  const afterIndex = predicate.params.length;
  let total = 0;
  for (;;) {
    const { rows } = await pool.query<{ last_id: number | null; entered: number }>(sql, params);
    total += rows[0]!.entered;
    if (rows[0]!.last_id === null) return total;
    params[afterIndex] = rows[0]!.last_id;
  }
}

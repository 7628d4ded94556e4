import { createHash } from 'node:crypto';
import type { TestEnv } from './context.js';

/** A row of the event log (migration 0320) as a delivery reads it, `time` as ISO text. */
export interface LogRow {
  id: string;
  type: string;
  time: string;
  name: string | null;
  properties: unknown;
  app_id: string | null;
  user_id: string | null;
  external_user_id: string | null;
  data: unknown;
}

/** The log's rows of a workspace matching `where` (over event_log's columns, parameters from $2), in a fixed order. */
export async function logRows(
  env: TestEnv,
  workspaceId: string,
  where = 'true',
  params: unknown[] = [],
): Promise<LogRow[]> {
  const { rows } = await env.ctx.pool.query<Omit<LogRow, 'time'> & { time: Date }>(
    `SELECT id, type, time, name, properties, app_id, user_id, external_user_id, data
       FROM event_log WHERE workspace_id = $1 AND (${where}) ORDER BY type, time, name, id`,
    [workspaceId, ...params],
  );
  return rows.map((r) => ({ ...r, time: r.time.toISOString() }));
}

/** The rows without their ids (which tests check on their own: fresh ones are random). */
export const withoutIds = (rows: LogRow[]): Omit<LogRow, 'id'>[] => rows.map(({ id: _id, ...rest }) => rest);

/** The id of an event logged with `key`: the UUID made of the md5 of its workspace and key (docs/events-log.md). */
export const keyedId = (workspaceId: string, key: string): string =>
  createHash('md5')
    .update(`${workspaceId}:${key}`)
    .digest('hex')
    .replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');

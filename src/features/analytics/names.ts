import type { Pool } from '../../platform/db/pool.js';
import { badRequest } from '../../platform/errors.js';

/**
 * The names the analytics lists give (docs/analytics.md): custom event names and product ids, one row each in
 * event_names and product_names (migration 0380), added by the first event or purchase that carries them. Ordered by
 * their bytes (COLLATE "C"), the same order on every install.
 */

export const NAMES_PAGE_SIZE = 250;
export const EVENTS_PAGE_SIZE = 50;

/** A page (from 0) of the workspace's custom event names, alphabetical. */
export async function listEventNames(pool: Pool, workspaceId: string, page: number): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(
    `SELECT name FROM event_names WHERE workspace_id = $1 ORDER BY name COLLATE "C" LIMIT $2 OFFSET $3`,
    [workspaceId, NAMES_PAGE_SIZE, page * NAMES_PAGE_SIZE],
  );
  return rows.map((r) => r.name);
}

/** A page (from 0) of the workspace's product ids, alphabetical. */
export async function listProducts(pool: Pool, workspaceId: string, page: number): Promise<string[]> {
  const { rows } = await pool.query<{ product: string }>(
    `SELECT product FROM product_names WHERE workspace_id = $1 ORDER BY product COLLATE "C" LIMIT $2 OFFSET $3`,
    [workspaceId, NAMES_PAGE_SIZE, page * NAMES_PAGE_SIZE],
  );
  return rows.map((r) => r.product);
}

export interface CustomEventEntry {
  name: string;
  description: string | null;
  included_in_analytics_report: boolean;
  status: string;
  tag_names: string[];
}

const encodeCursor = (name: string) => Buffer.from(name, 'utf8').toString('base64url');

function decodeCursor(cursor: string): string {
  const name = Buffer.from(cursor, 'base64url').toString('utf8');
  // Only a cursor we issued decodes to a name that encodes back to itself.
  if (name === '' || encodeCursor(name) !== cursor)
    throw badRequest('cursor is not valid: pass the cursor of a Link header unchanged');
  return name;
}

/** One page of the workspace's custom events (GET /events), alphabetical, and the cursor of the next page if any. */
export async function listCustomEvents(
  pool: Pool,
  workspaceId: string,
  cursor: string | undefined,
): Promise<{ events: CustomEventEntry[]; next?: string }> {
  const after = cursor === undefined || cursor === '' ? null : decodeCursor(cursor);
  const { rows } = await pool.query<CustomEventEntry>(
    `SELECT name, description, included_in_analytics_report, status, tag_names FROM event_names
      WHERE workspace_id = $1 AND ($2::text IS NULL OR name COLLATE "C" > $2::text COLLATE "C")
      ORDER BY name COLLATE "C" LIMIT $3`,
    [workspaceId, after, EVENTS_PAGE_SIZE + 1],
  );
  const events = rows.slice(0, EVENTS_PAGE_SIZE);
  return rows.length > EVENTS_PAGE_SIZE ? { events, next: encodeCursor(events.at(-1)!.name) } : { events };
}

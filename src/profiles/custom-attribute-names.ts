import type { Pool } from '../platform/db/pool.js';
import { badRequest } from '../platform/errors.js';

/**
 * The custom attributes a workspace's profiles carry, for GET /custom_attributes: `custom_attribute_names`, kept by the
 * workers' stats pass (`refreshCustomAttributeNames`, every WORKSPACE_STATS_INTERVAL_SECONDS) from one read of the
 * workspace's profiles, so that a page of the list is a lookup by name and no profile write does any work for it. A
 * name first written on a profile is listed after the next pass; a name stays listed once seen, as the public API
 * keeps an attribute that no profile holds any more. The workspace file may declare an attribute (its data type,
 * description and tags; src/features/workspace/): a declared name is listed before any profile holds it.
 */

/** The public API's data types, from the JSON a value is stored as; an ISO 8601 date string is a Time. */
const DATA_TYPE_SQL = `CASE jsonb_typeof(e.value)
  WHEN 'number' THEN 'Number'
  WHEN 'boolean' THEN 'Boolean'
  WHEN 'string' THEN CASE WHEN e.value #>> '{}' ~ '^\\d{4}-\\d{2}-\\d{2}([T ]\\d{2}:\\d{2}(:\\d{2}([.:]\\d+)?)?(Z|[+-]\\d{1,2}(:?\\d{2})?)?)?$'
                          THEN 'Time' ELSE 'String' END
  WHEN 'array' THEN CASE WHEN jsonb_typeof(e.value -> 0) = 'object' THEN 'Array of objects' ELSE 'Array' END
  ELSE 'Object' END`;

/**
 * Records the custom attribute names the workspace's profiles hold now, each with the data type most of its values
 * have (ties by type name), as seen on `day`. Returns how many names the profiles hold. The names are read by a
 * SELECT of their own, which PostgreSQL may run in parallel (an INSERT ... SELECT never is), and written after.
 */
export async function refreshCustomAttributeNames(pool: Pool, workspaceId: string, day: string): Promise<number> {
  const { rows } = await pool.query<{ name: string; data_type: string }>(
    `WITH seen AS (
       SELECT e.key AS name, ${DATA_TYPE_SQL} AS data_type, count(*) AS n
         FROM profiles p, jsonb_each(p.custom_attributes) e
        WHERE p.workspace_id = $1 AND jsonb_typeof(e.value) <> 'null'
        GROUP BY 1, 2
     )
     SELECT DISTINCT ON (name) name, data_type FROM seen ORDER BY name, n DESC, data_type`,
    [workspaceId],
  );
  await pool.query(
    `INSERT INTO custom_attribute_names (workspace_id, name, data_type, first_seen_on, last_seen_on)
     SELECT $1, s.name, s.data_type, $4::date, $4::date FROM unnest($2::text[], $3::text[]) AS s(name, data_type)
     ON CONFLICT (workspace_id, name) DO UPDATE
        SET data_type = excluded.data_type, last_seen_on = excluded.last_seen_on,
            first_seen_on = COALESCE(custom_attribute_names.first_seen_on, excluded.first_seen_on)`,
    [workspaceId, rows.map((r) => r.name), rows.map((r) => r.data_type), day],
  );
  return rows.length;
}

/** One entry of GET /custom_attributes, in the public API's shape. */
export interface CustomAttributeEntry {
  name: string;
  data_type: string;
  /** The longest array the attribute may hold; null: this service caps no array's length (only its bytes). */
  array_length: number | null;
  /** The workspace file's description of the attribute; null when it declares none. */
  description: string | null;
  status: 'Active';
  tag_names: string[];
}

export const CUSTOM_ATTRIBUTES_PAGE_SIZE = 50;

// The cursor is the last name of the page, in base64url; only a cursor we issued decodes and encodes back to itself.
const encodeCursor = (name: string) => Buffer.from(name, 'utf8').toString('base64url');
function decodeCursor(cursor: string): string {
  const name = Buffer.from(cursor, 'base64url').toString('utf8');
  if (name === '' || encodeCursor(name) !== cursor)
    throw badRequest('cursor is not valid: pass the cursor of a Link header unchanged');
  return name;
}

/** A page of the workspace's custom attributes by name (byte order), with the cursor of the next page when more follow. */
export async function listCustomAttributes(
  pool: Pool,
  workspaceId: string,
  cursor: string | undefined,
): Promise<{ attributes: CustomAttributeEntry[]; next?: string }> {
  const after = cursor === undefined || cursor === '' ? null : decodeCursor(cursor);
  const { rows } = await pool.query<{ name: string; data_type: string; description: string | null; tags: string[] }>(
    // A declared type wins; a name declared and never seen on a profile is a String until one holds it.
    `SELECT name, COALESCE(declared_type, data_type, 'String') AS data_type, description, tags FROM custom_attribute_names
      WHERE workspace_id = $1 AND ($2::text IS NULL OR name COLLATE "C" > $2::text COLLATE "C")
      ORDER BY name COLLATE "C" LIMIT $3`,
    [workspaceId, after, CUSTOM_ATTRIBUTES_PAGE_SIZE + 1],
  );
  const attributes = rows.slice(0, CUSTOM_ATTRIBUTES_PAGE_SIZE).map((r) => ({
    name: r.name,
    data_type: r.data_type,
    array_length: null,
    description: r.description,
    status: 'Active' as const,
    tag_names: r.tags,
  }));
  return rows.length > CUSTOM_ATTRIBUTES_PAGE_SIZE
    ? { attributes, next: encodeCursor(attributes[attributes.length - 1]!.name) }
    : { attributes };
}

import type { Pool } from '../../platform/db/pool.js';
import { badRequest } from '../../platform/errors.js';
import { parseIsoTime } from '../../platform/lib/iso-time.js';
import { CONTENT_BLOCK_MESSAGES as M, liquidTag } from './content-blocks.js';

/**
 * GET /content_blocks/info and /list. `inclusion_count` counts the workspace's email templates whose subject, body,
 * plaintext body or preheader includes the block (this service has no campaigns or canvas messages, which is what
 * the original counts); `inclusion_data` lists them as `{email_template_id}`.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

// The templates that include each block, read in one pass over the workspace's templates that mention a block.
const REFERENCES = `refs AS (
  SELECT DISTINCT t.api_id, m[1] AS name
    FROM email_templates t,
         regexp_matches(concat_ws(E'\\n', t.subject, t.body, t.plaintext_body, t.preheader),
                        '\\{\\{\\s*content_blocks\\.\\$\\{\\s*([A-Za-z0-9_-]+)\\s*\\}\\s*\\}\\}', 'g') AS m
   WHERE t.workspace_id = $1
     AND concat_ws(E'\\n', t.subject, t.body, t.plaintext_body, t.preheader) LIKE '%content\\_blocks%')`;
// html when the content holds a tag, text otherwise.
const CONTENT_TYPE = `CASE WHEN b.content ~* '<[a-z!/][^>]*>' THEN 'html' ELSE 'text' END`;

export interface ContentBlockInfo {
  content_block_id: string;
  name: string;
  content: string;
  description: string;
  content_type: 'html' | 'text';
  tags: string[];
  created_at: string;
  last_edited: string;
  inclusion_count: number;
  inclusion_data?: { email_template_id: string }[];
}

/** GET /content_blocks/info: one block of the workspace, by id; `include_inclusion_data` is `true` or `false`. */
export async function getContentBlock(
  pool: Pool,
  workspaceId: string,
  query: { content_block_id?: string; include_inclusion_data?: string },
): Promise<ContentBlockInfo> {
  const id = query.content_block_id ?? '';
  if (id.trim() === '') throw badRequest(M.idBlank);
  const flag = query.include_inclusion_data;
  if (flag !== undefined && flag !== 'true' && flag !== 'false') throw badRequest(M.inclusionData);
  if (!UUID.test(id)) throw badRequest(M.idInvalid);
  const { rows } = await pool.query<Omit<ContentBlockInfo, 'inclusion_count'> & { included_in: string[] }>(
    `WITH ${REFERENCES}
     SELECT b.id AS content_block_id, b.name, b.content, coalesce(b.description, '') AS description,
            ${CONTENT_TYPE} AS content_type, b.tags, ${iso('b.created_at')} AS created_at,
            ${iso('b.updated_at')} AS last_edited,
            (SELECT coalesce(array_agg(r.api_id ORDER BY r.api_id), '{}') FROM refs r WHERE r.name = b.name) AS included_in
       FROM content_blocks b WHERE b.workspace_id = $1 AND b.id = $2`,
    [workspaceId, id],
  );
  const row = rows[0];
  if (!row) throw badRequest(M.idInvalid);
  const { included_in, ...block } = row;
  return {
    ...block,
    inclusion_count: included_in.length,
    ...(flag === 'true' ? { inclusion_data: included_in.map((t) => ({ email_template_id: t })) } : {}),
  };
}

export interface ContentBlockListEntry {
  content_block_id: string;
  name: string;
  content_type: 'html' | 'text';
  liquid_tag: string;
  inclusion_count: number;
  created_at: string;
  last_edited: string;
  tags: string[];
}

/** The list query as sent (strings), parsed here so that each refusal is Braze's message. */
export interface ContentBlockListQuery {
  modified_after?: string;
  modified_before?: string;
  limit?: string;
  offset?: string;
}

function parseListQuery(q: ContentBlockListQuery) {
  const time = (text: string | undefined, message: string) => {
    if (text === undefined) return null;
    const parsed = parseIsoTime(text.replace(/ /g, '+'));
    if (!parsed) throw badRequest(message);
    return parsed.date;
  };
  const after = time(q.modified_after, 'Modified after time is invalid');
  const before = time(q.modified_before, 'Modified before time is invalid');
  if (after && before && after > before)
    throw badRequest('Modified after time must be earlier than or the same as modified before time.');
  if (q.limit !== undefined && !/^\d{1,9}$/.test(q.limit)) throw badRequest('Content Block number limit is invalid');
  const limit = q.limit === undefined ? 100 : Number(q.limit);
  if (limit < 1) throw badRequest('Content Block number limit must be greater than 0');
  if (limit > 1000) throw badRequest('Content Block number limit exceeds maximum of 1000');
  if (q.offset !== undefined && !/^\d{1,9}$/.test(q.offset)) throw badRequest('Offset is invalid');
  return { after, before, limit, offset: q.offset === undefined ? 0 : Number(q.offset) };
}

/**
 * GET /content_blocks/list: by last edit, oldest first (ties by creation), `modified_after` and `modified_before`
 * inclusive, `limit` 1-1000 (default 100), `offset` 0 or more.
 */
export async function listContentBlocks(
  pool: Pool,
  workspaceId: string,
  query: ContentBlockListQuery,
): Promise<ContentBlockListEntry[]> {
  const q = parseListQuery(query);
  const { rows } = await pool.query<Omit<ContentBlockListEntry, 'liquid_tag'>>(
    `WITH ${REFERENCES}, counts AS (SELECT name, count(*)::int AS n FROM refs GROUP BY name)
     SELECT b.id AS content_block_id, b.name, ${CONTENT_TYPE} AS content_type, coalesce(c.n, 0) AS inclusion_count,
            ${iso('b.created_at')} AS created_at, ${iso('b.updated_at')} AS last_edited, b.tags
       FROM content_blocks b LEFT JOIN counts c ON c.name = b.name
      WHERE b.workspace_id = $1
        AND ($2::timestamptz IS NULL OR b.updated_at >= $2)
        AND ($3::timestamptz IS NULL OR b.updated_at <= $3)
      ORDER BY b.updated_at, b.created_at, b.id
      LIMIT $4 OFFSET $5`,
    [workspaceId, q.after, q.before, q.limit, q.offset],
  );
  return rows.map((r) => ({ ...r, liquid_tag: liquidTag(r.name) }));
}

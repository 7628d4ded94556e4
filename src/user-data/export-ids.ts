import type { Pool } from '../db/pool.js';
import { exportLineText, windowStart } from '../exports/shard/line-query.js';
import { EXPORT_FIELDS, type ExportField } from '../exports/request/request-body.js';
import { findCandidates, refText } from '../profiles/lookup.js';
import { exportIdsRefs, type ExportIdsBody } from './requests.js';

/**
 * POST /users/export/ids: the users the request names, each rendered by the segment export's own line (src/exports/
 * line-query.ts), so that the same user and fields give the same JSON in both. Users come in the order the request
 * names them (a user named twice, once); an email address, phone number or device id may name several users, most
 * recently updated first. Identifiers that name nobody are listed in invalid_user_ids (an alias as `label:name`).
 * Answered as JSON text built around the lines PostgreSQL wrote: nothing is parsed and serialized again.
 */
export async function exportByIdentifiers(
  pool: Pool,
  workspaceId: string,
  body: ExportIdsBody,
  now = new Date(),
): Promise<string> {
  const refs = exportIdsRefs(body);
  const candidates = await findCandidates(pool, workspaceId, refs);
  const invalid = refs.flatMap((ref, i) => (candidates[i]!.length === 0 ? [refText(ref)] : []));
  const ids = [...new Set(candidates.flat().map((c) => c.id))];
  let lines: string[] = [];
  if (ids.length > 0) {
    const fields = [...new Set(body.fields_to_export ?? EXPORT_FIELDS)] as ExportField[];
    const { rows } = await pool.query<{ id: number; line: string }>(
      `SELECT p.id, ${exportLineText({ fields, customAttributes: null }, windowStart(now))} AS line
         FROM profiles p WHERE p.workspace_id = $1 AND p.id = ANY($2::bigint[])`,
      [workspaceId, ids],
    );
    const byId = new Map(rows.map((r) => [r.id, r.line]));
    lines = ids.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
  }
  return `{"users":[${lines.join(',')}],${invalid.length > 0 ? `"invalid_user_ids":${JSON.stringify(invalid)},` : ''}"message":"success"}`;
}

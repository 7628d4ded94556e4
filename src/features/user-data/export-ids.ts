import type { Pool } from '../../platform/db/pool.js';
import { exportLineText, windowStart } from '../../pipelines/exports/shard/line-query.js';
import { EXPORT_FIELDS, type ExportField } from '../../pipelines/exports/request/request-body.js';
import { findCandidates, refText } from '../../profiles/lookup.js';
import { exportIdsRefs, type ExportIdsBody } from './requests.js';

/** At most this many users of one identifier are answered (an email address, phone number or device id). */
export const MAX_USERS_PER_IDENTIFIER = 50;

/**
 * POST /users/export/ids: the users the request names, each rendered by the segment export's own line
 * (src/pipelines/exports/ line-query.ts), so that the same user and fields give the same JSON in both. Users come in
 * the order the request names them (a user named twice, once); an email address, phone number or device id may name
 * several users, most recently updated first, at most MAX_USERS_PER_IDENTIFIER of them: one that names more is listed
 * in truncated_user_ids, so that a shared identifier neither answers without bound nor is cut short in silence.
 * Identifiers that name nobody are listed in invalid_user_ids (an alias as `label:name`). Answered as JSON text built
 * around the lines PostgreSQL wrote: nothing is parsed and serialized again.
 */
export async function exportByIdentifiers(
  pool: Pool,
  workspaceId: string,
  body: ExportIdsBody,
  now = new Date(),
): Promise<string> {
  const refs = exportIdsRefs(body);
  // One more than are answered, to know that there were more.
  const candidates = await findCandidates(pool, workspaceId, refs, { limitPerRef: MAX_USERS_PER_IDENTIFIER + 1 });
  const invalid = refs.flatMap((ref, i) => (candidates[i]!.length === 0 ? [refText(ref)] : []));
  const truncated = refs.flatMap((ref, i) => {
    if (candidates[i]!.length <= MAX_USERS_PER_IDENTIFIER) return [];
    candidates[i]!.length = MAX_USERS_PER_IDENTIFIER;
    return [refText(ref)];
  });
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
  const listed = (key: string, values: string[]) => (values.length > 0 ? `"${key}":${JSON.stringify(values)},` : '');
  return `{"users":[${lines.join(',')}],${listed('invalid_user_ids', invalid)}${listed('truncated_user_ids', truncated)}"message":"success"}`;
}

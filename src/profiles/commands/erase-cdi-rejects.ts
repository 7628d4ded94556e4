import type { PoolClient } from '../../platform/db/pool.js';
import type { ErasedIdentifier } from './erased-identifiers.js';

/**
 * Rows a Cloud Data Ingestion run refused (cdi_sync_rejects, src/pipelines/cdi/batch-apply.ts): each line holds the
 * source row verbatim, `{reason, ..., row: {external_id, email, ...}}` by lower-cased column, until the run writes its
 * rejects file. A line goes when one of the row's identifier columns names the erased person; a merged-in identifier
 * only in runs started before its merge.
 */

/** A column value as the sync reads it (src/pipelines/cdi/rows.ts): text, or a number printed. */
const text = (v: unknown): string | undefined =>
  typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'bigint' ? String(v) : undefined;

/** Whether a refused source row names one of the identifiers (valid for a run started at `startedMs`). */
function rowNames(row: Record<string, unknown>, ids: ErasedIdentifier[], startedMs: number): boolean {
  const columns: Array<[ErasedIdentifier['kind'], string | undefined]> = [
    ['external_id', text(row.external_id)],
    ['service_id', text(row.service_id)],
    ['service_id', text(row.braze_id)],
    ['email', text(row.email)?.trim().toLowerCase()],
    ['phone', text(row.phone)?.trim()],
  ];
  const aliasName = text(row.alias_name);
  const aliasLabel = text(row.alias_label);
  return ids.some(
    (i) =>
      startedMs <= i.untilMs &&
      (i.kind === 'user_alias'
        ? i.value === aliasName && i.label === aliasLabel
        : columns.some(([kind, value]) => kind === i.kind && value === i.value)),
  );
}

/** Deletes the workspace's rejected CDI rows that name the erased person. */
export async function eraseCdiRejects(client: PoolClient, workspaceId: string, ids: ErasedIdentifier[]): Promise<void> {
  const values = [...new Set(ids.map((i) => i.value))];
  if (values.length === 0) return;
  // Only lines whose text holds one of the values, as JSON writes it, can name them: parsed and compared exactly.
  const patterns = values.map(
    (v) =>
      `%${JSON.stringify(v)
        .slice(1, -1)
        .replace(/[\\%_]/g, (c) => `\\${c}`)}%`,
  );
  const { rows } = await client.query<{ job_id: string; seq: string; line: string; started_ms: string }>(
    `SELECT r.job_id, r.seq, r.line, extract(epoch FROM j.started_at) * 1000 AS started_ms
       FROM cdi_sync_jobs j JOIN cdi_sync_rejects r ON r.job_id = j.id
      WHERE j.workspace_id = $1 AND r.line ILIKE ANY($2::text[])`,
    [workspaceId, patterns],
  );
  const gone = rows.filter((r) => {
    let row: unknown;
    try {
      row = (JSON.parse(r.line) as { row?: unknown }).row;
    } catch {
      return false;
    }
    return (
      typeof row === 'object' && row !== null && rowNames(row as Record<string, unknown>, ids, Number(r.started_ms))
    );
  });
  if (gone.length === 0) return;
  await client.query(
    `DELETE FROM cdi_sync_rejects r USING unnest($1::uuid[], $2::bigint[]) AS d(job_id, seq)
      WHERE r.job_id = d.job_id AND r.seq = d.seq`,
    [gone.map((r) => r.job_id), gone.map((r) => r.seq)],
  );
}

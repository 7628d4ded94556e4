import type { PoolClient } from '../../platform/db/pool.js';
import type { StoredObject } from '../../platform/storage/object-store.js';
import type { WorkspaceStore } from '../../platform/storage/stores.js';
import { commitBatch, type Item, type SyncDeps } from './batch-apply.js';
import { fileRows, pendingFiles, type FileFormat } from './file-source.js';
import type { CdiIntegration } from './integrations.js';
import type { SyncJob } from './sync-runs.js';
import { latestRowTime, rowItem } from './rows.js';

/**
 * A bucket source: each new file in key order, its position (the integration's, cdi_file_positions) committed with
 * each batch, the file recorded when done. A run that stopped in a file, whatever its end, leaves its position: the
 * next run, or this one resumed, goes on after the rows committed, and stamps the rest with the time the file was first
 * read at (files have no UPDATED_AT), not its own start, which would beat writes made between the two runs.
 */

interface Position {
  done: number;
  /** The time every row of the file is stamped with (ISO, to the millisecond). */
  rowsAt: string;
}

const fileKey = (f: { key: string; etag: string }) => `${f.key}\u0000${f.etag}`;

/** The integration's positions in the files still to take; those of files gone or replaced (a new etag) are dropped. */
async function positionsOf(
  deps: SyncDeps,
  integrationId: string,
  files: StoredObject[],
): Promise<Map<string, Position>> {
  const { rows } = await deps.pool.query<{ key: string; etag: string; done: string; rows_at: Date }>(
    `SELECT key, etag, done, rows_at FROM cdi_file_positions WHERE integration_id = $1`,
    [integrationId],
  );
  const pending = new Set(files.map(fileKey));
  const stale = rows.filter((r) => !pending.has(fileKey(r)));
  if (stale.length > 0)
    await deps.pool.query(
      `DELETE FROM cdi_file_positions WHERE integration_id = $1 AND (key, etag) IN (SELECT * FROM unnest($2::text[], $3::text[]))`,
      [integrationId, stale.map((r) => r.key), stale.map((r) => r.etag)],
    );
  return new Map(rows.map((r) => [fileKey(r), { done: Number(r.done), rowsAt: r.rows_at.toISOString() }]));
}

/** What a file's batch commits with its rows: the position reached, or, at the file's end, the file taken. */
function fileProgress(
  integrationId: string,
  job: SyncJob,
  file: StoredObject,
  rowsAt: string,
): (client: PoolClient, upTo: number, last: boolean) => Promise<void> {
  return async (client, upTo, last) => {
    if (last) {
      await client.query(
        `INSERT INTO cdi_files_synced (integration_id, key, etag, job_id, rows) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
        [integrationId, file.key, file.etag, job.id, upTo],
      );
      await client.query(`DELETE FROM cdi_file_positions WHERE integration_id = $1 AND key = $2 AND etag = $3`, [
        integrationId,
        file.key,
        file.etag,
      ]);
      return;
    }
    await client.query(
      `INSERT INTO cdi_file_positions (integration_id, key, etag, done, rows_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (integration_id, key, etag) DO UPDATE SET done = excluded.done`,
      [integrationId, file.key, file.etag, upTo, rowsAt],
    );
  };
}

/** One file, from its position on, a batch at a time. */
async function syncFile(
  deps: SyncDeps,
  job: SyncJob,
  integration: CdiIntegration & { source: { type: 'bucket' } },
  opened: WorkspaceStore,
  file: StoredObject,
  position: Position,
): Promise<void> {
  const progress = fileProgress(integration.id, job, file, position.rowsAt);
  let read = 0;
  let batch: Item[] = [];
  let bytes = 0;
  const latest = latestRowTime();
  const commit = async (last: boolean) => {
    const upTo = read;
    await commitBatch(deps, job, batch, (client) => progress(client, upTo, last), null);
    batch = [];
    bytes = 0;
  };
  for await (const r of fileRows(opened.store, file.key, integration.source.format as FileFormat)) {
    read++;
    if (read <= position.done) continue;
    const at = { file: file.key, line: read };
    batch.push(
      'refused' in r
        ? { item: { kind: 'refused', reason: r.refused }, row: null, at }
        : { item: rowItem(r.row, position.rowsAt, latest), row: r.row, at },
    );
    bytes += r.bytes;
    if (batch.length >= deps.config.CDI_BATCH_ROWS || bytes >= deps.config.CDI_BATCH_BYTES) await commit(false);
  }
  await commit(true);
}

/** A bucket source: each new file in key order, from where the integration's last run stopped in it. */
export async function syncFiles(
  deps: SyncDeps,
  job: SyncJob,
  integration: CdiIntegration & { source: { type: 'bucket' } },
  opened: WorkspaceStore,
  startedAt: string,
): Promise<void> {
  const { prefix, format } = integration.source;
  const taken = await deps.pool.query<{ key: string; etag: string }>(
    `SELECT key, etag FROM cdi_files_synced WHERE integration_id = $1`,
    [integration.id],
  );
  const done = new Set(taken.rows.map(fileKey));
  const files = await pendingFiles(opened.store, prefix, format as FileFormat, (f) => done.has(fileKey(f)));
  const positions = await positionsOf(deps, integration.id, files);
  for (const file of files)
    await syncFile(
      deps,
      job,
      integration,
      opened,
      file,
      positions.get(fileKey(file)) ?? { done: 0, rowsAt: startedAt },
    );
}

import type { WorkspaceStore } from '../storage/stores.js';
import { commitBatch, type Item, type SyncDeps } from './batch-apply.js';
import { fileRows, pendingFiles, type FileFormat } from './file-source.js';
import type { CdiIntegration } from './integrations.js';
import { readJob, type SyncJob } from './jobs.js';
import { rowItem } from './rows.js';

/** A bucket source: each new file in key order, its position committed with each batch, the file recorded when done. */
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
  const done = new Set(taken.rows.map((r) => `${r.key}\u0000${r.etag}`));
  const files = await pendingFiles(opened.store, prefix, format as FileFormat, (f) =>
    done.has(`${f.key}\u0000${f.etag}`),
  );
  // A resumed run goes on in the file it was in, past the rows it had committed.
  let cursor = (await readJob(deps.pool, job.id))?.cursor ?? null;
  for (const file of files) {
    const skip = cursor && cursor.key === file.key && cursor.etag === file.etag ? cursor.done : 0;
    let position = 0;
    let batch: Item[] = [];
    const commit = async (last: boolean) => {
      const upTo = position;
      await commitBatch(
        deps,
        job,
        batch,
        async (client) => {
          if (last) {
            await client.query(
              `INSERT INTO cdi_files_synced (integration_id, key, etag, job_id, rows) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
              [integration.id, file.key, file.etag, job.id, upTo],
            );
            await client.query(`UPDATE cdi_sync_jobs SET cursor = NULL WHERE id = $1`, [job.id]);
          } else {
            await client.query(`UPDATE cdi_sync_jobs SET cursor = $2 WHERE id = $1`, [
              job.id,
              JSON.stringify({ key: file.key, etag: file.etag, done: upTo }),
            ]);
          }
        },
        null,
      );
      batch = [];
    };
    for await (const r of fileRows(opened.store, file.key, format as FileFormat)) {
      position++;
      if (position <= skip) continue;
      const at = { file: file.key, line: position };
      batch.push(
        'refused' in r
          ? { item: { kind: 'refused', reason: r.refused }, row: null, at }
          : { item: rowItem(r.row, startedAt), row: r.row, at },
      );
      if (batch.length >= deps.config.CDI_BATCH_ROWS) await commit(false);
    }
    await commit(true);
    cursor = null;
  }
}

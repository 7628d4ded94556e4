import { publicBaseUrl, type Config } from '../../../platform/config.js';
import type { Pool } from '../../../platform/db/pool.js';
import { notFound } from '../../../platform/errors.js';
import { downloadUrl } from '../finish/download.js';
import { MANIFEST_FILE } from '../key-layout.js';
import { exportStatusRow } from '../export-rows.js';

export interface ExportStatus {
  object_prefix: string;
  segment_id: string;
  status: 'queued' | 'running' | 'ready' | 'failed';
  destination: 'local' | 's3' | 'gcs';
  users_done: number;
  parts_done: number;
  created_at: string;
  started_at?: string;
  finished_at?: string;
  key_prefix?: string;
  manifest_key?: string;
  url?: string;
  url_expires_at?: string;
  error?: string;
  scheduled_by?: string;
  changes_since?: string;
  removed_done?: number;
}

/**
 * Where an export of this workspace stands. While it runs, users and parts done are counted from the parts in the
 * store and the shard tails waiting to be merged, so the numbers never count a retried shard twice; users never go
 * back below the most shown before (exports.users_progress).
 */
export async function exportStatus(
  pool: Pool,
  config: Config,
  workspaceId: string,
  objectPrefix: string,
): Promise<ExportStatus> {
  const r = await exportStatusRow(pool, workspaceId, objectPrefix);
  if (!r) throw notFound(`No export with object_prefix ${JSON.stringify(objectPrefix)} in this workspace`);
  const done = r.status === 'ready';
  const out: ExportStatus = {
    object_prefix: r.object_prefix,
    segment_id: r.segment_id,
    status: r.status,
    destination: r.destination,
    // Never fewer than shown before: a shard retried after a crash removes its parts and writes them again.
    users_done: done ? Number(r.users_done) : Math.max(Number(r.live_users), Number(r.users_progress)),
    parts_done: done ? Number(r.parts_done) : Number(r.live_parts),
    created_at: r.created_at.toISOString(),
  };
  if (r.started_at) out.started_at = r.started_at.toISOString();
  if (r.finished_at) out.finished_at = r.finished_at.toISOString();
  if (r.key_prefix) out.key_prefix = r.key_prefix;
  if (done && r.key_prefix) out.manifest_key = `${r.key_prefix}/${MANIFEST_FILE}`;
  if (done && r.destination === 'local') {
    out.url = downloadUrl(config, r.public_base_url ?? publicBaseUrl(config), r.object_prefix);
    if (r.url_expires_at) out.url_expires_at = r.url_expires_at.toISOString();
  }
  if (r.error) out.error = r.error;
  if (r.scheduled_by) out.scheduled_by = r.scheduled_by;
  if (r.changes_since) {
    out.changes_since = r.changes_since;
    if (done) out.removed_done = Number(r.removed_done);
  }
  return out;
}

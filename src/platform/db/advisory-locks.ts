import type { PoolClient } from './pool.js';

/**
 * PostgreSQL advisory locks, taken one way: a lock is named by text, hashed to the 64-bit key PostgreSQL locks
 * (`hashtextextended(name, 0)`). Every lock of the service is named here, so that a reader sees in one place what
 * excludes what.
 *
 * Transaction locks end with their transaction. Session locks end when released or when their connection closes (a
 * killed process's locks go with its connection): callers hold a dedicated client for them.
 */
export const lockNames = {
  /** A workspace's ingestion: whole (exclusive) for writers of profiles outside ingestion, shared by partitions. */
  ingest: (workspaceId: string) => `ces-ingest:${workspaceId}`,
  /** One ingestion partition of a workspace (src/pipelines/ingest/apply/partitions.ts). */
  ingestPartition: (workspaceId: string, part: number) => `ces-ingest:${workspaceId}:${part}`,
  /** The migrations of one schema: one process migrates, the others wait and find nothing to do. */
  migrate: (schema: string) => `ces-migrate:${schema}`,
  /** `ces workspace apply` of one company. */
  workspaceApply: (companyName: string) => `ces-workspace-apply:${companyName}`,
  /** The reconciler's pass of one install. */
  reconciler: (schema: string) => `ces-reconciler:${schema}`,
  /** One runner of an import, of a CDI sync. */
  importRun: (importId: string) => `ces-import:${importId}`,
  cdiSync: (integrationId: string) => `ces-cdi:${integrationId}`,
  /** A company's count of unfinished exports, read and added to in one transaction (the spec's cap). */
  exportCompany: (companyId: string) => `ces-export-company:${companyId}`,
  /** One runner per export shard, one finisher per export (session locks of the workers' own connections). */
  exportShard: (exportId: string, shard: number) => `ces-export-shard:${exportId}:${shard}`,
  exportFinish: (exportId: string) => `ces-export-finish:${exportId}`,
  /** The preference center names of a workspace, checked and written by one writer at a time (API or file). */
  preferenceCenterNames: (workspaceId: string) => `ces-preference-center-names:${workspaceId}`,
  /** One flusher per event export. */
  eventExport: (exportId: string) => `ces-event-export:${exportId}`,
} as const;

const KEY = 'hashtextextended($1, 0)';

/** Waits for the lock until the transaction ends; `shared` holds it alongside other shared holders. */
export async function lockForTransaction(
  client: PoolClient,
  name: string,
  mode: 'exclusive' | 'shared' = 'exclusive',
): Promise<void> {
  const fn = mode === 'shared' ? 'pg_advisory_xact_lock_shared' : 'pg_advisory_xact_lock';
  await client.query(`SELECT ${fn}(${KEY})`, [name]);
}

/** Takes the lock until the transaction ends if it is free; false when another holds it. */
export async function tryLockForTransaction(client: PoolClient, name: string): Promise<boolean> {
  const { rows } = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(${KEY}) AS ok`, [name]);
  return rows[0]!.ok;
}

/** Waits for the lock, held by this connection until `unlockSession` or until the connection closes. */
export async function lockSession(client: PoolClient, name: string): Promise<void> {
  await client.query(`SELECT pg_advisory_lock(${KEY})`, [name]);
}

/** Takes the session lock if it is free; false when another connection holds it. */
export async function tryLockSession(client: PoolClient, name: string): Promise<boolean> {
  const { rows } = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(${KEY}) AS ok`, [name]);
  return rows[0]!.ok;
}

export async function unlockSession(client: PoolClient, name: string): Promise<void> {
  await client.query(`SELECT pg_advisory_unlock(${KEY})`, [name]);
}

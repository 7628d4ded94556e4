import type { Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import { Destination } from './destination.js';
import { GcsStore } from './gcs-store.js';
import { LocalStore, type LocalNamespace } from './local-store.js';
import type { ObjectStore } from './object-store.js';
import { S3Store } from './s3-store.js';

/**
 * A workspace's export store: its own bucket when the workspace file declares one, else its own directory of the
 * built-in local store.
 */
export interface WorkspaceStore {
  store: ObjectStore;
  /** Key prefix the destination asks for ('' or ending in '/'). */
  prefix: string;
  /** Releases clients the store holds open. */
  close(): void;
}

export interface StoreForOptions {
  /**
   * Open the local store's shared root instead of the workspace's namespace: only for objects recorded before the
   * store had namespaces (their keys come from the database, never from a request).
   */
  sharedRoot?: boolean;
}

export function storeFor(
  config: Pick<Config, 'LOCAL_STORE_DIR'>,
  destination: Destination | null,
  namespace: LocalNamespace,
  options: StoreForOptions = {},
): WorkspaceStore {
  if (!destination) {
    const store = options.sharedRoot
      ? LocalStore.sharedRoot(config.LOCAL_STORE_DIR)
      : LocalStore.forWorkspace(config.LOCAL_STORE_DIR, namespace);
    return { store, prefix: '', close: () => {} };
  }
  const prefix = destination.prefix ? `${destination.prefix.replace(/\/+$/, '')}/` : '';
  if (destination.provider === 's3') {
    const store = new S3Store(destination);
    return { store, prefix, close: () => store.close() };
  }
  return { store: new GcsStore(destination), prefix, close: () => {} };
}

export interface WorkspaceStorage {
  /** The workspace's part of the built-in local store. */
  namespace: LocalNamespace;
  /** Its bucket, or null for the local store. */
  destination: Destination | null;
}

/** Where a workspace's objects live. A malformed destination is an operator error. */
export async function workspaceStorage(pool: Pool, workspaceId: string): Promise<WorkspaceStorage> {
  const { rows } = await pool.query<{ company_id: string; export_destination: unknown }>(
    `SELECT company_id, export_destination FROM workspaces WHERE id = $1`,
    [workspaceId],
  );
  const row = rows[0];
  if (!row) throw new Error(`no workspace ${workspaceId}`);
  const namespace = { companyId: row.company_id, workspaceId };
  const raw = row.export_destination;
  if (raw === null || raw === undefined) return { namespace, destination: null };
  const parsed = Destination.safeParse(raw);
  if (!parsed.success)
    throw new Error(
      `workspace ${workspaceId} has an invalid export destination: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
    );
  return { namespace, destination: parsed.data };
}

/** The workspace's parsed destination, or null for the local store. */
export async function workspaceDestination(pool: Pool, workspaceId: string): Promise<Destination | null> {
  return (await workspaceStorage(pool, workspaceId)).destination;
}

import type { Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import { Destination } from './destination.js';
import { GcsStore } from './gcs-store.js';
import { LocalStore } from './local-store.js';
import type { ObjectStore } from './object-store.js';
import { S3Store } from './s3-store.js';

/** A workspace's export store: its own bucket when the workspace file declares one, else the built-in local store. */
export interface WorkspaceStore {
  store: ObjectStore;
  /** Key prefix the destination asks for ('' or ending in '/'). */
  prefix: string;
  /** Releases clients the store holds open. */
  close(): void;
}

export function storeFor(config: Pick<Config, 'LOCAL_STORE_DIR'>, destination: Destination | null): WorkspaceStore {
  if (!destination) return { store: new LocalStore(config.LOCAL_STORE_DIR), prefix: '', close: () => {} };
  const prefix = destination.prefix ? `${destination.prefix.replace(/\/+$/, '')}/` : '';
  if (destination.provider === 's3') {
    const store = new S3Store(destination);
    return { store, prefix, close: () => store.close() };
  }
  return { store: new GcsStore(destination), prefix, close: () => {} };
}

/** The workspace's parsed destination, or null for the local store. A malformed one is an operator error. */
export async function workspaceDestination(pool: Pool, workspaceId: string): Promise<Destination | null> {
  const { rows } = await pool.query<{ export_destination: unknown }>(`SELECT export_destination FROM workspaces WHERE id = $1`, [workspaceId]);
  const raw = rows[0]?.export_destination;
  if (raw === null || raw === undefined) return null;
  const parsed = Destination.safeParse(raw);
  if (!parsed.success) throw new Error(`workspace ${workspaceId} has an invalid export destination: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  return parsed.data;
}

// The PostgreSQL side of a load: each lane's transaction, and a batch of users copied in as profile and alias rows.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type { PoolClient } from '../../platform/db/pool.js';
import { profileLine } from './profile-line.js';
import type { World } from './world.js';

const COPY_CHUNK = 256 * 1024;

/** The profiles columns of a generated COPY line (profile-line.ts), in order. */
export const PROFILE_COLUMNS = [
  'id',
  'workspace_id',
  'service_id',
  'external_id',
  'random_bucket',
  'created_at',
  'updated_at',
  'first_name',
  'last_name',
  'email',
  'dob',
  'home_city',
  'country',
  'phone',
  'language',
  'time_zone',
  'last_coordinates',
  'gender',
  'total_revenue',
  'attributed_campaign',
  'attributed_source',
  'attributed_adgroup',
  'attributed_ad',
  'push_subscribe',
  'email_subscribe',
  'push_opted_in_at',
  'uninstalled_at',
  'custom_attributes',
  'user_aliases',
  'devices',
  'push_tokens',
  'apps',
  'custom_events',
  'purchases',
  'campaigns_received',
  'canvases_received',
  'cards_clicked',
] as const;

/** Opens a lane's transaction on the workspace, failing if the workspace does not exist. */
export async function beginLoad(client: PoolClient, workspaceId: string): Promise<void> {
  await client.query('BEGIN');
  // Holding the workspace for the load is what lets the per-row foreign-key checks go (see skipRowTriggers).
  const found = await client.query('SELECT 1 FROM workspaces WHERE id = $1 FOR KEY SHARE', [workspaceId]);
  if (found.rowCount === 0) throw new Error(`workspace ${workspaceId} does not exist`);
  await skipRowTriggers(client);
}

/**
 * Foreign-key checks run one query per row (a quarter of PostgreSQL's time in this load). This load's rows reference
 * only the workspace locked above and profile ids it reserved itself, so the checks cannot fail: skip them with
 * session_replication_role = replica, which PostgreSQL allows superusers only; other roles simply keep them. Any
 * trigger that is not a constraint check (none today) keeps them too, since replica mode would skip it.
 */
async function skipRowTriggers(client: PoolClient): Promise<void> {
  const { rows } = await client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_trigger WHERE tgrelid IN ('profiles'::regclass, 'profile_aliases'::regclass) AND NOT tgisinternal`,
  );
  if (rows[0]!.n > 0) return;
  await client.query('SAVEPOINT replica_role');
  try {
    await client.query('SET LOCAL session_replication_role = replica');
    await client.query('RELEASE SAVEPOINT replica_role');
  } catch {
    await client.query('ROLLBACK TO SAVEPOINT replica_role');
  }
}

/** The sequence profile ids are reserved from. */
export async function profileIdSequence(client: PoolClient): Promise<string> {
  return (await client.query<{ seq: string }>(`SELECT pg_get_serial_sequence('profiles', 'id') AS seq`)).rows[0]!.seq;
}

/** Copies users `firstIndex` to `firstIndex + n - 1` under ids reserved from `sequence`; returns the alias rows copied. */
export async function copyBatch(
  client: PoolClient,
  world: World,
  sequence: string,
  firstIndex: number,
  n: number,
): Promise<number> {
  const { rows } = await client.query<{ id: number }>(
    `SELECT nextval($1::regclass)::bigint AS id FROM generate_series(1, $2)`,
    [sequence, n],
  );
  const aliasLines: string[] = [];
  await copyIn(
    client,
    `COPY profiles (${PROFILE_COLUMNS.join(', ')}) FROM STDIN`,
    profileChunks(
      world,
      firstIndex,
      rows.map((r) => r.id),
      aliasLines,
    ),
  );
  if (aliasLines.length > 0) {
    await copyIn(
      client,
      `COPY profile_aliases (workspace_id, alias_label, alias_name, profile_id) FROM STDIN`,
      joinChunks(aliasLines),
    );
  }
  return aliasLines.length;
}

async function copyIn(client: PoolClient, sql: string, chunks: Iterable<string>): Promise<void> {
  // pipeline() waits on the COPY stream's backpressure, so memory holds only a few chunks at a time.
  await pipeline(Readable.from(chunks, { objectMode: false }), client.query(pgCopy.from(sql)));
}

function* joinChunks(lines: string[]): Generator<string> {
  let buf = '';
  for (const line of lines) {
    buf += line;
    if (buf.length >= COPY_CHUNK) {
      yield buf;
      buf = '';
    }
  }
  if (buf) yield buf;
}

function* profileChunks(world: World, firstIndex: number, ids: number[], aliasLines: string[]): Generator<string> {
  let buf = '';
  for (let k = 0; k < ids.length; k++) {
    buf += profileLine(world, firstIndex + k, ids[k]!, aliasLines);
    if (buf.length >= COPY_CHUNK) {
      yield buf;
      buf = '';
    }
  }
  if (buf) yield buf;
}

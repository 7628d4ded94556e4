import { setTimeout as sleep } from 'node:timers/promises';
import type { PoolClient } from '../../../platform/db/pool.js';
import type { ExportJobDeps } from '../running-export.js';
import type { ExportRow } from '../export-rows.js';

/**
 * Where an export shard reads its members. With EXPORT_DATABASE_URL set, from that server (a hot standby, typically)
 * once it has replayed what the primary had committed when the export was requested, so that an export from a
 * replica is never older than one from the primary would have been. A standby that does not get there within
 * EXPORT_MAX_REPLICA_LAG_SECONDS, or cannot be reached, is passed over: the shard reads from the primary, and says so.
 */
export interface ReadSource {
  client: PoolClient;
  from: 'primary' | 'replica';
  /** For a replica: how far it had replayed when the shard began reading. */
  replayLsn: string | null;
  replayAt: Date | null;
  release(err?: Error): void;
}

interface ReplayState {
  caught_up: boolean;
  replay_lsn: string | null;
  replay_at: Date | null;
}

const POLL_MS = 250;

/** Whether the standby has replayed up to `lsn` (a server not in recovery always has), and how far it is. */
async function replayState(client: PoolClient, lsn: string | null): Promise<ReplayState> {
  const { rows } = await client.query<ReplayState>(
    `SELECT CASE WHEN NOT pg_is_in_recovery() OR $1::pg_lsn IS NULL THEN true
                 ELSE pg_last_wal_replay_lsn() >= $1::pg_lsn END AS caught_up,
            (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text AS replay_lsn,
            CASE WHEN pg_is_in_recovery() THEN pg_last_xact_replay_timestamp() ELSE now() END AS replay_at`,
    [lsn],
  );
  return rows[0]!;
}

/**
 * Opens the read side for one shard. `primary` is the shard's connection to the primary (holding its lock), used as
 * it is when there is no replica or the replica is passed over; a replica connection is released by `release`.
 */
export async function openReadSource(
  deps: ExportJobDeps,
  exp: ExportRow,
  primary: PoolClient,
  shard: number,
): Promise<ReadSource> {
  const onPrimary: ReadSource = {
    client: primary,
    from: 'primary',
    replayLsn: null,
    replayAt: null,
    release: () => {},
  };
  if (deps.exportReadPool === deps.pool) {
    deps.metrics.exportShardReads.inc({ source: 'primary' });
    return onPrimary;
  }
  const { config, log, metrics } = deps;
  let replica: PoolClient | undefined;
  try {
    replica = await deps.exportReadPool.connect();
    const deadline = Date.now() + config.EXPORT_MAX_REPLICA_LAG_SECONDS * 1000;
    for (;;) {
      const state = await replayState(replica, exp.primary_lsn);
      if (state.caught_up) {
        const client = replica;
        metrics.exportShardReads.inc({ source: 'replica' });
        return {
          client,
          from: 'replica',
          replayLsn: state.replay_lsn,
          replayAt: state.replay_at,
          release: (err) => client.release(err),
        };
      }
      if (Date.now() >= deadline) {
        log.warn(
          {
            exportId: exp.id,
            shard,
            needed: exp.primary_lsn,
            replayed: state.replay_lsn,
            waitedSeconds: config.EXPORT_MAX_REPLICA_LAG_SECONDS,
          },
          'export replica is behind the export; reading this shard from the primary',
        );
        break;
      }
      await sleep(POLL_MS);
    }
  } catch (err) {
    log.warn({ err, exportId: exp.id, shard }, 'export replica unreachable; reading this shard from the primary');
  }
  replica?.release();
  metrics.exportShardReads.inc({ source: 'primary' });
  return onPrimary;
}

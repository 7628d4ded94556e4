import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from '../db/pool.js';

/**
 * Idempotency keys: a client names a request (`Idempotency-Key`), and a repeat of it within KEY_LIFETIME gets the
 * first answer and changes nothing. A key is claimed before the work, and answered in the transaction that records
 * the work (exports, imports, catalog batches, staged track rows), so there is no moment at which the work is done
 * and the key does not say so. Keys live in PostgreSQL: they survive a Redis loss.
 */

export const KEY_LIFETIME = '24 hours';
/** A claim not answered after this long belongs to a request that died before its work committed: it may be retaken. */
export const ABANDONED_AFTER_MS = 60_000;
export const MAX_KEY_LENGTH = 255;

type Db = Pick<Pool | PoolClient, 'query'>;

export interface Claim {
  workspaceId: string;
  key: string;
  requestHash: Buffer;
}

/** A request's claimed key, as the code doing its work sees it: answered with the work, in its transaction. */
export interface ClaimedKey {
  claim: Claim;
  answered: boolean;
  /** Records the answer on `db` (the work's transaction client). */
  answer(db: Db, status: number, body: unknown): Promise<void>;
}

export type ClaimResult =
  | { kind: 'claimed'; claim: Claim }
  | { kind: 'replay'; status: number; body: unknown }
  /** The key was used for another request. */
  | { kind: 'mismatch' }
  /** The first request with this key has not answered yet. */
  | { kind: 'in-progress' };

/** JSON with object keys sorted, so that the same body hashes the same whatever its key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** What makes two requests the same request: method, route, path parameters and body. */
export function requestHash(method: string, route: string, params: unknown, body: unknown): Buffer {
  return createHash('sha256')
    .update(`${method} ${route}\n${canonical(params)}\n${canonical(body)}`)
    .digest();
}

/** Why a key cannot be used, or null: 1-255 visible ASCII characters. */
export function keyProblem(key: string): string | null {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH)
    return `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`;
  if (!/^[\x21-\x7e]+$/.test(key)) return 'Idempotency-Key must be visible ASCII characters';
  return null;
}

/**
 * Claims a key for a request, or says why not: the first answer to replay, another request's key, or a first request
 * still running. A key older than KEY_LIFETIME is forgotten, and a claim unanswered for ABANDONED_AFTER_MS retaken.
 */
export async function claimKey(pool: Pool, workspaceId: string, key: string, hash: Buffer): Promise<ClaimResult> {
  const claimed = await pool.query(
    `INSERT INTO idempotency_keys (workspace_id, key, request_hash) VALUES ($1, $2, $3)
     ON CONFLICT (workspace_id, key) DO UPDATE
       SET request_hash = excluded.request_hash, status_code = NULL, response = NULL, created_at = now(), completed_at = NULL
       WHERE idempotency_keys.created_at < now() - $4::interval
          OR (idempotency_keys.status_code IS NULL AND idempotency_keys.request_hash = excluded.request_hash
              AND idempotency_keys.created_at < now() - make_interval(secs => $5))
     RETURNING 1`,
    [workspaceId, key, hash, KEY_LIFETIME, ABANDONED_AFTER_MS / 1000],
  );
  if (claimed.rowCount) return { kind: 'claimed', claim: { workspaceId, key, requestHash: hash } };
  const { rows } = await pool.query<{ request_hash: Buffer; status_code: number | null; response: unknown }>(
    'SELECT request_hash, status_code, response FROM idempotency_keys WHERE workspace_id = $1 AND key = $2',
    [workspaceId, key],
  );
  const row = rows[0];
  // Gone between the two statements (forgotten): claim again.
  if (!row) return claimKey(pool, workspaceId, key, hash);
  if (!row.request_hash.equals(hash)) return { kind: 'mismatch' };
  if (row.status_code === null) return { kind: 'in-progress' };
  return { kind: 'replay', status: row.status_code, body: row.response };
}

/** Records the answer of a claimed key; called in the transaction that records the request's work. */
export async function answerKey(db: Db, claim: Claim, status: number, body: unknown): Promise<void> {
  await db.query(
    `UPDATE idempotency_keys SET status_code = $4, response = $5, completed_at = now()
      WHERE workspace_id = $1 AND key = $2 AND request_hash = $3 AND status_code IS NULL`,
    [claim.workspaceId, claim.key, claim.requestHash, status, JSON.stringify(body)],
  );
}

/**
 * Replaces the answer of a key answered by its work's transaction with the final one, for a request whose answer is
 * known only after its work (POST /users/track/sync: staged with the key answered, then applied, then read back).
 */
export async function replaceAnswer(db: Db, claim: Claim, status: number, body: unknown): Promise<void> {
  await db.query(
    `UPDATE idempotency_keys SET status_code = $4, response = $5
      WHERE workspace_id = $1 AND key = $2 AND request_hash = $3`,
    [claim.workspaceId, claim.key, claim.requestHash, status, JSON.stringify(body)],
  );
}

/** Lets go of a claim whose request did nothing (refused, or failed before its work committed). */
export async function releaseKey(pool: Pool, claim: Claim): Promise<void> {
  await pool.query(
    'DELETE FROM idempotency_keys WHERE workspace_id = $1 AND key = $2 AND request_hash = $3 AND status_code IS NULL',
    [claim.workspaceId, claim.key, claim.requestHash],
  );
}

/** Forgets keys past their lifetime (the reconciler does, once a pass). */
export async function forgetExpiredKeys(pool: Pool): Promise<number> {
  const { rowCount } = await pool.query('DELETE FROM idempotency_keys WHERE created_at < now() - $1::interval', [
    KEY_LIFETIME,
  ]);
  return rowCount ?? 0;
}

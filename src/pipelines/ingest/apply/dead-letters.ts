import type { Pool, PoolClient } from '../../../platform/db/pool.js';
import type { TrackObjects } from '../../../profiles/tracked-types.js';
import { NAMES_FROM_JSON, stagedNames } from '../../../profiles/commands/staged-users.js';
import { capped, type DataError } from '../../../profiles/write/data-errors.js';

/**
 * Dead letters: objects PostgreSQL refuses at apply time (a NUL in an identifier, a lone surrogate in an event name, a
 * number out of range...), and staged rows that are not a payload at all. Such a row fails its batch on every attempt,
 * and batches are retried until they commit, so one of them used to stall every other row of its partition. The apply
 * isolates them instead (`applyIsolating`, src/profiles/write/apply-isolating.ts) and moves them to ingest_dead_letters
 * in the batch's own transaction; the rest of the batch commits. Nothing there is retried automatically: an operator
 * reads them, fixes them, and stages them again (`restageDeadLetters`, docs/ingestion.md "Dead letters").
 */

/** Why a parsed staged payload is not one the apply can read (the apply would throw on it), or null. */
export function payloadProblem(value: unknown): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'the payload is not a JSON object';
  const o = value as Record<string, unknown>;
  for (const kind of ['events', 'purchases', 'attributes'] as const) {
    const list = o[kind];
    if (!Array.isArray(list)) return `'${kind}' is not an array`;
    for (const [i, item] of (list as unknown[]).entries()) {
      const identity = (
        item as { identity?: { type?: unknown; value?: unknown; label?: unknown; name?: unknown } } | null
      )?.identity;
      const named =
        identity?.type === 'user_alias'
          ? typeof identity.label === 'string' && typeof identity.name === 'string'
          : ['external_id', 'service_id', 'email'].includes(identity?.type as string) &&
            typeof identity?.value === 'string';
      if (!named) return `${kind}[${i}] names no user`;
      if (kind === 'attributes') {
        const a = item as { standard?: unknown; custom?: unknown; at?: unknown };
        if (
          typeof a.at !== 'string' ||
          typeof a.standard !== 'object' ||
          a.standard === null ||
          typeof a.custom !== 'object' ||
          a.custom === null
        ) {
          return `attributes[${i}] lacks at, standard or custom`;
        }
      }
    }
  }
  return null;
}

/** Parses a staged payload; a row that is not one is refused with code 'payload'. */
export function parsePayload(payload: string): { objects: TrackObjects } | { error: DataError } {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch (err) {
    return { error: { code: 'payload', message: capped(`not JSON: ${(err as Error).message}`) } };
  }
  const problem = payloadProblem(value);
  return problem ? { error: { code: 'payload', message: problem } } : { objects: value as TrackObjects };
}

/** A refused staged row or import record, as ingest_dead_letters keeps it. */
export interface DeadLetter {
  source: 'track' | 'import';
  workspaceId: string;
  stagedId?: number;
  importId?: string;
  line?: number;
  part: number;
  /** When the request was accepted; null: now (an import's record). */
  acceptedAt: Date | null;
  objects: number;
  /** The staged form, {events, purchases, attributes}, as JSON text. */
  payload: string;
  error: DataError;
}

/**
 * Records dead letters in the caller's transaction (the one that takes their rows out of the apply), each with the
 * values it names a user by (`stagedNames`), which an erasure finds by index.
 */
export async function insertDeadLetters(client: PoolClient, letters: DeadLetter[]): Promise<void> {
  if (letters.length === 0) return;
  await client.query(
    `INSERT INTO ingest_dead_letters (source, workspace_id, staged_id, import_id, line, part, accepted_at, objects, payload, error_code, error_message, names)
     SELECT d.source, d.ws, d.staged, d.import, d.line, d.part, coalesce(d.at, now()), d.objects, d.payload, d.code, d.message, ${NAMES_FROM_JSON}
       FROM unnest($1::text[], $2::uuid[], $3::bigint[], $4::uuid[], $5::bigint[], $6::smallint[], $7::timestamptz[], $8::int[], $9::text[], $10::text[], $11::text[], $12::text[])
         AS d(source, ws, staged, import, line, part, at, objects, payload, code, message, names)`,
    [
      letters.map((l) => l.source),
      letters.map((l) => l.workspaceId),
      letters.map((l) => l.stagedId ?? null),
      letters.map((l) => l.importId ?? null),
      letters.map((l) => l.line ?? null),
      letters.map((l) => l.part),
      letters.map((l) => l.acceptedAt),
      letters.map((l) => l.objects),
      letters.map((l) => l.payload),
      letters.map((l) => l.error.code),
      letters.map((l) => l.error.message),
      letters.map((l) => JSON.stringify(stagedNames(l.payload))),
    ],
  );
}

/**
 * Stages dead letters again, typically once an operator has fixed their payload, and removes them, in one
 * statement; returns the new staged rows' ids. The next apply job (a request's, or the sweep within a few seconds)
 * applies them; a row still refused becomes a dead letter again.
 */
export async function restageDeadLetters(pool: Pool, ids: number[]): Promise<number[]> {
  const { rows } = await pool.query<{ id: number }>(
    `WITH moved AS (DELETE FROM ingest_dead_letters WHERE id = ANY($1::bigint[]) RETURNING id, workspace_id, part, accepted_at, objects, payload)
     INSERT INTO ingest_staging (workspace_id, part, accepted_at, objects, payload)
     SELECT workspace_id, part, accepted_at, objects, payload FROM moved ORDER BY id
     RETURNING id`,
    [ids],
  );
  return rows.map((r) => r.id).sort((a, b) => a - b);
}

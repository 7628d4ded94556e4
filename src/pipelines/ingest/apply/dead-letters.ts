import type { Pool, PoolClient } from '../../../platform/db/pool.js';
import type { TrackObjects } from '../types.js';
import { stagedNames } from './staged-users.js';

/**
 * Dead letters: objects PostgreSQL refuses at apply time (a NUL in an identifier, a lone surrogate in an event name,
 * a number out of range...), and staged rows that are not a payload at all. Such a row fails its batch on every
 * attempt, and batches are retried until they commit, so one of them used to stall every other row of its
 * partition. The apply isolates them instead (`applyIsolating`, ./apply-isolating.ts) and moves them to ingest_dead_letters in the
 * batch's own transaction; the rest of the batch commits. Nothing there is retried automatically: an operator
 * reads them, fixes them, and stages them again (`restageDeadLetters`, docs/ingestion.md "Dead letters").
 */

/** Why an object was refused: the SQLSTATE (or 'payload') and PostgreSQL's message, which may quote the data. */
export interface DataError {
  code: string;
  message: string;
}

const MAX_MESSAGE = 1000;
const capped = (message: string) => (message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}...` : message);

/**
 * The refusal, when an error is about the data a statement carried (so that the same rows fail again on every
 * attempt): class 22, data exception (22P05 untranslatable character, 22021 invalid byte sequence, 22P02 invalid
 * text representation, 22003 numeric value out of range, 22007 and 22008 dates...), class 23, integrity constraint
 * violation, and 54000/54001, a value too large or nested too deep. Null for everything else: a lost connection,
 * a deadlock or serialization failure (class 40), a lock or statement timeout, a full disk, a bug in our code. Those
 * roll the batch back whole, to be applied again later.
 */
export function dataErrorOf(err: unknown): DataError | null {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^(?:2[23][0-9A-Z]{3}|5400[01])$/.test(code)) return null;
  return { code, message: capped(String((err as Error).message)) };
}

const REASONS: Record<string, string> = {
  payload: 'not a staged payload (not JSON, or not {events, purchases, attributes})',
  '22P05': 'untranslatable character',
  '22021': 'invalid byte sequence',
  '22P02': 'invalid text representation',
  '22003': 'numeric value out of range',
  '22007': 'invalid datetime format',
  '22008': 'datetime field overflow',
  '54000': 'program limit exceeded',
  '54001': 'statement too complex',
};

/**
 * A reason fit for a log line: PostgreSQL's messages (and JSON.parse's) may quote the data, which is personal, so
 * logs carry the code's name and the table keeps the message.
 */
export function reasonOf(code: string): string {
  return REASONS[code] ?? (code.startsWith('23') ? 'integrity constraint violation' : 'data exception');
}

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

/** The `names` of letters: hashes, by PostgreSQL (migration 0290), of each letter's JSON array `d.names`. */
export const NAMES_FROM_JSON = `(SELECT coalesce(array_agg(DISTINCT identifier_hash(n)), '{}') FROM jsonb_array_elements_text(d.names::jsonb) AS n)`;

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

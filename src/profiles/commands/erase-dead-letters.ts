import type { PoolClient } from '../../platform/db/pool.js';
import { NAMES_FROM_JSON } from './staged-users.js';
import { commandUsers, OBJECT_KINDS, objectUsers, parseStaged, stagedNames, type NamedUser } from './staged-users.js';
import type { ErasedIdentifier } from './erased-identifiers.js';

/**
 * An erased user's objects in dead letters (ingest_dead_letters): refused objects and user-data commands of many users,
 * kept for an operator to fix and stage again (src/pipelines/ingest/apply/dead-letters.ts). Each payload is parsed and
 * the users it names compared with the erased user's identifiers exactly (never as text: erasing `42` must not touch a
 * letter of `1042`): their objects, or their commands, are taken out, a letter left empty goes, and a PostgreSQL
 * message that quotes one of their values is replaced. A payload that is not JSON goes whole when it holds one of their
 * values as a JSON string.
 */

const REMOVED_MESSAGE = 'message removed: it quoted data of a user erased since (docs/privacy.md)';

/** Whether a named user is one of the erased identifiers, for a letter accepted at `acceptedMs`. */
function isErased(user: NamedUser, ids: ErasedIdentifier[], acceptedMs: number): boolean {
  const value = user.type === 'email' ? user.value?.toLowerCase() : user.value;
  return ids.some(
    (i) =>
      acceptedMs <= i.untilMs &&
      i.kind === user.type &&
      (i.kind === 'user_alias' ? i.label === user.label && i.value === user.name : i.value === value),
  );
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Whether a message quotes one of the values as a whole token (not inside a longer one: `1042` does not quote `42`). */
function quotesAny(text: string, values: string[]): boolean {
  const lower = text.toLowerCase();
  // A regular expression only for the values the text holds at all: an erasure checks hundreds of values a letter.
  return values.some(
    (v) =>
      lower.includes(v.toLowerCase()) &&
      new RegExp(`(?<![\\p{L}\\p{N}])${escapeRegExp(v)}(?![\\p{L}\\p{N}])`, 'iu').test(text),
  );
}

interface Letter {
  id: number;
  payload: string;
  error_message: string;
  accepted_ms: string;
  /** No `names` recorded (written before migration 0290, or edited since): found by reading, named now. */
  unnamed: boolean;
}

/** What becomes of one letter: unchanged, deleted, or rewritten without the erased user's part. */
type Outcome = 'keep' | 'delete' | { payload: string; objects: number; message: string };

function scrubLetter(row: Letter, ids: ErasedIdentifier[]): Outcome {
  const acceptedMs = Number(row.accepted_ms);
  const theirs = ids.filter((i) => acceptedMs <= i.untilMs);
  const parsed = parseStaged(row.payload);
  if (parsed.kind === 'unreadable')
    return theirs.some((i) => row.payload.includes(JSON.stringify(i.value))) ? 'delete' : 'keep';
  let left = 0;
  let removed = 0;
  const keep = <T>(list: T[], users: (item: T) => NamedUser[]): T[] => {
    const kept = list.filter((item) => !users(item).some((u) => isErased(u, theirs, acceptedMs)));
    left += kept.length;
    removed += list.length - kept.length;
    return kept;
  };
  let next: Record<string, unknown>;
  if (parsed.kind === 'commands') next = { ...parsed.value, commands: keep(parsed.value.commands, commandUsers) };
  else {
    next = { ...parsed.value };
    for (const kind of OBJECT_KINDS) if (Array.isArray(next[kind])) next[kind] = keep(next[kind], objectUsers);
  }
  if (removed === 0) return 'keep';
  if (left === 0) return 'delete';
  const quoted = quotesAny(
    row.error_message,
    theirs.map((i) => i.value),
  );
  return { payload: JSON.stringify(next), objects: left, message: quoted ? REMOVED_MESSAGE : row.error_message };
}

/**
 * Applies the outcomes set-based: one DELETE, and one UPDATE of the letters rewritten and of those kept as they were
 * but found unnamed (their names recorded, so the next erasure finds them by index).
 */
async function applyOutcomes(client: PoolClient, rows: Letter[], outcomes: Outcome[]): Promise<void> {
  const deleted = rows.filter((_, i) => outcomes[i] === 'delete').map((r) => r.id);
  const updated = rows.flatMap(
    (r, i): Array<{ id: number; payload: string; objects: number | null; message: string; names: string[] }> => {
      const o = outcomes[i]!;
      if (typeof o === 'object') return [{ id: r.id, ...o, names: stagedNames(o.payload) }];
      if (o === 'keep' && r.unnamed)
        return [
          { id: r.id, payload: r.payload, objects: null, message: r.error_message, names: stagedNames(r.payload) },
        ];
      return [];
    },
  );
  if (deleted.length > 0) await client.query(`DELETE FROM ingest_dead_letters WHERE id = ANY($1::bigint[])`, [deleted]);
  if (updated.length > 0)
    await client.query(
      `UPDATE ingest_dead_letters t
          SET payload = d.payload, objects = coalesce(d.objects, t.objects), error_message = d.message, names = ${NAMES_FROM_JSON}
         FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::text[]) AS d(id, payload, objects, message, names)
        WHERE t.id = d.id`,
      [
        updated.map((u) => u.id),
        updated.map((u) => u.payload),
        updated.map((u) => u.objects),
        updated.map((u) => u.message),
        updated.map((u) => JSON.stringify(u.names)),
      ],
    );
}

const LETTER_COLUMNS = `id, payload, error_message, extract(epoch FROM accepted_at) * 1000 AS accepted_ms, names IS NULL AS unnamed`;

/**
 * Takes the erased user's part out of the workspace's dead letters: the letters whose recorded names hold one of the
 * user's values (a GIN index lookup by hash), and those with no names recorded yet, each then parsed and compared.
 */
export async function scrubDeadLetters(
  client: PoolClient,
  workspaceId: string,
  ids: ErasedIdentifier[],
): Promise<void> {
  const values = [...new Set(ids.map((i) => i.value))];
  if (values.length === 0) return;
  const named = await client.query<Letter>(
    `SELECT ${LETTER_COLUMNS} FROM ingest_dead_letters
      WHERE workspace_id = $1 AND names && (SELECT array_agg(identifier_hash(v)) FROM unnest($2::text[]) AS v)
      FOR UPDATE`,
    [workspaceId, values],
  );
  const unnamed = await client.query<Letter>(
    `SELECT ${LETTER_COLUMNS} FROM ingest_dead_letters WHERE workspace_id = $1 AND names IS NULL FOR UPDATE`,
    [workspaceId],
  );
  const rows = [...named.rows, ...unnamed.rows];
  await applyOutcomes(
    client,
    rows,
    rows.map((r) => scrubLetter(r, ids)),
  );
}

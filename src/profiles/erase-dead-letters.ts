import type { PoolClient } from '../db/pool.js';
import type { ErasedIdentifier } from './erased-identifiers.js';

/**
 * An erased user's objects in dead letters (ingest_dead_letters): refused objects of many users, kept for an operator
 * to fix and stage again (src/ingest/apply/dead-letters.ts).
 */

interface StagedIdentity {
  type?: string;
  value?: string;
  label?: string;
  name?: string;
}

/** Whether a staged object's identity is one of the erased user's, for a letter accepted at `acceptedMs`. */
function namesErased(identity: StagedIdentity | undefined, ids: ErasedIdentifier[], acceptedMs: number): boolean {
  if (!identity) return false;
  const value = identity.type === 'email' ? (identity.value ?? '').toLowerCase() : identity.value;
  return ids.some(
    (i) =>
      acceptedMs <= i.untilMs &&
      i.kind === identity.type &&
      (i.kind === 'user_alias' ? i.label === identity.label && i.value === identity.name : i.value === value),
  );
}

/**
 * Dead letters hold refused objects of many users: the erased user's objects are taken out of each payload (a row
 * left empty goes), and a PostgreSQL message that may quote one of their values is replaced. A command row (a
 * user-data command that failed) naming one of their values goes whole: its commands are about them.
 */
export async function scrubDeadLetters(
  client: PoolClient,
  workspaceId: string,
  ids: ErasedIdentifier[],
): Promise<void> {
  const values = [...new Set(ids.map((i) => i.value))];
  if (values.length === 0) return;
  // Only rows whose text holds one of the values, as JSON writes it, can hold their objects.
  const patterns = values.map(
    (v) =>
      `%${JSON.stringify(v)
        .slice(1, -1)
        .replace(/[\\%_]/g, (c) => `\\${c}`)}%`,
  );
  const { rows } = await client.query<{ id: number; payload: string; error_message: string; accepted_ms: string }>(
    `SELECT id, payload, error_message, extract(epoch FROM accepted_at) * 1000 AS accepted_ms FROM ingest_dead_letters
      WHERE workspace_id = $1 AND (payload ILIKE ANY($2::text[]) OR error_message ILIKE ANY($2::text[]))
      FOR UPDATE`,
    [workspaceId, patterns],
  );
  for (const row of rows) {
    const acceptedMs = Number(row.accepted_ms);
    const lowered = ids.filter((i) => acceptedMs <= i.untilMs).map((i) => i.value.toLowerCase());
    const quotes = (text: string) => lowered.some((v) => text.toLowerCase().includes(v));
    let payload: Record<string, unknown> | null = null;
    try {
      payload = JSON.parse(row.payload) as Record<string, unknown>;
    } catch {
      payload = null;
    }
    if (payload === null || Array.isArray(payload.commands)) {
      // Not a payload of objects (unreadable, or commands): it goes whole once it quotes one of their values.
      if (quotes(row.payload)) await client.query(`DELETE FROM ingest_dead_letters WHERE id = $1`, [row.id]);
      continue;
    }
    let left = 0;
    let removed = 0;
    for (const kind of ['events', 'purchases', 'attributes'] as const) {
      const list = Array.isArray(payload[kind]) ? (payload[kind] as Array<{ identity?: StagedIdentity }>) : [];
      payload[kind] = list.filter((o) => !namesErased(o.identity, ids, acceptedMs));
      left += (payload[kind] as unknown[]).length;
      removed += list.length - (payload[kind] as unknown[]).length;
    }
    if (left === 0) {
      await client.query(`DELETE FROM ingest_dead_letters WHERE id = $1`, [row.id]);
      continue;
    }
    const message = quotes(row.error_message)
      ? 'message removed: it quoted data of a user erased since (docs/privacy.md)'
      : row.error_message;
    if (removed === 0 && message === row.error_message) continue;
    await client.query(`UPDATE ingest_dead_letters SET payload = $2, objects = $3, error_message = $4 WHERE id = $1`, [
      row.id,
      JSON.stringify(payload),
      left,
      message,
    ]);
  }
}

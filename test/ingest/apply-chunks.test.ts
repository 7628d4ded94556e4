import { describe, expect, it } from 'vitest';
import { withTransaction } from '../../src/platform/db/pool.js';
import { applyIsolating } from '../../src/profiles/write/apply-isolating.js';
import type { DataError } from '../../src/profiles/write/data-errors.js';
import type { TrackAttributes } from '../../src/profiles/tracked-types.js';
import { useTestEnv } from '../helpers/context.js';

/*
 * A batch's UPDATE goes to PostgreSQL in chunks of 1,000 profiles, each sent while the next is built
 * (src/profiles/tracked-objects.ts). Across chunks, a batch must still apply as one: every profile once, logged once,
 * and a row PostgreSQL refuses in a later chunk set aside alone, the rest applied.
 */

const env = useTestEnv({ workspaces: ['ws'] });
const PROFILES = 2_600;

const attributes = (n: number, at: string, custom: Record<string, unknown>): TrackAttributes => ({
  identity: { type: 'external_id', value: `chunked-${n}` },
  create: true,
  at,
  standard: { first_name: `First ${n}` },
  custom,
});

async function apply(objects: TrackAttributes[]) {
  const refused: { item: TrackAttributes; error: DataError }[] = [];
  const result = await withTransaction(env.ctx.pool, (client) =>
    applyIsolating(
      client,
      objects,
      (list) => [{ workspaceId: env.ws.workspaceId, objects: { events: [], purchases: [], attributes: list } }],
      refused,
    ),
  );
  return { result, refused };
}

describe('a batch applied in chunks', () => {
  it('writes and logs every profile once across chunks, and sets aside alone a row refused in the third chunk', async () => {
    const numbers = Array.from({ length: PROFILES }, (_, n) => n);
    const created = await apply(numbers.map((n) => attributes(n, '2026-01-01T00:00:00.000Z', { tier: 'bronze' })));
    expect(created.result.profilesCreated).toBe(PROFILES);
    expect(created.refused).toEqual([]);

    // Profiles are updated in id order, created here in external_id order: the 2,300th is in the third chunk.
    const bad = 2_300;
    const before = await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM profile_changes');
    const update = await apply(
      numbers.map((n) =>
        attributes(n, '2026-01-02T00:00:00.000Z', { tier: n === bad ? 'gold\u0000' : 'gold', rank: n }),
      ),
    );
    // A NUL in a custom attribute: the batch's jsonb refuses it (validation would have; the apply must cope alone).
    expect(update.refused.map((r) => [r.item.identity, r.error.code])).toEqual([
      [{ type: 'external_id', value: `chunked-${bad}` }, '22P05'],
    ]);
    expect(update.result.attributes).toBe(PROFILES - 1);

    const { rows } = await env.ctx.pool.query<{ external_id: string; first_name: string; custom_attributes: object }>(
      'SELECT external_id, first_name, custom_attributes FROM profiles WHERE workspace_id = $1',
      [env.ws.workspaceId],
    );
    expect(rows).toHaveLength(PROFILES);
    const byId = new Map(rows.map((r) => [r.external_id, r]));
    for (const n of numbers) {
      const r = byId.get(`chunked-${n}`)!;
      expect(r.custom_attributes, String(n)).toEqual(n === bad ? { tier: 'bronze' } : { tier: 'gold', rank: n });
    }
    // The applied profiles were logged once each by the transaction that wrote them: no chunk ran unquieted.
    const after = await env.ctx.pool.query<{ n: number; distinct: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT profile_id)::int AS distinct FROM profile_changes`,
    );
    expect(after.rows[0]!.n - before.rows[0]!.n).toBe(PROFILES - 1);
    expect(after.rows[0]!.distinct).toBe(PROFILES);
  });
});

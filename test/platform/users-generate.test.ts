import { beforeAll, describe, expect, it } from 'vitest';
import { generateUsers } from '../../src/features/synthetic-users/generate.js';
import { AWKWARD_NOTES } from '../../src/features/synthetic-users/synthetic-data.js';
import { STANDARD_ATTRIBUTES } from '../../src/profiles/segments/filter.js';
import { EXPORT_FIELDS } from '../../src/pipelines/exports/request/request-body.js';
import { useTestEnv } from '../helpers/context.js';
import { entries, type AggregateEntry } from '../helpers/aggregates.js';

const NOW = new Date('2026-06-15T00:00:00Z');
const DAY = 86_400_000;
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const COUNT = 1500;

const env = useTestEnv({ workspaces: ['wsA', 'wsB', 'wsC'] });

type Row = Record<string, unknown> & {
  id: number;
  service_id: string;
  random_bucket: number;
  created_at: Date;
  custom_events: { name: string; first: string; last: string; count: number }[];
  purchases: { name: string; first: string; last: string; count: number }[];
  user_aliases: { alias_name: string; alias_label: string }[];
  custom_attributes: Record<string, unknown>;
};

/** The workspace's profiles, their event and purchase aggregates (stored keyed by name) as entries sorted by name. */
const rows = async (workspaceId: string): Promise<Row[]> =>
  (
    await env.ctx.pool.query(`SELECT * FROM profiles WHERE workspace_id = $1 ORDER BY service_id`, [workspaceId])
  ).rows.map(
    (r: Record<string, unknown>) =>
      ({
        ...r,
        custom_events: entries(r.custom_events as Record<string, AggregateEntry>),
        purchases: entries(r.purchases as Record<string, AggregateEntry>),
      }) as Row,
  );

beforeAll(async () => {
  const progress: number[] = [];
  await generateUsers(env.ctx.pool, {
    workspaceId: env.wsA.workspaceId,
    count: COUNT,
    seed: 7,
    now: NOW,
    batchSize: 400,
    onProgress: (d) => progress.push(d),
  });
  expect(progress.sort((a, b) => a - b).at(-1)).toBe(COUNT);
  expect(progress).toHaveLength(4);
});

describe('generateUsers', () => {
  it('populates every field of the export record somewhere in the set', async () => {
    const all = await rows(env.wsA.workspaceId);
    expect(all).toHaveLength(COUNT);
    const empty = (v: unknown) =>
      v === null ||
      v === undefined ||
      (Array.isArray(v) && v.length === 0) ||
      (typeof v === 'object' && !(v instanceof Date) && Object.keys(v as object).length === 0);
    // subscription_groups is no profile column: states live in subscription_group_states, per group a workspace
    // declares, and the generator writes profiles only (the demo's users have no group state until one is set).
    const columns = new Set<string>([
      ...EXPORT_FIELDS.filter((f) => f !== 'subscription_groups'),
      ...Object.keys(STANDARD_ATTRIBUTES),
      'campaigns_received',
      'canvases_received',
      'cards_clicked',
    ]);
    for (const column of columns) {
      const filled = all.filter((r) => !empty(r[column])).length;
      expect(filled, column).toBeGreaterThan(0);
    }
    // Nested fields the record defines, each present somewhere.
    const devices = all.flatMap((r) => r.devices as Record<string, unknown>[]);
    for (const f of [
      'model',
      'os',
      'carrier',
      'idfv',
      'idfa',
      'device_id',
      'store_ad_id',
      'tv_ad_id',
      'ad_tracking_enabled',
    ]) {
      expect(
        devices.some((d) => d[f] !== null && d[f] !== undefined),
        `devices.${f}`,
      ).toBe(true);
    }
    const tokens = all.flatMap((r) => r.push_tokens as Record<string, unknown>[]);
    expect(Object.keys(tokens[0]!).sort()).toEqual(['app', 'device_id', 'notifications_enabled', 'platform', 'token']);
    const apps = all.flatMap((r) => r.apps as Record<string, unknown>[]);
    expect(Object.keys(apps[0]!).sort()).toEqual([
      'first_used',
      'last_used',
      'name',
      'platform',
      'sessions',
      'version',
    ]);
    const campaigns = all.flatMap((r) => r.campaigns_received as Record<string, unknown>[]);
    for (const f of [
      'name',
      'api_campaign_id',
      'last_received',
      'engaged',
      'converted',
      'multiple_converted',
      'variation_name',
      'variation_api_id',
      'in_control',
    ]) {
      expect(
        campaigns.some((c) => c[f] !== undefined),
        `campaigns_received.${f}`,
      ).toBe(true);
    }
    const canvases = all.flatMap((r) => r.canvases_received as Record<string, unknown>[]);
    for (const f of [
      'name',
      'api_canvas_id',
      'last_received_message',
      'last_entered',
      'variation_name',
      'in_control',
      'last_entered_control_at',
      'last_exited',
    ]) {
      expect(
        canvases.some((c) => c[f] !== null && c[f] !== undefined),
        `canvases_received.${f}`,
      ).toBe(true);
    }
    const steps = canvases.flatMap((c) => c.steps_received as Record<string, unknown>[]);
    expect(Object.keys(steps[0]!).sort()).toEqual(['api_canvas_step_id', 'last_received', 'name']);
    expect(new Set(all.map((r) => r.gender))).toEqual(new Set(['M', 'F', 'O', 'N', 'P', null]));
    // Custom attributes of several types.
    const types = new Set(
      all.flatMap((r) =>
        Object.values(r.custom_attributes).map((v) => (Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v)),
      ),
    );
    for (const t of ['string', 'number', 'boolean', 'array', 'object', 'null']) expect(types, t).toContain(t);
  });

  it('writes well-formed values: E.164 phones, ISO-2 countries, [lon, lat], histories spread over two years', async () => {
    const all = await rows(env.wsA.workspaceId);
    for (const r of all) {
      if (r.phone !== null) expect(r.phone).toMatch(/^\+[1-9]\d{7,14}$/);
      expect(r.country).toMatch(/^[A-Z]{2}$/);
      expect(r.language).toMatch(/^[a-z]{2}$/);
      const [lon, lat] = r.last_coordinates as number[];
      expect(Math.abs(lon!)).toBeLessThanOrEqual(180);
      expect(Math.abs(lat!)).toBeLessThanOrEqual(90);
      expect(r.created_at.getTime()).toBeGreaterThanOrEqual(NOW.getTime() - 731 * DAY);
      expect(r.created_at.getTime()).toBeLessThan(NOW.getTime());
      for (const e of [...r.custom_events, ...r.purchases]) {
        expect(Object.keys(e).sort()).toEqual(['count', 'first', 'last', 'name']);
        expect(e.first).toMatch(ISO_MS);
        expect(e.last).toMatch(ISO_MS);
        expect(e.first <= e.last).toBe(true);
        expect(new Date(e.first).getTime()).toBeGreaterThanOrEqual(r.created_at.getTime());
        expect(new Date(e.last).getTime()).toBeLessThanOrEqual(NOW.getTime());
        expect(e.count).toBeGreaterThanOrEqual(1);
      }
    }
    const since = new Date(NOW.getTime() - 90 * DAY).toISOString();
    const lastOf = (r: Row) => r.custom_events.reduce((m, e) => (e.last > m ? e.last : m), '');
    const recent = all.filter((r) => lastOf(r) >= since).length;
    const onlyOlder = all.filter((r) => r.custom_events.length > 0 && lastOf(r) < since).length;
    expect(recent).toBeGreaterThan(COUNT * 0.3);
    expect(onlyOlder).toBeGreaterThan(COUNT * 0.1);
    expect(all.some((r) => r.purchases.some((p) => p.last >= since))).toBe(true);
    expect(all.some((r) => r.purchases.length > 0 && r.purchases.every((p) => p.last < since))).toBe(true);
    expect(all.filter((r) => r.uninstalled_at !== null).length).toBeGreaterThan(0);
  });

  it('gives distinct service_ids and uniform random buckets over 0..9999', async () => {
    const all = await rows(env.wsA.workspaceId);
    expect(new Set(all.map((r) => r.service_id)).size).toBe(COUNT);
    for (const r of all) expect(r.service_id).toMatch(/^[0-9a-f]{24}$/);
    const buckets = all.map((r) => r.random_bucket);
    expect(Math.min(...buckets)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...buckets)).toBeLessThanOrEqual(9999);
    const deciles = Array.from({ length: 10 }, (_, d) => buckets.filter((b) => Math.floor(b / 1000) === d).length);
    for (const n of deciles) expect(n).toBeGreaterThan(COUNT / 10 / 1.5);
  });

  it('keeps the alias lookup table in step with user_aliases', async () => {
    const { rows: diff } = await env.ctx.pool.query(
      `(SELECT p.id, a->>'alias_label' AS label, a->>'alias_name' AS name FROM profiles p, jsonb_array_elements(p.user_aliases) a WHERE p.workspace_id = $1
        EXCEPT SELECT profile_id, alias_label, alias_name FROM profile_aliases WHERE workspace_id = $1)
       UNION ALL
       (SELECT profile_id, alias_label, alias_name FROM profile_aliases WHERE workspace_id = $1
        EXCEPT SELECT p.id, a->>'alias_label', a->>'alias_name' FROM profiles p, jsonb_array_elements(p.user_aliases) a WHERE p.workspace_id = $1)`,
      [env.wsA.workspaceId],
    );
    expect(diff).toEqual([]);
    const { rows: count } = await env.ctx.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM profile_aliases WHERE workspace_id = $1`,
      [env.wsA.workspaceId],
    );
    expect(count[0]!.n).toBeGreaterThan(COUNT * 0.7);
  });

  it('round-trips text that COPY must escape: quotes, backslashes, tabs, newlines, emoji', async () => {
    const notes = (await rows(env.wsA.workspaceId))
      .map((r) => r.custom_attributes.note)
      .filter((n): n is string => typeof n === 'string');
    expect(notes.length).toBeGreaterThan(5);
    for (const n of notes) expect(AWKWARD_NOTES).toContain(n);
    expect(new Set(notes).size).toBeGreaterThan(2);
    const names = (await rows(env.wsA.workspaceId))
      .map((r) => `${r.first_name} ${r.last_name} ${r.home_city}`)
      .join(' ');
    expect(names).toMatch(/[äöüéèãíóúñçëÜ]/);
  });

  it('is deterministic for a seed, also when loaded in parts, and different for another seed', async () => {
    await generateUsers(env.ctx.pool, { workspaceId: env.wsB.workspaceId, count: 600, seed: 7, now: NOW, lanes: 1 });
    await generateUsers(env.ctx.pool, {
      workspaceId: env.wsB.workspaceId,
      count: 900,
      seed: 7,
      now: NOW,
      startId: 600,
      batchSize: 250,
    });
    const strip = (r: Row) => {
      // The writing transaction's id (changed_xid, for incremental exports) differs between any two loads.
      const { id: _id, workspace_id: _ws, changed_xid: _xid, ...rest } = r as Row & { changed_xid?: string };
      return JSON.stringify(rest);
    };
    const a = (await rows(env.wsA.workspaceId)).map(strip);
    const b = (await rows(env.wsB.workspaceId)).map(strip);
    expect(b).toEqual(a);
    await generateUsers(env.ctx.pool, { workspaceId: env.wsC.workspaceId, count: 50, seed: 8, now: NOW });
    const c = (await rows(env.wsC.workspaceId)).map(strip);
    expect(c.filter((x) => a.includes(x))).toEqual([]);
  });

  it('loads all or nothing: a clash with existing users rolls every lane back', async () => {
    const before = (await rows(env.wsA.workspaceId)).length;
    const err = await generateUsers(env.ctx.pool, {
      workspaceId: env.wsA.workspaceId,
      count: 1000,
      seed: 7,
      now: NOW,
      startId: 1000,
      batchSize: 200,
    }).catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe('23505');
    expect((await rows(env.wsA.workspaceId)).length).toBe(before);
    await expect(
      generateUsers(env.ctx.pool, { workspaceId: '00000000-0000-0000-0000-000000000000', count: 1, seed: 1 }),
    ).rejects.toThrow(/does not exist/);
  });

  it('analyzes the table after a load', async () => {
    const { rows: stats } = await env.ctx.pool.query<{ last_analyze: Date | null }>(
      `SELECT last_analyze FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'profiles'`,
      [env.config.DATABASE_SCHEMA],
    );
    expect(stats[0]!.last_analyze).not.toBeNull();
  });
});

describe('ces users generate --top-up', () => {
  it('tops up after users were deleted: the next index follows the highest present, not the count', async () => {
    const { runGenerate } = await import('../../src/cli/users-generate.js');
    const { rows: named } = await env.ctx.pool.query<{ name: string }>(`SELECT name FROM workspaces WHERE id = $1`, [
      env.wsC.workspaceId,
    ]);
    const workspace = named[0]!.name;
    const seed = 11;
    const topUp = (count: number) =>
      runGenerate(() => env.config, { count, workspace, seed, topUp: true, now: NOW.toISOString() });
    const ofSeed = async () =>
      (
        await env.ctx.pool.query<{ service_id: string }>(
          `SELECT service_id FROM profiles WHERE workspace_id = $1 ORDER BY service_id`,
          [env.wsC.workspaceId],
        )
      ).rows
        .map((r) => r.service_id)
        .filter((s) => s.startsWith(prefix));
    const { seedServiceIdPrefix } = await import('../../src/features/synthetic-users/world.js');
    const prefix = seedServiceIdPrefix(seed);
    const before = (
      await env.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1`, [
        env.wsC.workspaceId,
      ])
    ).rows[0]!.n;
    await topUp(before + 20);
    const first = await ofSeed();
    expect(first).toHaveLength(20);
    // Two users deleted (as the user-data DELETE does), one of them the highest index.
    await env.ctx.pool.query(`DELETE FROM profiles WHERE service_id = ANY($1::text[])`, [[first[3], first[19]]]);
    await topUp(before + 25);
    const after = await ofSeed();
    expect(after).toHaveLength(25);
    expect(new Set(after.map((s) => s.slice(8, 16))).size).toBe(25);
    // The new ones continue after the highest index present (18), so none reuses a deleted user's index.
    expect(
      after
        .map((s) => Number.parseInt(s.slice(8, 16), 16))
        .sort((a, b) => a - b)
        .slice(-7),
    ).toEqual([19, 20, 21, 22, 23, 24, 25]);
  });
});

import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { PERMISSIONS } from '../../src/platform/auth/permissions.js';
import { hashSecret } from '../../src/platform/auth/secrets.js';
import { applyWorkspaceFile, type ApplySummary } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile, WorkspaceFileError } from '../../src/features/workspace/parse.js';
import type { SegmentListResponse } from '../../src/routes/segments.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

const run = promisify(execFile);
const DEMO_FILE = path.resolve('workspace/demo.yaml');
const DEMO_KEY = 'ces_key_demo_0000000000000000000000000000';
const NOW = new Date('2026-06-15T12:00:00Z');

const env = useTestEnv();
let demoText: string;
let first: ApplySummary;

beforeAll(async () => {
  demoText = await readFile(DEMO_FILE, 'utf8');
  first = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(demoText), { now: NOW });
});

const q = async <T = Record<string, unknown>>(sql: string, params: unknown[] = []) =>
  (await env.ctx.pool.query(sql, params)).rows as T[];

/** Every row of every table in the test schema, with xmin: any write, even of equal values, changes xmin. */
async function dumpAll(): Promise<Record<string, string[]>> {
  const tables = await q<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = $1 ORDER BY 1`, [
    env.config.DATABASE_SCHEMA,
  ]);
  const out: Record<string, string[]> = {};
  for (const { t } of tables) {
    const rows = await q<{ r: string }>(`SELECT xmin::text || ' ' || to_jsonb(x)::text AS r FROM "${t}" x ORDER BY 1`);
    out[t] = rows.map((r) => r.r);
  }
  return out;
}

function expectFileError(fn: () => unknown, ...expected: RegExp[]) {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(WorkspaceFileError);
  const lines = (err as WorkspaceFileError).issues.map((i) => `${i.path}: ${i.message}`);
  for (const re of expected)
    expect(
      lines.some((l) => re.test(l)),
      `${re} in\n${lines.join('\n')}`,
    ).toBe(true);
  return err as WorkspaceFileError;
}

describe('applying workspace/demo.yaml', () => {
  it('creates the company, workspace and everything declared', async () => {
    const [company] = await q<{ id: string; settings: unknown }>(
      `SELECT id, settings FROM companies WHERE name = 'Demo Company'`,
    );
    expect(company!.settings).toEqual({
      scim: { departments: ['growth', 'customer_success'], permissions: ['view_demo_dashboards'] },
    });
    const [ws] = await q<{ id: string; settings: unknown; export_destination: unknown }>(
      `SELECT id, settings, export_destination FROM workspaces WHERE company_id = $1 AND name = 'Demo Workspace'`,
      [company!.id],
    );
    expect(ws).toMatchObject({ settings: { should_inline_css: true }, export_destination: null });
    expect(first.workspaceIds['Demo Workspace']).toBe(ws!.id);

    expect(await q(`SELECT name, api_id, platform FROM apps WHERE workspace_id = $1 ORDER BY name`, [ws!.id])).toEqual([
      { name: 'Demo Android', api_id: 'demo-android-app', platform: 'android' },
      { name: 'Demo iOS', api_id: 'demo-ios-app', platform: 'ios' },
    ]);
    expect(
      (await q<{ name: string }>(`SELECT name FROM teams WHERE workspace_id = $1 ORDER BY name`, [ws!.id])).map(
        (r) => r.name,
      ),
    ).toEqual(['Growth', 'Lifecycle']);

    const keys = await q<{ name: string; key_hash: Buffer; permissions: string[] }>(
      `SELECT name, key_hash, permissions FROM api_keys WHERE workspace_id = $1 ORDER BY name`,
      [ws!.id],
    );
    expect(keys.map((k) => k.name)).toEqual(['demo', 'demo-read-only']);
    // The demo key must carry every permission there is, including ones added after this file was written.
    expect([...keys[0]!.permissions].sort()).toEqual([...PERMISSIONS].sort());
    expect(keys[0]!.key_hash.equals(hashSecret(DEMO_KEY))).toBe(true);
    const generated = first.generatedSecrets.find((g) => g.name === 'demo-read-only')!;
    expect(generated).toMatchObject({ kind: 'api_key', workspace: 'Demo Workspace' });
    expect(keys[1]!.key_hash.equals(hashSecret(generated.secret))).toBe(true);
    expect(first.generatedSecrets).toHaveLength(1);

    const [token] = await q<{ name: string; token_hash: Buffer }>(
      `SELECT name, token_hash FROM scim_tokens WHERE company_id = $1`,
      [company!.id],
    );
    expect(token!.token_hash.equals(hashSecret('ces_scim_demo_000000000000000000000000000'))).toBe(true);
    expect(
      await q(`SELECT name, permissions FROM permission_sets WHERE company_id = $1 ORDER BY name`, [company!.id]),
    ).toEqual([
      { name: 'Analysts', permissions: ['basic_access', 'view_user_profile', 'export_user_data'] },
      { name: 'Campaign editors', permissions: ['basic_access', 'send_campaigns_canvases', 'edit_segments'] },
    ]);

    const segments = await q<{ api_id: string; name: string; archived: boolean; filter: unknown }>(
      `SELECT api_id, name, archived, filter FROM segments WHERE workspace_id = $1 ORDER BY api_id`,
      [ws!.id],
    );
    expect(segments).toHaveLength(7);
    expect(segments.filter((s) => s.archived).map((s) => s.api_id)).toEqual(['seg-2024-holiday']);
    expect(segments.find((s) => s.api_id === 'seg-us-users')!.filter).toEqual({
      attribute: 'country',
      op: 'eq',
      value: 'US',
    });
    expect(segments.find((s) => s.api_id === 'seg-bucket-0-999')!.filter).toEqual({
      random_bucket: { gte: 0, lt: 1000 },
    });
    // Tags the objects carry exist as tags too.
    expect(
      (await q<{ name: string }>(`SELECT name FROM tags WHERE workspace_id = $1 ORDER BY name`, [ws!.id])).map(
        (r) => r.name,
      ),
    ).toEqual(['onboarding', 'promo', 'retention', 'transactional', 'vip']);

    const [products] = await q<{ fields: unknown; description: string }>(
      `SELECT fields, description FROM catalogs WHERE workspace_id = $1 AND name = 'products'`,
      [ws!.id],
    );
    expect(products!.fields).toEqual([
      { name: 'title', type: 'string' },
      { name: 'price', type: 'number' },
      { name: 'in_stock', type: 'boolean' },
      { name: 'available_from', type: 'time' },
      { name: 'dimensions', type: 'object' },
      { name: 'colors', type: 'array' },
    ]);

    const canvases = await q<{
      api_id: string;
      status: string;
      archived: boolean;
      created_at: Date;
      last_edited: Date;
    }>(
      `SELECT api_id, status, archived, created_at, last_edited FROM canvases WHERE workspace_id = $1 ORDER BY api_id`,
      [ws!.id],
    );
    expect(canvases.map((c) => [c.api_id, c.status, c.archived])).toEqual([
      ['canvas-black-friday', 'stopped', true],
      ['canvas-welcome', 'active', false],
      ['canvas-winback', 'active', false],
    ]);
    expect(canvases[1]!.last_edited.toISOString()).toBe('2025-06-12T08:30:00.000Z');
    const schedules = await q<{
      schedule_id: string;
      api_id: string;
      schedule: unknown;
      broadcast: boolean;
      recipients: unknown;
      state: string;
    }>(
      `SELECT s.schedule_id, c.api_id, s.schedule, s.broadcast, s.recipients, s.state FROM canvas_schedules s JOIN canvases c ON c.id = s.canvas_id
        WHERE c.workspace_id = $1 ORDER BY c.api_id`,
      [ws!.id],
    );
    expect(schedules).toHaveLength(2);
    expect(schedules[0]).toMatchObject({
      schedule_id: 'demo-welcome-weekly',
      broadcast: true,
      state: 'scheduled',
      schedule: { time: '2030-01-06T09:00:00Z', in_local_time: true },
    });
    expect(schedules[1]!.schedule_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-/);
    expect(schedules[1]!.recipients).toEqual([
      { external_user_id: 'u-42-0000000001', trigger_properties: { discount: 15 } },
    ]);

    expect(
      await q(`SELECT api_id, type, title, archived FROM feed_cards WHERE workspace_id = $1 ORDER BY api_id`, [ws!.id]),
    ).toHaveLength(4);
    const [pc] = await q<{ options: unknown; state: string; redirect_page_html: string | null }>(
      `SELECT options, state, redirect_page_html FROM preference_centers WHERE workspace_id = $1 AND api_id = 'pc-newsletters'`,
      [ws!.id],
    );
    expect(pc).toEqual({
      options: { 'meta-viewport-content': 'width=device-width, initial-scale=1' },
      state: 'active',
      redirect_page_html: null,
    });
    expect(
      await q(
        `SELECT a.name, l.activity_id, l.content_state_shape FROM live_activities l JOIN apps a ON a.id = l.app_id WHERE a.workspace_id = $1`,
        [ws!.id],
      ),
    ).toEqual([
      {
        name: 'Demo iOS',
        activity_id: 'order-tracker',
        content_state_shape: { status: 'string', eta_minutes: 'number', courier: 'string', delivered: 'boolean' },
      },
    ]);
  });

  it('writes the records, with relative times resolved against the apply time', async () => {
    const uninstalls = await q<{ name: string; day: string; n: number }>(
      `SELECT a.name, to_char(e.occurred_at, 'YYYY-MM-DD"T"HH24:MI') AS day, count(*)::int AS n
         FROM uninstall_events e JOIN apps a ON a.id = e.app_id GROUP BY 1, 2 ORDER BY 1, 2`,
    );
    expect(uninstalls.find((u) => u.name === 'Demo iOS' && u.day === '2026-06-14T08:00')!.n).toBe(12);
    expect(uninstalls.reduce((s, u) => s + u.n, 0)).toBe(12 + 9 + 15 + 7 + 20 + 18 + 25 + 11);
    expect(await q(`SELECT email, bounced_at FROM hard_bounces ORDER BY bounced_at DESC LIMIT 1`)).toEqual([
      { email: 'bounced.one@example.com', bounced_at: new Date('2026-06-13T13:15:00Z') },
    ]);
    expect(await q(`SELECT phone, reason FROM invalid_phone_numbers ORDER BY phone`)).toEqual([
      { phone: '+14155550100', reason: 'provider_error' },
      { phone: '+447700900123', reason: 'deactivated' },
      { phone: '+4915112345678', reason: 'provider_error' },
    ]);
  });

  it('applying the same file again changes nothing: no row written, no secret generated', async () => {
    const before = await dumpAll();
    const again = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(demoText), { now: NOW });
    expect(again.generatedSecrets).toEqual([]);
    for (const [kind, c] of Object.entries(again.counts))
      expect({ kind, created: c.created, updated: c.updated }).toEqual({ kind, created: 0, updated: 0 });
    expect(again.counts.segments.unchanged).toBe(7);
    expect(await dumpAll()).toEqual(before);
  });

  it('a changed declaration updates just that row and bumps its updated_at', async () => {
    const before = await q<{ api_id: string; xmin: string; updated_at: Date }>(
      `SELECT api_id, xmin::text, updated_at FROM segments ORDER BY api_id`,
    );
    const changed = demoText.replace('name: US users', 'name: United States users');
    const summary = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(changed), { now: NOW });
    expect(summary.counts.segments).toEqual({ created: 0, updated: 1, unchanged: 6 });
    const after = await q<{ api_id: string; xmin: string; updated_at: Date; name: string }>(
      `SELECT api_id, xmin::text, updated_at, name FROM segments ORDER BY api_id`,
    );
    for (const [i, row] of after.entries()) {
      if (row.api_id === 'seg-us-users') {
        expect(row.name).toBe('United States users');
        expect(row.updated_at.getTime()).toBeGreaterThan(before[i]!.updated_at.getTime());
      } else {
        expect(row.xmin).toBe(before[i]!.xmin);
      }
    }
    await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(demoText), { now: NOW });
  });

  it('stores a changed schedule as a new version for the scheduler to re-arm', async () => {
    const changed = demoText.replace('time: "2030-01-06T09:00:00Z"', 'time: "2030-01-13T09:00:00Z"');
    const summary = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(changed), { now: NOW });
    expect(summary.counts.canvas_schedules).toEqual({ created: 0, updated: 1, unchanged: 1 });
    const [row] = await q<{ version: number; schedule: { time: string }; fire_times: unknown }>(
      `SELECT version, schedule, fire_times FROM canvas_schedules WHERE schedule_id = 'demo-welcome-weekly'`,
    );
    expect(row).toMatchObject({ version: 2, schedule: { time: '2030-01-13T09:00:00Z' }, fire_times: null });
    await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(demoText), { now: NOW });
  });

  it('generated and given secrets work as API keys against GET /segments/list', async () => {
    const generated = first.generatedSecrets.find((g) => g.name === 'demo-read-only')!.secret;
    for (const key of [DEMO_KEY, generated]) {
      const res = await env.app.inject({ method: 'GET', url: '/segments/list', headers: bearer(key) });
      expect(res.statusCode).toBe(200);
      const ids = res.json<z.infer<typeof SegmentListResponse>>().segments.map((s) => s.id);
      expect(ids).toHaveLength(6);
      expect(ids).toContain('seg-all-users');
      expect(ids).not.toContain('seg-2024-holiday');
    }
    // The read-only key was declared without users.export.segment.
    const refused = await env.app.inject({
      method: 'POST',
      url: '/users/export/segment',
      headers: { ...bearer(generated), 'content-type': 'application/json' },
      payload: {},
    });
    expect(refused.statusCode).toBe(401);
  });

  it('a secret given in the file replaces the stored one', async () => {
    const rotated = 'ces_key_rotated_00000000000000000000000';
    const summary = await applyWorkspaceFile(
      env.ctx.pool,
      parseWorkspaceFile(
        demoText.replace('name: demo-read-only\n', `name: demo-read-only\n        secret: ${rotated}\n`),
      ),
      { now: NOW },
    );
    expect(summary.counts.api_keys).toEqual({ created: 0, updated: 1, unchanged: 1 });
    expect(summary.generatedSecrets).toEqual([]);
    const res = await env.app.inject({ method: 'GET', url: '/segments/list', headers: bearer(rotated) });
    expect(res.statusCode).toBe(200);
  });
});

describe('invalid workspace files', () => {
  const base = `company: { name: Broken Co }\nworkspaces:\n  - name: W\n`;

  it('names the path of every problem', () => {
    const err = expectFileError(
      () =>
        parseWorkspaceFile(
          base +
            `    api_keys:\n      - { name: a, permissions: [segments.list] }\n      - { name: b, permissions: [segments.list, canvas.list, "x"] }\n` +
            `    segments:\n      - { id: s1, name: S, filter: { attribute: shoe_size, op: eq, value: 1 } }\n      - { id: s2, name: S2, nmae: typo }\n` +
            `    apps:\n      - { name: A, platform: blackberry }\n`,
        ),
      /^workspaces\[0\]\.api_keys\[1\]\.permissions\[2\]: unknown permission "x"$/,
      /^workspaces\[0\]\.segments\[0\]\.filter\.attribute: Invalid option/,
      /^workspaces\[0\]\.segments\[1\]\.nmae: unknown key "nmae"$/,
      /^workspaces\[0\]\.apps\[0\]\.platform: Invalid option/,
    );
    expect(err.issues.find((i) => i.path.endsWith('permissions[2]'))!.line).toBe(6);
    expect(err.message).toContain('workspaces[0].api_keys[1].permissions[2] (line 6): unknown permission "x"');
  });

  it('refuses duplicates, bad times, bad cron, unknown export fields and a short secret', () => {
    expectFileError(
      () =>
        parseWorkspaceFile(
          base +
            `    segments:\n      - { id: s1, name: A }\n      - { id: s1, name: B }\n` +
            `    api_keys:\n      - { name: k, secret: short }\n`,
        ),
      /^workspaces\[0\]\.api_keys\[0\]\.secret: must be at least 20 characters$/,
    );
    expectFileError(
      () => parseWorkspaceFile(base + `    segments:\n      - { id: s1, name: A }\n      - { id: s1, name: B }\n`),
      /^workspaces\[0\]\.segments\[1\]\.id: duplicate segment id "s1"/,
    );
    expectFileError(
      () =>
        parseWorkspaceFile(
          base +
            `    scheduled_exports:\n      - { name: e, segment: s1, cron: "* *", time_zone: Mars/Base, fields_to_export: [email, shoe_size] }\n` +
            `    records:\n      uninstalls: [{ app: A, at: yesterday }]\n`,
        ),
      /^workspaces\[0\]\.scheduled_exports\[0\]\.cron: must be a cron expression/,
      /^workspaces\[0\]\.scheduled_exports\[0\]\.time_zone: must be an IANA time zone/,
      /^workspaces\[0\]\.scheduled_exports\[0\]\.fields_to_export\[1\]: Invalid option/,
      /^workspaces\[0\]\.records\.uninstalls\[0\]\.at: must be an ISO 8601 date-time or today/,
    );
  });

  it('refuses an incremental scheduled export without a key to match its lines, and a rows_per_part out of bounds', () => {
    const exports = (...rows: string[]) =>
      parseWorkspaceFile(base + `    scheduled_exports:\n` + rows.map((r) => `      - ${r}\n`).join(''));
    expectFileError(
      () =>
        exports(
          `{ name: e, segment: s1, cron: "0 3 * * *", fields_to_export: [email, first_name], mode: incremental }`,
          `{ name: f, segment: s1, cron: "0 3 * * *", fields_to_export: [email], rows_per_part: 10 }`,
          `{ name: g, segment: s1, cron: "0 3 * * *", fields_to_export: [email], rows_per_part: 1500.5, mode: sometimes }`,
        ),
      /^workspaces\[0\]\.scheduled_exports\[0\]\.fields_to_export: an incremental schedule \(mode: incremental\) must export external_id or service_id/,
      /^workspaces\[0\]\.scheduled_exports\[1\]\.rows_per_part: must be at least 1000$/,
      /^workspaces\[0\]\.scheduled_exports\[2\]\.rows_per_part: must be a whole number from 1000 to 1000000$/,
      /^workspaces\[0\]\.scheduled_exports\[2\]\.mode: Invalid option/,
    );
    // Either key will do; a full schedule needs none.
    expect(() =>
      exports(
        `{ name: e, segment: s1, cron: "0 3 * * *", fields_to_export: [service_id, email], mode: incremental }`,
        `{ name: f, segment: s1, cron: "0 3 * * *", fields_to_export: [email], mode: full, rows_per_part: 1000000 }`,
      ),
    ).not.toThrow();
  });

  it('checks permission sets against the SCIM permissions, built in and declared, when it applies', async () => {
    // The check is made against the settings as they stand once the file's are merged into the stored ones, so at
    // apply time; a refused file writes nothing.
    const err = await applyWorkspaceFile(
      env.ctx.pool,
      parseWorkspaceFile(
        `company: { name: S, settings: { scim: { permissions: { workspace: [view_reports] } } } }\n` +
          `permission_sets:\n  - { name: ok, permissions: [basic_access, view_reports] }\n  - { name: bad, permissions: [basic_access, fly_rockets] }\n`,
      ),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkspaceFileError);
    expect((err as WorkspaceFileError).issues).toEqual([
      {
        path: 'permission_sets[1].permissions[1]',
        message: expect.stringMatching(/^unknown workspace permission "fly_rockets"/),
      },
    ]);
    expect(await q(`SELECT 1 FROM companies WHERE name = 'S'`)).toEqual([]);
    const ok = await applyWorkspaceFile(
      env.ctx.pool,
      parseWorkspaceFile(
        `company: { name: S, settings: { scim: { permissions: [view_reports] } } }\npermission_sets: [{ name: ok, permissions: [view_reports] }]\n`,
      ),
    );
    expect(ok.counts.permission_sets.created).toBe(1);
  });

  it('reports YAML and JSON syntax errors with their line, and an empty file', () => {
    const yaml = expectFileError(() => parseWorkspaceFile('company: {name: [\n'), /Flow/);
    expect(yaml.issues[0]!.line).toBeGreaterThan(0);
    expectFileError(
      () => parseWorkspaceFile('{"company": {"name": "x"}, "workspaces": [{"name": "w", "bogus": 1}]}'),
      /^workspaces\[0\]\.bogus: unknown key "bogus"$/,
    );
    expectFileError(() => parseWorkspaceFile(''), /the file is empty/);
    expectFileError(() => parseWorkspaceFile('company: {name: x}\ncompany: {name: y}\n'), /unique|duplicate/i);
  });

  it("refuses a segment's team that the workspace does not declare", () => {
    expectFileError(
      () =>
        parseWorkspaceFile(
          base + `    teams: [{ name: Growth }]\n    segments:\n      - { id: s1, name: A, teams: [Growth, Sales] }\n`,
        ),
      /^workspaces\[0\]\.segments\[0\]\.teams\[1\]: team "Sales" is not among this workspace's teams$/,
    );
  });

  it("stores a segment's description and teams, which GET /segments/details answers", async () => {
    const text =
      `company: { name: Described Co }\nworkspaces:\n  - name: W\n    teams: [{ name: Growth }]\n` +
      `    api_keys: [{ name: k, secret: ces_key_described_000000000000000000, permissions: [segments.details] }]\n` +
      `    segments:\n      - { id: s1, name: A, description: "Our best customers", teams: [Growth] }\n`;
    await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(text));
    const res = await env.app.inject({
      method: 'GET',
      url: '/segments/details?segment_id=s1',
      headers: bearer('ces_key_described_000000000000000000'),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      text_description: 'Our best customers',
      teams: ['Growth'],
      description: 'All users.',
    });
    // Dropping them from the file clears them.
    await applyWorkspaceFile(
      env.ctx.pool,
      parseWorkspaceFile(text.replace(', description: "Our best customers", teams: [Growth]', '')),
    );
    const stored = `SELECT s.description, s.teams FROM segments s JOIN workspaces w ON w.id = s.workspace_id
                      JOIN companies c ON c.id = w.company_id WHERE c.name = 'Described Co'`;
    expect(await q(stored)).toEqual([{ description: null, teams: [] }]);
  });

  it('refuses references to nothing at apply time, naming the path, and writes nothing', async () => {
    const file = parseWorkspaceFile(
      `company: { name: Dangling Co }\nworkspaces:\n  - name: W\n    apps: [{ name: A, platform: ios }]\n` +
        `    live_activities: [{ app: Nope, activity_id: x }]\n` +
        `    scheduled_exports: [{ name: e, segment: missing, cron: "0 3 * * *", fields_to_export: [email] }]\n`,
    );
    const err = await applyWorkspaceFile(env.ctx.pool, file).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkspaceFileError);
    expect((err as WorkspaceFileError).issues.map((i) => i.path).sort()).toEqual([
      'workspaces[0].live_activities[0].app',
      'workspaces[0].scheduled_exports[0].segment',
    ]);
    expect(await q(`SELECT 1 FROM companies WHERE name = 'Dangling Co'`)).toEqual([]);
  });

  it('refuses to take an app id or a secret that belongs to another workspace', async () => {
    const before = await dumpAll();
    const file = parseWorkspaceFile(
      `company: { name: Thief Co }\nworkspaces:\n  - name: W\n    apps: [{ name: A, api_id: demo-ios-app, platform: ios }]\n` +
        `    api_keys: [{ name: k, secret: ${DEMO_KEY}, permissions: [segments.list] }]\n`,
    );
    const err = await applyWorkspaceFile(env.ctx.pool, file).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkspaceFileError);
    expect((err as WorkspaceFileError).issues.map((i) => i.path).sort()).toEqual([
      'workspaces[0].api_keys[0].secret',
      'workspaces[0].apps[0].api_id',
    ]);
    expect(await dumpAll()).toEqual(before);
  });
});

describe('scheduled exports in the file', () => {
  it("stores a scheduled export's mode and rows_per_part, and a file without them puts back the defaults", async () => {
    const text = (extra: string) =>
      `company: { name: Warehouse Co }\nworkspaces:\n  - name: W\n    segments: [{ id: s1, name: S }]\n` +
      `    scheduled_exports: [{ name: e, segment: s1, cron: "0 3 * * *", fields_to_export: [external_id, email]${extra} }]\n`;
    const stored = () =>
      q(
        `SELECT mode, rows_per_part FROM scheduled_exports se JOIN workspaces w ON w.id = se.workspace_id JOIN companies c ON c.id = w.company_id WHERE c.name = 'Warehouse Co'`,
      );
    await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(text(', mode: incremental, rows_per_part: 50000')));
    expect(await stored()).toEqual([{ mode: 'incremental', rows_per_part: 50_000 }]);
    const again = await applyWorkspaceFile(
      env.ctx.pool,
      parseWorkspaceFile(text(', mode: incremental, rows_per_part: 50000')),
    );
    expect(again.counts.scheduled_exports).toEqual({ created: 0, updated: 0, unchanged: 1 });
    await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(text('')));
    expect(await stored()).toEqual([{ mode: 'full', rows_per_part: null }]);
  });
});

describe('ces workspace apply', () => {
  const cli = (args: string[]) =>
    run('npx', ['tsx', 'src/cli.ts', 'workspace', 'apply', ...args], {
      env: {
        ...process.env,
        DATABASE_URL: env.config.DATABASE_URL,
        DATABASE_SCHEMA: env.config.DATABASE_SCHEMA,
        LOG_LEVEL: 'silent',
      },
    }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );

  it('exits 2 with the path-named errors on an invalid file', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'ces-ws-'));
    const file = path.join(dir, 'bad.yaml');
    await writeFile(
      file,
      `company: { name: X }\nworkspaces:\n  - name: W\n    api_keys: [{ name: a, permissions: [nope] }]\n`,
    );
    const res = await cli([file]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('workspaces[0].api_keys[0].permissions[0] (line 4): unknown permission "nope"');
    expect((await cli([path.join(dir, 'missing.yaml')])).code).toBe(2);
  });

  it('prints the summary, and a generated secret only on the apply that created it', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'ces-ws-'));
    const file = path.join(dir, 'ws.json');
    await writeFile(
      file,
      JSON.stringify({
        company: { name: 'Cli Co' },
        workspaces: [{ name: 'Main', api_keys: [{ name: 'ops', permissions: ['segments.list'] }] }],
      }),
    );
    const once = await cli([file]);
    expect(once.code).toBe(0);
    expect(once.stdout).toMatch(/api_keys\s+1\s+0\s+0/);
    const secret = /API key "ops" of workspace "Main": (ces_key_\S+)/.exec(once.stdout)?.[1];
    expect(secret).toBeDefined();
    const res = await env.app.inject({ method: 'GET', url: '/segments/list', headers: bearer(secret!) });
    expect(res.statusCode).toBe(200);
    const twice = await cli([file]);
    expect(twice.code).toBe(0);
    expect(twice.stdout).toMatch(/api_keys\s+0\s+0\s+1/);
    expect(twice.stdout).not.toContain('ces_key_');
  });
});

import { createHash } from 'node:crypto';
import { generateSecret, hashSecret, secretPrefix } from '../auth/secrets.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { formatPath, WorkspaceFileError, type FileIssue } from './parse.js';
import { resolveRecordTime, type WorkspaceFile } from './schema.js';
import { recordHardBouncesIn } from '../hard-bounces/hard-bounces.js';
import { recordInvalidPhoneNumbersIn } from '../invalid-phone-numbers/invalid-phone-numbers.js';
import type { RecordResult } from '../lib/record-batches.js';
import { topUpUninstalls } from '../uninstalls/uninstalls.js';
import { upsert, type UpsertCounts, type UpsertSpec } from './upsert.js';

export const KINDS = [
  'companies',
  'workspaces',
  'teams',
  'apps',
  'tags',
  'content_blocks',
  'segments',
  'catalogs',
  'canvases',
  'canvas_schedules',
  'feed_cards',
  'preference_centers',
  'api_keys',
  'scim_tokens',
  'permission_sets',
  'live_activities',
  'scheduled_exports',
  'uninstalls',
  'hard_bounces',
  'invalid_phone_numbers',
] as const;
export type Kind = (typeof KINDS)[number];

export interface GeneratedSecret {
  kind: 'api_key' | 'scim_token';
  /** The workspace of an API key; absent for SCIM tokens (company-wide). */
  workspace?: string;
  name: string;
  secret: string;
}

export interface ApplySummary {
  companyId: string;
  workspaceIds: Record<string, string>;
  counts: Record<Kind, UpsertCounts>;
  /** Secrets created by this apply because the file gave none: shown once, stored only hashed. */
  generatedSecrets: GeneratedSecret[];
}

export interface ApplyOptions {
  /** The moment relative record times (`today-3d`) are resolved against. */
  now?: Date;
}

const SPECS = {
  companies: { table: 'companies', key: { name: 'text' }, set: { settings: 'jsonb' } },
  workspaces: { table: 'workspaces', key: { company_id: 'uuid', name: 'text' }, set: { settings: 'jsonb', export_destination: 'jsonb' } },
  teams: { table: 'teams', key: { workspace_id: 'uuid', name: 'text' } },
  apps: {
    table: 'apps',
    key: { workspace_id: 'uuid', name: 'text' },
    set: { platform: 'text' },
    optional: { api_id: 'text' },
    insertDefaults: { api_id: 'gen_random_uuid()::text' },
  },
  tags: { table: 'tags', key: { workspace_id: 'uuid', name: 'text' } },
  content_blocks: { table: 'content_blocks', key: { workspace_id: 'uuid', name: 'text' }, set: { content: 'text' }, touch: 'updated_at' },
  segments: {
    table: 'segments',
    key: { workspace_id: 'uuid', api_id: 'text' },
    set: { name: 'text', tags: 'text[]', analytics_tracking_enabled: 'boolean', archived: 'boolean', filter: 'jsonb' },
    optional: { created_at: 'timestamptz' },
    insertDefaults: { created_at: 'now()' },
    touch: 'updated_at',
  },
  catalogs: { table: 'catalogs', key: { workspace_id: 'uuid', name: 'text' }, set: { description: 'text', fields: 'jsonb' }, touch: 'updated_at' },
  canvases: {
    table: 'canvases',
    key: { workspace_id: 'uuid', api_id: 'text' },
    set: { name: 'text', tags: 'text[]', status: 'text', archived: 'boolean' },
    optional: { created_at: 'timestamptz', last_edited: 'timestamptz' },
    insertDefaults: { created_at: 'now()', last_edited: 'now()' },
    touch: 'last_edited',
  },
  canvas_schedules: {
    table: 'canvas_schedules',
    key: { schedule_id: 'text' },
    set: {
      canvas_id: 'uuid',
      schedule: 'jsonb',
      recipients: 'jsonb',
      audience: 'jsonb',
      trigger_properties: 'jsonb',
      canvas_entry_properties: 'jsonb',
      broadcast: 'boolean',
    },
    insertOnly: { dispatch_id: 'text' },
    touch: 'updated_at',
    // A changed schedule is a new version: jobs armed for the old one find themselves stale, and the worker re-arms.
    onUpdate: ['version = t.version + 1', 'fire_times = NULL'],
  },
  feed_cards: {
    table: 'feed_cards',
    key: { workspace_id: 'uuid', api_id: 'text' },
    set: { type: 'text', title: 'text', tags: 'text[]', archived: 'boolean' },
    optional: { created_at: 'timestamptz' },
    insertDefaults: { created_at: 'now()' },
  },
  preference_centers: {
    table: 'preference_centers',
    key: { workspace_id: 'uuid', api_id: 'text' },
    set: { name: 'text', title: 'text', page_html: 'text', confirmation_page_html: 'text', redirect_page_html: 'text', options: 'jsonb', state: 'text' },
    optional: { created_at: 'timestamptz' },
    insertDefaults: { created_at: 'now()' },
    touch: 'updated_at',
  },
  api_keys: {
    table: 'api_keys',
    key: { workspace_id: 'uuid', name: 'text' },
    set: { permissions: 'text[]' },
    // A key declared without a secret keeps the one it has.
    optional: { key_hash: { type: 'text', expr: `decode(i.key_hash, 'hex')` }, key_prefix: 'text' },
  },
  scim_tokens: {
    table: 'scim_tokens',
    key: { company_id: 'uuid', name: 'text' },
    optional: { token_hash: { type: 'text', expr: `decode(i.token_hash, 'hex')` }, key_prefix: 'text' },
  },
  permission_sets: { table: 'permission_sets', key: { company_id: 'uuid', name: 'text' }, set: { permissions: 'text[]' } },
  live_activities: { table: 'live_activities', key: { app_id: 'uuid', activity_id: 'text' }, set: { content_state_shape: 'jsonb' }, touch: 'updated_at' },
  scheduled_exports: {
    table: 'scheduled_exports',
    key: { workspace_id: 'uuid', name: 'text' },
    set: {
      segment_id: 'uuid',
      cron: 'text',
      time_zone: 'text',
      fields_to_export: 'text[]',
      custom_attributes_to_export: 'text[]',
      output_format: 'text',
      callback_endpoint: 'text',
      enabled: 'boolean',
    },
    touch: 'updated_at',
  },
} satisfies Partial<Record<Kind, UpsertSpec>>;

type Path = (string | number)[];

/**
 * Applies a validated workspace file in one transaction: every kind is upserted by its natural key with one
 * statement, rows already as declared are left untouched, and nothing absent from the file is deleted. References
 * the file makes (apps, segments, canvases) may point at objects in the file or already stored; any that resolve to
 * nothing, and any clash with another workspace's stored ids or secrets, abort the whole apply with
 * WorkspaceFileError naming the path in the file.
 */
export async function applyWorkspaceFile(pool: Pool, file: WorkspaceFile, options: ApplyOptions = {}): Promise<ApplySummary> {
  const now = options.now ?? new Date();
  try {
    return await withTransaction(pool, (client) => applyIn(client, file, now));
  } catch (err) {
    // A clash that slipped past the checks below (e.g. two apps swapping ids in one apply) still names the row.
    const pgErr = err as { code?: string; detail?: string; table?: string };
    if (pgErr.code === '23505') {
      throw new WorkspaceFileError([{ path: '', message: `conflicts with stored data in ${pgErr.table ?? 'a table'}: ${pgErr.detail ?? 'duplicate key'}` }]);
    }
    throw err;
  }
}

async function applyIn(client: PoolClient, file: WorkspaceFile, now: Date): Promise<ApplySummary> {
  // Two applies of one company at once would race between their checks and writes.
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`ces-workspace-apply:${file.company.name}`]);
  const counts = Object.fromEntries(KINDS.map((k) => [k, { created: 0, updated: 0, unchanged: 0 }])) as Record<Kind, UpsertCounts>;
  const generatedSecrets: GeneratedSecret[] = [];
  const issues: FileIssue[] = [];
  const fail = () => {
    if (issues.length > 0) throw new WorkspaceFileError(issues);
  };

  counts.companies = await upsert(client, SPECS.companies, [{ name: file.company.name, settings: file.company.settings }]);
  const companyId = (await client.query<{ id: string }>('SELECT id FROM companies WHERE name = $1', [file.company.name])).rows[0]!.id;

  counts.workspaces = await upsert(
    client,
    SPECS.workspaces,
    file.workspaces.map((w) => ({ company_id: companyId, name: w.name, settings: w.settings, export_destination: w.export_destination })),
  );
  const wsRows = await client.query<{ id: string; name: string }>('SELECT id, name FROM workspaces WHERE company_id = $1 AND name = ANY($2)', [
    companyId,
    file.workspaces.map((w) => w.name),
  ]);
  const wsId = new Map(wsRows.rows.map((r) => [r.name, r.id]));
  const workspaces = file.workspaces.map((w, wi) => ({ decl: w, id: wsId.get(w.name)!, path: ['workspaces', wi] as Path }));

  // Secrets: hash the given ones; generate one only for a key that does not exist yet.
  const existingKeys = await client.query<{ workspace_id: string; name: string }>(
    'SELECT workspace_id, name FROM api_keys WHERE workspace_id = ANY($1)',
    [workspaces.map((w) => w.id)],
  );
  const keyExists = new Set(existingKeys.rows.map((r) => `${r.workspace_id}/${r.name}`));
  const apiKeyRows = workspaces.flatMap((w) =>
    w.decl.api_keys.map((k, ki) => {
      let secret = k.secret;
      if (secret === undefined && !keyExists.has(`${w.id}/${k.name}`)) {
        secret = generateSecret('key');
        generatedSecrets.push({ kind: 'api_key', workspace: w.decl.name, name: k.name, secret });
      }
      return {
        row: { workspace_id: w.id, name: k.name, permissions: k.permissions, ...hashed(secret, 'key_hash') },
        path: [...w.path, 'api_keys', ki, 'secret'],
      };
    }),
  );
  const existingTokens = await client.query<{ name: string }>('SELECT name FROM scim_tokens WHERE company_id = $1', [companyId]);
  const tokenExists = new Set(existingTokens.rows.map((r) => r.name));
  const tokenRows = file.scim_tokens.map((t, ti) => {
    let secret = t.secret;
    if (secret === undefined && !tokenExists.has(t.name)) {
      secret = generateSecret('scim');
      generatedSecrets.push({ kind: 'scim_token', name: t.name, secret });
    }
    return { row: { company_id: companyId, name: t.name, ...hashed(secret, 'token_hash') }, path: ['scim_tokens', ti, 'secret'] };
  });

  await checkGlobalClashes(client, companyId, workspaces, apiKeyRows, tokenRows, issues);
  fail();

  const perWorkspace = <T, R>(pick: (w: WorkspaceFile['workspaces'][number]) => T[], map: (item: T, workspaceId: string) => R) =>
    workspaces.flatMap((w) => pick(w.decl).map((item) => map(item, w.id)));

  counts.teams = await upsert(client, SPECS.teams, perWorkspace((w) => w.teams, (t, id) => ({ workspace_id: id, name: t.name })));
  counts.apps = await upsert(
    client,
    SPECS.apps,
    perWorkspace((w) => w.apps, (a, id) => ({ workspace_id: id, name: a.name, platform: a.platform, api_id: a.api_id })),
  );
  // Tags the file's objects carry exist as tags too, so that features requiring existing tags accept them.
  counts.tags = await upsert(
    client,
    SPECS.tags,
    workspaces.flatMap((w) => {
      const d = w.decl;
      const all = new Set([...d.tags, ...d.segments.flatMap((s) => s.tags), ...d.canvases.flatMap((c) => c.tags), ...d.feed_cards.flatMap((c) => c.tags)]);
      return [...all].map((name) => ({ workspace_id: w.id, name }));
    }),
  );
  counts.content_blocks = await upsert(
    client,
    SPECS.content_blocks,
    perWorkspace((w) => w.content_blocks, (c, id) => ({ workspace_id: id, name: c.name, content: c.content })),
  );
  counts.segments = await upsert(
    client,
    SPECS.segments,
    perWorkspace(
      (w) => w.segments,
      (s, id) => ({
        workspace_id: id,
        api_id: s.id,
        name: s.name,
        tags: s.tags,
        analytics_tracking_enabled: s.analytics_tracking_enabled,
        archived: s.archived,
        filter: s.filter,
        created_at: s.created_at,
      }),
    ),
  );
  counts.catalogs = await upsert(
    client,
    SPECS.catalogs,
    perWorkspace((w) => w.catalogs, (c, id) => ({ workspace_id: id, name: c.name, description: c.description, fields: c.fields })),
  );
  counts.canvases = await upsert(
    client,
    SPECS.canvases,
    perWorkspace(
      (w) => w.canvases,
      (c, id) => ({
        workspace_id: id,
        api_id: c.id,
        name: c.name,
        tags: c.tags,
        status: c.status,
        archived: c.archived,
        created_at: c.created_at,
        last_edited: c.last_edited,
      }),
    ),
  );
  counts.feed_cards = await upsert(
    client,
    SPECS.feed_cards,
    perWorkspace(
      (w) => w.feed_cards,
      (c, id) => ({ workspace_id: id, api_id: c.id, type: c.type, title: c.title, tags: c.tags, archived: c.archived, created_at: c.created_at }),
    ),
  );
  counts.preference_centers = await upsert(
    client,
    SPECS.preference_centers,
    perWorkspace(
      (w) => w.preference_centers,
      (p, id) => ({
        workspace_id: id,
        api_id: p.id,
        name: p.name,
        title: p.title,
        page_html: p.page_html,
        confirmation_page_html: p.confirmation_page_html,
        redirect_page_html: p.redirect_page_html,
        options: p.options,
        state: p.state,
        created_at: p.created_at,
      }),
    ),
  );
  counts.api_keys = await upsert(client, SPECS.api_keys, apiKeyRows.map((k) => k.row));
  counts.scim_tokens = await upsert(client, SPECS.scim_tokens, tokenRows.map((t) => t.row));
  counts.permission_sets = await upsert(
    client,
    SPECS.permission_sets,
    file.permission_sets.map((p) => ({ company_id: companyId, name: p.name, permissions: p.permissions })),
  );

  // References, resolved against the file's objects just written and whatever was stored before.
  const refs = await loadReferences(client, workspaces);
  const scheduleRows = workspaces.flatMap((w) =>
    w.decl.canvases.flatMap((c) =>
      c.schedules.map((s, si) => {
        const scheduleId = s.schedule_id ?? derivedId(`schedule/${w.id}/${c.id}/${si}`);
        return {
          schedule_id: scheduleId,
          canvas_id: refs.canvases.get(`${w.id}/${c.id}`),
          schedule: s.schedule,
          recipients: s.recipients,
          audience: s.audience,
          trigger_properties: s.trigger_properties,
          canvas_entry_properties: s.canvas_entry_properties,
          broadcast: s.broadcast,
          dispatch_id: derivedId(`dispatch/${scheduleId}`),
        };
      }),
    ),
  );
  const appOf = (w: (typeof workspaces)[number], ref: string, path: Path): string | undefined => {
    const id = refs.apps.get(`${w.id}/name/${ref}`) ?? refs.apps.get(`${w.id}/api_id/${ref}`);
    if (!id) issues.push({ path: formatPath(path), message: `no app named (or with api_id) "${ref}" in workspace "${w.decl.name}"` });
    return id;
  };
  const liveRows = workspaces.flatMap((w) =>
    w.decl.live_activities.map((l, li) => ({
      app_id: appOf(w, l.app, [...w.path, 'live_activities', li, 'app']),
      activity_id: l.activity_id,
      content_state_shape: l.content_state_shape,
    })),
  );
  const exportRows = workspaces.flatMap((w) =>
    w.decl.scheduled_exports.map((e, ei) => {
      const segmentId = refs.segments.get(`${w.id}/${e.segment}`);
      if (!segmentId) issues.push({ path: formatPath([...w.path, 'scheduled_exports', ei, 'segment']), message: `no segment with id "${e.segment}" in workspace "${w.decl.name}"` });
      return {
        workspace_id: w.id,
        name: e.name,
        segment_id: segmentId,
        cron: e.cron,
        time_zone: e.time_zone,
        fields_to_export: e.fields_to_export,
        custom_attributes_to_export: e.custom_attributes_to_export,
        output_format: e.output_format,
        callback_endpoint: e.callback_endpoint,
        enabled: e.enabled,
      };
    }),
  );
  const uninstallRows = workspaces.flatMap((w) =>
    (w.decl.records?.uninstalls ?? []).map((u, ui) => ({
      workspace_id: w.id,
      app_id: appOf(w, u.app, [...w.path, 'records', 'uninstalls', ui, 'app']),
      occurred_at: resolveRecordTime(u.at, now),
      count: u.count,
    })),
  );
  fail();

  counts.canvas_schedules = await upsert(client, SPECS.canvas_schedules, scheduleRows);
  counts.live_activities = await upsert(client, SPECS.live_activities, liveRows);
  counts.scheduled_exports = await upsert(client, SPECS.scheduled_exports, exportRows);

  // Records go through the same writers as the internal API's, so that both do the same (a hard bounce unsubscribes
  // the address's profiles whichever way it arrives); an exact repeat of a stored record counts as unchanged.
  counts.uninstalls = await topUpUninstalls(client, uninstallRows);
  counts.hard_bounces = { created: 0, updated: 0, unchanged: 0 };
  counts.invalid_phone_numbers = { created: 0, updated: 0, unchanged: 0 };
  for (const w of workspaces) {
    const bounces = (w.decl.records?.hard_bounces ?? []).map((b) => ({ email: b.email, time: new Date(resolveRecordTime(b.at, now)) }));
    if (bounces.length > 0) addRecorded(counts.hard_bounces, await recordHardBouncesIn(client, w.id, bounces, now));
    const phones = (w.decl.records?.invalid_phone_numbers ?? []).map((p) => ({ phone: p.phone, reason: p.reason, time: new Date(resolveRecordTime(p.at, now)) }));
    if (phones.length > 0) addRecorded(counts.invalid_phone_numbers, await recordInvalidPhoneNumbersIn(client, w.id, phones, now));
  }

  return { companyId, workspaceIds: Object.fromEntries(wsId), counts, generatedSecrets };
}

function hashed(secret: string | undefined, column: string): Record<string, string> {
  if (secret === undefined) return {};
  return { [column]: hashSecret(secret).toString('hex'), key_prefix: secretPrefix(secret) };
}

/** A stable id in UUID form for objects the file declares without one. */
function derivedId(seed: string): string {
  const h = createHash('sha256').update(seed).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

interface DeclaredWorkspace {
  decl: WorkspaceFile['workspaces'][number];
  id: string;
  path: Path;
}

/** App ids, key secrets and schedule ids are unique across the store: refuse to take one from someone else. */
async function checkGlobalClashes(
  client: PoolClient,
  companyId: string,
  workspaces: DeclaredWorkspace[],
  apiKeys: { row: Record<string, unknown>; path: Path }[],
  tokens: { row: Record<string, unknown>; path: Path }[],
  issues: FileIssue[],
): Promise<void> {
  const apps = workspaces.flatMap((w) =>
    w.decl.apps.flatMap((a, ai) => (a.api_id ? [{ apiId: a.api_id, owner: `${w.id}/${a.name}`, path: [...w.path, 'apps', ai, 'api_id'] }] : [])),
  );
  if (apps.length > 0) {
    const { rows } = await client.query<{ api_id: string; owner: string }>(
      `SELECT api_id, workspace_id || '/' || name AS owner FROM apps WHERE api_id = ANY($1)`,
      [apps.map((a) => a.apiId)],
    );
    const owner = new Map(rows.map((r) => [r.api_id, r.owner]));
    for (const a of apps) {
      const o = owner.get(a.apiId);
      if (o !== undefined && o !== a.owner) issues.push({ path: formatPath(a.path), message: `api_id "${a.apiId}" already belongs to another app` });
    }
  }
  const checkSecrets = async (table: string, column: string, ownerSql: string, items: { row: Record<string, unknown>; path: Path }[], ownerOf: (row: Record<string, unknown>) => string) => {
    const given = items.filter((i) => typeof i.row[column] === 'string');
    if (given.length === 0) return;
    const { rows } = await client.query<{ hash: string; owner: string }>(
      `SELECT encode(${column}, 'hex') AS hash, ${ownerSql} AS owner FROM ${table} WHERE ${column} = ANY($1::bytea[])`,
      [given.map((i) => Buffer.from(i.row[column] as string, 'hex'))],
    );
    const owner = new Map(rows.map((r) => [r.hash, r.owner]));
    for (const i of given) {
      const o = owner.get(i.row[column] as string);
      if (o !== undefined && o !== ownerOf(i.row)) issues.push({ path: formatPath(i.path), message: 'this secret is already used by another key; choose another' });
    }
  };
  await checkSecrets('api_keys', 'key_hash', `workspace_id || '/' || name`, apiKeys, (r) => `${r.workspace_id}/${r.name}`);
  await checkSecrets('scim_tokens', 'token_hash', `company_id || '/' || name`, tokens, (r) => `${companyId}/${r.name}`);

  const schedules = workspaces.flatMap((w) =>
    w.decl.canvases.flatMap((c, ci) =>
      c.schedules.flatMap((s, si) => (s.schedule_id ? [{ id: s.schedule_id, owner: `${w.id}/${c.id}`, path: [...w.path, 'canvases', ci, 'schedules', si, 'schedule_id'] }] : [])),
    ),
  );
  if (schedules.length > 0) {
    const { rows } = await client.query<{ schedule_id: string; owner: string }>(
      `SELECT s.schedule_id, c.workspace_id || '/' || c.api_id AS owner FROM canvas_schedules s JOIN canvases c ON c.id = s.canvas_id WHERE s.schedule_id = ANY($1)`,
      [schedules.map((s) => s.id)],
    );
    const owner = new Map(rows.map((r) => [r.schedule_id, r.owner]));
    for (const s of schedules) {
      const o = owner.get(s.id);
      if (o !== undefined && o !== s.owner) issues.push({ path: formatPath(s.path), message: `schedule_id "${s.id}" already belongs to another canvas` });
    }
  }
}

interface References {
  /** `${workspaceId}/name/${name}` and `${workspaceId}/api_id/${apiId}` -> app id. */
  apps: Map<string, string>;
  /** `${workspaceId}/${apiId}` -> segment id. */
  segments: Map<string, string>;
  /** `${workspaceId}/${apiId}` -> canvas id. */
  canvases: Map<string, string>;
}

async function loadReferences(client: PoolClient, workspaces: DeclaredWorkspace[]): Promise<References> {
  const ids = workspaces.map((w) => w.id);
  const refs: References = { apps: new Map(), segments: new Map(), canvases: new Map() };
  const apps = await client.query<{ id: string; workspace_id: string; name: string; api_id: string }>(
    'SELECT id, workspace_id, name, api_id FROM apps WHERE workspace_id = ANY($1)',
    [ids],
  );
  for (const a of apps.rows) {
    refs.apps.set(`${a.workspace_id}/name/${a.name}`, a.id);
    refs.apps.set(`${a.workspace_id}/api_id/${a.api_id}`, a.id);
  }
  const segmentIds = workspaces.flatMap((w) => w.decl.scheduled_exports.map((e) => e.segment));
  if (segmentIds.length > 0) {
    const { rows } = await client.query<{ id: string; workspace_id: string; api_id: string }>(
      'SELECT id, workspace_id, api_id FROM segments WHERE workspace_id = ANY($1) AND api_id = ANY($2)',
      [ids, segmentIds],
    );
    for (const s of rows) refs.segments.set(`${s.workspace_id}/${s.api_id}`, s.id);
  }
  const canvasIds = workspaces.flatMap((w) => w.decl.canvases.filter((c) => c.schedules.length > 0).map((c) => c.id));
  if (canvasIds.length > 0) {
    const { rows } = await client.query<{ id: string; workspace_id: string; api_id: string }>(
      'SELECT id, workspace_id, api_id FROM canvases WHERE workspace_id = ANY($1) AND api_id = ANY($2)',
      [ids, canvasIds],
    );
    for (const c of rows) refs.canvases.set(`${c.workspace_id}/${c.api_id}`, c.id);
  }
  return refs;
}

/** Adds a writer's result to an apply's counts: records written are created, exact repeats unchanged. */
function addRecorded(counts: UpsertCounts, result: RecordResult): void {
  counts.created += result.recorded;
  counts.unchanged += result.duplicates;
}

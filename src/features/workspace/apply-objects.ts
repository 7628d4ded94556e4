import { SPECS, type ApplyRun, type DeclaredWorkspace } from './apply-specs.js';
import type { WorkspaceDecl } from './schema.js';
import { upsert } from './upsert.js';
import { formatPath } from './parse.js';
import { lockForTransaction, lockNames } from '../../platform/db/advisory-locks.js';

type Row = Record<string, unknown>;

/**
 * The objects a workspace declares, each kind upserted by its natural key in one statement: teams, apps, tags (those
 * the file's objects carry too), content blocks, segments, catalogs, canvases, feed cards, preference centers, and
 * the company's permission sets.
 */
export async function applyObjects(run: ApplyRun): Promise<void> {
  const { client, file, companyId, workspaces, counts } = run;
  const perWorkspace = <T>(pick: (w: WorkspaceDecl) => T[], map: (item: T, workspaceId: string) => Row) =>
    workspaces.flatMap((w) => pick(w.decl).map((item) => map(item, w.id)));

  counts.teams = await upsert(
    client,
    SPECS.teams,
    perWorkspace(
      (w) => w.teams,
      (t, id) => ({ workspace_id: id, name: t.name }),
    ),
  );
  counts.apps = await upsert(
    client,
    SPECS.apps,
    perWorkspace(
      (w) => w.apps,
      (a, id) => ({ workspace_id: id, name: a.name, platform: a.platform, api_id: a.api_id }),
    ),
  );
  counts.tags = await upsert(client, SPECS.tags, tagRows(workspaces));
  counts.content_blocks = await upsert(
    client,
    SPECS.content_blocks,
    perWorkspace(
      (w) => w.content_blocks,
      (c, id) => ({ workspace_id: id, name: c.name, content: c.content }),
    ),
  );
  counts.segments = await upsert(
    client,
    SPECS.segments,
    perWorkspace((w) => w.segments, segmentRow),
  );
  counts.custom_attributes = await upsert(
    client,
    SPECS.custom_attributes,
    perWorkspace(
      (w) => w.custom_attributes,
      (a, id) => ({
        workspace_id: id,
        name: a.name,
        declared_type: a.data_type,
        description: a.description,
        tags: a.tags,
      }),
    ),
  );
  counts.catalogs = await upsert(client, SPECS.catalogs, await catalogRows(run));
  counts.canvases = await upsert(
    client,
    SPECS.canvases,
    perWorkspace((w) => w.canvases, canvasRow),
  );
  counts.feed_cards = await upsert(
    client,
    SPECS.feed_cards,
    perWorkspace((w) => w.feed_cards, feedCardRow),
  );
  counts.preference_centers = await upsert(client, SPECS.preference_centers, await preferenceCenterRows(run));
  counts.permission_sets = await upsert(
    client,
    SPECS.permission_sets,
    file.permission_sets.map((p) => ({ company_id: companyId, name: p.name, permissions: p.permissions })),
  );
}

/** Tags the file's objects carry exist as tags too, so that features requiring existing tags accept them. */
function tagRows(workspaces: DeclaredWorkspace[]): Row[] {
  return workspaces.flatMap((w) => {
    const d = w.decl;
    const all = new Set([
      ...d.tags,
      ...d.segments.flatMap((s) => s.tags),
      ...d.custom_attributes.flatMap((a) => a.tags),
      ...d.canvases.flatMap((c) => c.tags),
      ...d.feed_cards.flatMap((c) => c.tags),
    ]);
    return [...all].map((name) => ({ workspace_id: w.id, name }));
  });
}

/**
 * The file's catalogs, each with the fields it names (in its order, with its types) followed by the fields the
 * catalog has that the file does not name: those the API added. Applying the file never removes what the API added;
 * a field the file names comes back if the API deleted it (docs/catalogs.md).
 */
async function catalogRows({ client, workspaces }: ApplyRun): Promise<Row[]> {
  const { rows } = await client.query<{ workspace_id: string; name: string; fields: Array<{ name: string }> }>(
    `SELECT workspace_id, name, fields FROM catalogs WHERE workspace_id = ANY($1::uuid[])`,
    [workspaces.map((w) => w.id)],
  );
  const stored = new Map(rows.map((r) => [`${r.workspace_id}/${r.name}`, r.fields]));
  return workspaces.flatMap((w) =>
    w.decl.catalogs.map((c) => {
      const named = new Set(c.fields.map((f) => f.name));
      const added = (stored.get(`${w.id}/${c.name}`) ?? []).filter((f) => !named.has(f.name) && f.name !== 'id');
      return { workspace_id: w.id, name: c.name, description: c.description, fields: [...c.fields, ...added] };
    }),
  );
}

function segmentRow(s: WorkspaceDecl['segments'][number], workspaceId: string): Row {
  return {
    workspace_id: workspaceId,
    api_id: s.id,
    name: s.name,
    tags: s.tags,
    analytics_tracking_enabled: s.analytics_tracking_enabled,
    archived: s.archived,
    filter: s.filter,
    created_at: s.created_at,
    description: s.description,
    teams: s.teams,
  };
}

function canvasRow(c: WorkspaceDecl['canvases'][number], workspaceId: string): Row {
  return {
    workspace_id: workspaceId,
    api_id: c.id,
    name: c.name,
    tags: c.tags,
    status: c.status,
    archived: c.archived,
    created_at: c.created_at,
    last_edited: c.last_edited,
  };
}

function feedCardRow(c: WorkspaceDecl['feed_cards'][number], workspaceId: string): Row {
  return {
    workspace_id: workspaceId,
    api_id: c.id,
    type: c.type,
    title: c.title,
    tags: c.tags,
    archived: c.archived,
    created_at: c.created_at,
  };
}

/**
 * The file's preference centers. Centers the API created are not in the file and are left alone; a center the file
 * declares keeps the options the file does not name (those the API set: links-tags), after the file's own. A name
 * another center of the workspace has (one the API created) is an issue: names are unique, the Liquid tag names the
 * center by it. The API's writers are held off meanwhile (their lock: src/features/preference-centers/write.ts).
 */
async function preferenceCenterRows(run: ApplyRun): Promise<Row[]> {
  const { client, workspaces } = run;
  const declaring = workspaces.filter((w) => w.decl.preference_centers.length > 0);
  for (const w of declaring) await lockForTransaction(client, lockNames.preferenceCenterNames(w.id));
  const { rows } = await client.query<{
    workspace_id: string;
    api_id: string;
    name: string;
    options: Record<string, unknown>;
  }>(`SELECT workspace_id, api_id, name, options FROM preference_centers WHERE workspace_id = ANY($1::uuid[])`, [
    declaring.map((w) => w.id),
  ]);
  const byId = new Map(rows.map((r) => [`${r.workspace_id}/${r.api_id}`, r]));
  const byName = new Map(rows.map((r) => [`${r.workspace_id}/${r.name}`, r]));
  return declaring.flatMap((w) =>
    w.decl.preference_centers.map((p, i) => {
      const other = byName.get(`${w.id}/${p.name}`);
      if (other && other.api_id !== p.id)
        run.issues.push({
          path: formatPath([...w.path, 'preference_centers', i, 'name']),
          message: `another preference center of this workspace (${JSON.stringify(other.api_id)}) is named ${JSON.stringify(p.name)}`,
        });
      const stored = byId.get(`${w.id}/${p.id}`)?.options ?? {};
      return {
        workspace_id: w.id,
        api_id: p.id,
        name: p.name,
        title: p.title,
        page_html: p.page_html,
        confirmation_page_html: p.confirmation_page_html,
        redirect_page_html: p.redirect_page_html,
        options: { ...stored, ...p.options },
        state: p.state,
        created_at: p.created_at,
      };
    }),
  );
}

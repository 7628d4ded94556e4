import { generateSecret, hashSecret, secretPrefix } from '../../platform/auth/secrets.js';
import type { PoolClient } from '../../platform/db/pool.js';
import { failOnIssues } from './apply-issues.js';
import { formatPath, type FileIssue } from './parse.js';
import { mergeDeclared } from './declared-merge.js';
import { allowedStrings } from '../scim/catalog.js';
import { SPECS, type ApplyRun, type DeclaredWorkspace, type Kind, type Path } from './apply-specs.js';
import type { WorkspaceFile } from './schema.js';
import { upsert, type UpsertCounts } from './upsert.js';

/**
 * The company and its workspaces, which every other kind hangs from; their ids. A file that names them to declare
 * something else leaves out what it does not say: absent settings and destination stay as stored, settings given in
 * part replace only the keys they give (./declared-merge.ts), and `export_destination: null` removes a destination.
 */
export async function applyTenancy(
  client: PoolClient,
  file: WorkspaceFile,
  counts: Record<Kind, UpsertCounts>,
  issues: FileIssue[],
): Promise<{ companyId: string; workspaceIds: Map<string, string>; workspaces: DeclaredWorkspace[] }> {
  const storedCompany = await client.query<{ settings: unknown }>('SELECT settings FROM companies WHERE name = $1', [
    file.company.name,
  ]);
  const companySettings = mergeDeclared(storedCompany.rows[0]?.settings ?? {}, file.company.settings);
  checkPermissionSets(file, companySettings, issues);
  counts.companies = await upsert(client, SPECS.companies, [{ name: file.company.name, settings: companySettings }]);
  const companyId = (
    await client.query<{ id: string }>('SELECT id FROM companies WHERE name = $1', [file.company.name])
  ).rows[0]!.id;

  const storedWorkspaces = await client.query<{ name: string; settings: unknown; export_destination: unknown }>(
    'SELECT name, settings, export_destination FROM workspaces WHERE company_id = $1 AND name = ANY($2)',
    [companyId, file.workspaces.map((w) => w.name)],
  );
  const stored = new Map(storedWorkspaces.rows.map((r) => [r.name, r]));
  counts.workspaces = await upsert(
    client,
    SPECS.workspaces,
    file.workspaces.map((w) => ({
      company_id: companyId,
      name: w.name,
      settings: mergeDeclared(stored.get(w.name)?.settings ?? {}, w.settings),
      export_destination:
        w.export_destination === undefined ? (stored.get(w.name)?.export_destination ?? null) : w.export_destination,
    })),
  );
  const wsRows = await client.query<{ id: string; name: string }>(
    'SELECT id, name FROM workspaces WHERE company_id = $1 AND name = ANY($2)',
    [companyId, file.workspaces.map((w) => w.name)],
  );
  const wsId = new Map(wsRows.rows.map((r) => [r.name, r.id]));
  const workspaces = file.workspaces.map((w, wi) => ({
    decl: w,
    id: wsId.get(w.name)!,
    path: ['workspaces', wi] as Path,
  }));

  return { companyId, workspaceIds: wsId, workspaces };
}

/**
 * Permission sets stand for workspace-level SCIM permissions: the built-in ones plus the company's extensions, as
 * they stand once this file's settings are merged into the stored ones (a file may name a permission that only the
 * stored settings add).
 */
function checkPermissionSets(file: WorkspaceFile, companySettings: unknown, issues: FileIssue[]): void {
  const scimAllowed = allowedStrings(companySettings).workspace;
  file.permission_sets.forEach((set, si) =>
    set.permissions.forEach((perm, pi) => {
      if (!scimAllowed.has(perm)) {
        issues.push({
          path: formatPath(['permission_sets', si, 'permissions', pi]),
          message: `unknown workspace permission "${perm}" (neither built in nor listed in company.settings.scim.permissions)`,
        });
      }
    }),
  );
}

/**
 * API keys and SCIM tokens: given secrets are hashed, a secret is generated only for a key that does not exist yet
 * (shown once, in the summary), and a secret, app id or schedule id another owner holds is an issue of the file.
 */
export async function applySecrets(run: ApplyRun): Promise<void> {
  const { client, file, companyId, workspaces, generatedSecrets, issues, counts } = run;
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
  const existingTokens = await client.query<{ name: string }>('SELECT name FROM scim_tokens WHERE company_id = $1', [
    companyId,
  ]);
  const tokenExists = new Set(existingTokens.rows.map((r) => r.name));
  const tokenRows = file.scim_tokens.map((t, ti) => {
    let secret = t.secret;
    if (secret === undefined && !tokenExists.has(t.name)) {
      secret = generateSecret('scim');
      generatedSecrets.push({ kind: 'scim_token', name: t.name, secret });
    }
    return {
      row: { company_id: companyId, name: t.name, ...hashed(secret, 'token_hash') },
      path: ['scim_tokens', ti, 'secret'],
    };
  });

  await checkGlobalClashes(client, companyId, workspaces, apiKeyRows, tokenRows, issues);
  failOnIssues(run);
  counts.api_keys = await upsert(
    client,
    SPECS.api_keys,
    apiKeyRows.map((k) => k.row),
  );
  counts.scim_tokens = await upsert(
    client,
    SPECS.scim_tokens,
    tokenRows.map((t) => t.row),
  );
}

function hashed(secret: string | undefined, column: string): Record<string, string> {
  if (secret === undefined) return {};
  return { [column]: hashSecret(secret).toString('hex'), key_prefix: secretPrefix(secret) };
}

type SecretRow = { row: Record<string, unknown>; path: Path };

/** App ids, key secrets and schedule ids are unique across the store: refuse to take one from someone else. */
async function checkGlobalClashes(
  client: PoolClient,
  companyId: string,
  workspaces: DeclaredWorkspace[],
  apiKeys: SecretRow[],
  tokens: SecretRow[],
  issues: FileIssue[],
): Promise<void> {
  await checkAppIdClashes(client, workspaces, issues);
  await checkSecretClashes(
    client,
    { table: 'api_keys', column: 'key_hash', ownerSql: `workspace_id || '/' || name` },
    apiKeys,
    (r) => `${r.workspace_id}/${r.name}`,
    issues,
  );
  await checkSecretClashes(
    client,
    { table: 'scim_tokens', column: 'token_hash', ownerSql: `company_id || '/' || name` },
    tokens,
    (r) => `${companyId}/${r.name}`,
    issues,
  );
  await checkScheduleIdClashes(client, workspaces, issues);
}

/** An app api_id stored for another app (another workspace's, or another name's) is refused. */
async function checkAppIdClashes(
  client: PoolClient,
  workspaces: DeclaredWorkspace[],
  issues: FileIssue[],
): Promise<void> {
  const apps = workspaces.flatMap((w) =>
    w.decl.apps.flatMap((a, ai) =>
      a.api_id ? [{ apiId: a.api_id, owner: `${w.id}/${a.name}`, path: [...w.path, 'apps', ai, 'api_id'] }] : [],
    ),
  );
  if (apps.length === 0) return;
  const { rows } = await client.query<{ api_id: string; owner: string }>(
    `SELECT api_id, workspace_id || '/' || name AS owner FROM apps WHERE api_id = ANY($1)`,
    [apps.map((a) => a.apiId)],
  );
  const owner = new Map(rows.map((r) => [r.api_id, r.owner]));
  for (const a of apps) {
    const o = owner.get(a.apiId);
    if (o !== undefined && o !== a.owner)
      issues.push({ path: formatPath(a.path), message: `api_id "${a.apiId}" already belongs to another app` });
  }
}

/** A given secret whose hash is stored in `table` for another owner (`ownerSql`, `ownerOf`) is refused. */
async function checkSecretClashes(
  client: PoolClient,
  { table, column, ownerSql }: { table: string; column: string; ownerSql: string },
  items: SecretRow[],
  ownerOf: (row: Record<string, unknown>) => string,
  issues: FileIssue[],
): Promise<void> {
  const given = items.filter((i) => typeof i.row[column] === 'string');
  if (given.length === 0) return;
  const { rows } = await client.query<{ hash: string; owner: string }>(
    `SELECT encode(${column}, 'hex') AS hash, ${ownerSql} AS owner FROM ${table} WHERE ${column} = ANY($1::bytea[])`,
    [given.map((i) => Buffer.from(i.row[column] as string, 'hex'))],
  );
  const owner = new Map(rows.map((r) => [r.hash, r.owner]));
  for (const i of given) {
    const o = owner.get(i.row[column] as string);
    if (o !== undefined && o !== ownerOf(i.row))
      issues.push({
        path: formatPath(i.path),
        message: 'this secret is already used by another key; choose another',
      });
  }
}

/** A schedule_id stored for another canvas is refused. */
async function checkScheduleIdClashes(
  client: PoolClient,
  workspaces: DeclaredWorkspace[],
  issues: FileIssue[],
): Promise<void> {
  const schedules = workspaces.flatMap((w) =>
    w.decl.canvases.flatMap((c, ci) =>
      c.schedules.flatMap((s, si) =>
        s.schedule_id
          ? [
              {
                id: s.schedule_id,
                owner: `${w.id}/${c.id}`,
                path: [...w.path, 'canvases', ci, 'schedules', si, 'schedule_id'],
              },
            ]
          : [],
      ),
    ),
  );
  if (schedules.length === 0) return;
  const { rows } = await client.query<{ schedule_id: string; owner: string }>(
    `SELECT s.schedule_id, c.workspace_id || '/' || c.api_id AS owner FROM canvas_schedules s JOIN canvases c ON c.id = s.canvas_id WHERE s.schedule_id = ANY($1)`,
    [schedules.map((s) => s.id)],
  );
  const owner = new Map(rows.map((r) => [r.schedule_id, r.owner]));
  for (const s of schedules) {
    const o = owner.get(s.id);
    if (o !== undefined && o !== s.owner)
      issues.push({ path: formatPath(s.path), message: `schedule_id "${s.id}" already belongs to another canvas` });
  }
}

import { randomUUID } from 'node:crypto';
import type { Pool } from '../../src/platform/db/pool.js';
import { PERMISSIONS } from '../../src/platform/auth/permissions.js';
import { generateSecret, hashSecret, secretPrefix } from '../../src/platform/auth/secrets.js';

export interface SeededWorkspace {
  companyId: string;
  workspaceId: string;
  /** A key with every permission. */
  apiKey: string;
  /** A key with no permission at all. */
  bareKey: string;
}

/** Inserts a company, a workspace and two API keys straight into the store (tests of other features). */
export async function seedWorkspace(
  pool: Pool,
  name = `ws-${randomUUID().slice(0, 8)}`,
  companyId?: string,
): Promise<SeededWorkspace> {
  const company =
    companyId ??
    (await pool.query<{ id: string }>(`INSERT INTO companies (name) VALUES ($1) RETURNING id`, [`co-${name}`])).rows[0]!
      .id;
  const ws = (
    await pool.query<{ id: string }>(`INSERT INTO workspaces (company_id, name) VALUES ($1, $2) RETURNING id`, [
      company,
      name,
    ])
  ).rows[0]!.id;
  const apiKey = await createKey(pool, ws, 'all', [...PERMISSIONS]);
  const bareKey = await createKey(pool, ws, 'none', []);
  return { companyId: company, workspaceId: ws, apiKey, bareKey };
}

export async function createKey(pool: Pool, workspaceId: string, name: string, permissions: string[]): Promise<string> {
  const secret = generateSecret('key');
  await pool.query(
    `INSERT INTO api_keys (workspace_id, name, key_hash, key_prefix, permissions) VALUES ($1, $2, $3, $4, $5)`,
    [workspaceId, name, hashSecret(secret), secretPrefix(secret), permissions],
  );
  return secret;
}

export async function createScimToken(pool: Pool, companyId: string, name = 'idp'): Promise<string> {
  const secret = generateSecret('scim');
  await pool.query(`INSERT INTO scim_tokens (company_id, name, token_hash, key_prefix) VALUES ($1, $2, $3, $4)`, [
    companyId,
    name,
    hashSecret(secret),
    secretPrefix(secret),
  ]);
  return secret;
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

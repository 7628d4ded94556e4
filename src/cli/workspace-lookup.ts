import type { Pool } from '../platform/db/pool.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface FoundWorkspace {
  id: string;
  name: string;
  companyId: string;
}

/** The workspace a command line names, by id or by name; a name several companies use must be given as an id. */
export async function findWorkspace(pool: Pool, nameOrId: string): Promise<FoundWorkspace> {
  const { rows } = await pool.query<FoundWorkspace>(
    `SELECT id::text, name, company_id::text AS "companyId" FROM workspaces WHERE ${UUID.test(nameOrId) ? 'id = $1::uuid' : 'name = $1'}`,
    [nameOrId],
  );
  if (rows.length === 0) throw new Error(`no workspace "${nameOrId}"`);
  if (rows.length > 1) throw new Error(`several workspaces are named "${nameOrId}": give its id instead`);
  return rows[0]!;
}

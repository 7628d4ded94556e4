import type { Pool } from '../../platform/db/pool.js';

/**
 * How many of a company's resources match a compiled filter (`where` over `params`, numbered from $2), and one page
 * of them by creation time: what a ListResponse and a root search page over. The page is not read when `limit` is 0
 * (`count=0` asks for the total alone).
 */
export async function companyPage<Row>(
  pool: Pool,
  resource: { table: string; columns: string },
  companyId: string,
  filter: { where: string; params: unknown[] },
  offset: number,
  limit: number,
): Promise<{ total: number; rows: Row[] }> {
  const { where, params } = filter;
  const [counted, page] = await Promise.all([
    pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${resource.table} WHERE company_id = $1 AND (${where})`, [
      companyId,
      ...params,
    ]),
    limit === 0
      ? { rows: [] as Row[] }
      : pool.query(
          `SELECT ${resource.columns} FROM ${resource.table} WHERE company_id = $1 AND (${where})
            ORDER BY created_at, id LIMIT $${params.length + 2} OFFSET $${params.length + 3}`,
          [companyId, ...params, limit, offset],
        ),
  ]);
  return { total: counted.rows[0]!.n, rows: page.rows as Row[] };
}

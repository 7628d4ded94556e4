import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { useTestEnv } from '../helpers/context.js';
import { callApi, type Method } from '../helpers/http.js';
import { drainCatalogQueue } from '../helpers/catalogs.js';

/**
 * The workspace file's catalog declaration and the API agree: the API may add fields (and catalogs) the file did not
 * name, and applying the file again never removes them, nor the items that use them.
 */

const env = useTestEnv({
  config: { RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '100000', RATE_LIMIT_CATALOG_FIELDS_SELECTIONS_PER_MINUTE: '100000' },
});
const tag = randomUUID().slice(0, 8);
const KEY = `ces_key_catalogs_${tag}_0000000000000`;

const file = (fields: string) => `
company:
  name: Catalog Co ${tag}
workspaces:
  - name: Catalog WS ${tag}
    api_keys:
      - { name: ops, secret: ${KEY}, permissions: all }
    catalogs:
      - name: products
        description: From the file
        fields:
${fields}
`;
const TWO_FIELDS = `          - { name: title, type: string }
          - { name: price, type: number }`;

const apply = (text: string) => applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(text));
const call = (method: Method, url: string, body?: unknown) => callApi(env.app, method, url, { key: KEY, body });
const catalogs = async () => (await call('GET', '/catalogs')).body.catalogs as Array<Record<string, unknown>>;
const fieldNames = async (name: string) =>
  ((await catalogs()).find((c) => c.name === name)!.fields as Array<{ name: string }>).map((f) => f.name);

describe('the workspace file and the catalog API', () => {
  it('a declared catalog is listed by the API, id first', async () => {
    await apply(file(TWO_FIELDS));
    expect(await catalogs()).toEqual([
      {
        description: 'From the file',
        fields: [
          { name: 'id', type: 'string' },
          { name: 'title', type: 'string' },
          { name: 'price', type: 'number' },
        ],
        name: 'products',
        num_items: 0,
        updated_at: expect.any(String),
      },
    ]);
  });

  it('applying the file again keeps the fields, catalogs and items the API added', async () => {
    expect(
      (await call('POST', '/catalogs/products/fields', { fields: [{ name: 'color', type: 'string' }] })).status,
    ).toBe(202);
    const created = await call('POST', '/catalogs', {
      catalogs: [{ name: 'api_only', description: 'made by the API', fields: [{ name: 'id', type: 'string' }] }],
    });
    expect(created.status).toBe(201);
    await drainCatalogQueue(env);
    expect((await call('PUT', '/catalogs/products/items/p1', { items: [{ title: 'Mug', color: 'red' }] })).status).toBe(
      200,
    );

    const again = await apply(file(TWO_FIELDS));
    expect(again.counts.catalogs).toEqual({ created: 0, updated: 0, unchanged: 1 });
    expect(await fieldNames('products')).toEqual(['id', 'title', 'price', 'color']);
    expect((await catalogs()).map((c) => c.name)).toEqual(['products', 'api_only']);
    const item = await call('GET', '/catalogs/products/items/p1');
    expect(item.body.items).toEqual([{ id: 'p1', title: 'Mug', color: 'red' }]);
  });

  it('a file that adds a field keeps the API one after it; a field the file names keeps the file type', async () => {
    await apply(file(`${TWO_FIELDS}\n          - { name: stock, type: number }`));
    const products = (await catalogs()).find((c) => c.name === 'products')!;
    expect(products.fields).toEqual([
      { name: 'id', type: 'string' },
      { name: 'title', type: 'string' },
      { name: 'price', type: 'number' },
      { name: 'stock', type: 'number' },
      { name: 'color', type: 'string' },
    ]);
    expect(products.description).toBe('From the file');
  });

  it('a field the file names comes back when applied after the API deleted it (the file declares it)', async () => {
    expect((await call('DELETE', '/catalogs/products/fields/stock')).status).toBe(202);
    await drainCatalogQueue(env);
    expect(await fieldNames('products')).toEqual(['id', 'title', 'price', 'color']);
    await apply(file(`${TWO_FIELDS}\n          - { name: stock, type: number }`));
    expect(await fieldNames('products')).toEqual(['id', 'title', 'price', 'stock', 'color']);
  });
});

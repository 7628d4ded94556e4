import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { bodyOrRaw, callApi, statusAndBody, type Method } from '../helpers/http.js';
import {
  catalogNotFoundBody,
  catalogState,
  CREATE_FIELDS,
  CREATE_ITEMS,
  CREATE_RESTAURANTS,
  CREATE_SELECTION,
  drainCatalogQueue,
  EDIT_ITEMS,
} from '../helpers/catalogs.js';

const env = useTestEnv({
  config: { RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '100000', RATE_LIMIT_CATALOG_FIELDS_SELECTIONS_PER_MINUTE: '100000' },
  workspaces: ['ws'],
});

const call = (method: Method, url: string, body?: unknown, key: string | null = env.ws.apiKey) =>
  callApi(env.app, method, url, { key, ...(body === undefined ? {} : bodyOrRaw(body)) });

const ids = (body: { errors: Array<{ id: string }> }) => body.errors.map((e) => e.id);
const item = async (id: string) => (await call('GET', `/catalogs/restaurants/items/${id}`)).body.items?.[0];
const fieldsOf = async (name: string) =>
  ((await call('GET', '/catalogs')).body.catalogs as Array<{ name: string; fields: Array<{ name: string }> }>)
    .find((c) => c.name === name)
    ?.fields.map((f) => f.name);

/** Sends a request that must be refused, and checks it changed nothing and queued nothing. */
async function refused(method: Method, url: string, body: unknown, status: number, expected: string[]) {
  const before = await catalogState(env, env.ws.workspaceId);
  const res = await call(method, url, body);
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.message).toBe('Invalid Request');
  expect(ids(res.body)).toEqual(expected);
  expect(await catalogState(env, env.ws.workspaceId)).toEqual(before);
  return res.body;
}

beforeAll(async () => {
  expect((await call('POST', '/catalogs', CREATE_RESTAURANTS)).status).toBe(201);
});

describe('POST /catalogs/{name}/items (asynchronous create)', () => {
  it('the example request: 202 {"message": "success"}, then the worker creates the three items', async () => {
    const res = await call('POST', '/catalogs/restaurants/items', CREATE_ITEMS);
    expect(statusAndBody(res)).toEqual({ status: 202, body: { message: 'success' } });
    expect(res.headers['x-ratelimit-limit']).toBe('16000');
    expect(await item('restaurant1')).toBeUndefined();
    await drainCatalogQueue(env);
    const list = await call('GET', '/catalogs/restaurants/items');
    expect(list.body.items.map((i: { id: string }) => i.id)).toEqual(['restaurant1', 'restaurant2', 'restaurant3']);
    expect(await item('restaurant1')).toEqual({ ...CREATE_ITEMS.items[0], Created_At: '2022-11-01T09:03:19.967Z' });
  });

  it('leaves an item that exists as it is, and creates the new ones', async () => {
    const res = await call('POST', '/catalogs/restaurants/items', {
      items: [
        { id: 'restaurant1', Name: 'Not this' },
        { id: 'restaurant4', Name: 'Restaurant4' },
      ],
    });
    expect(res.status).toBe(202);
    await drainCatalogQueue(env);
    expect((await item('restaurant1')).Name).toBe('Restaurant1');
    expect(await item('restaurant4')).toEqual({ id: 'restaurant4', Name: 'Restaurant4' });
  });

  it('refuses a bad request whole, with the item error ids, and queues nothing', async () => {
    await refused('POST', '/catalogs/restaurants/items', { items: [{ id: 'r9', Bogus: 1 }] }, 400, ['invalid-fields']);
    const many = { items: Array.from({ length: 51 }, (_, i) => ({ id: `r${i}` })) };
    await refused('POST', '/catalogs/restaurants/items', many, 400, ['request-includes-too-many-items']);
    await refused('POST', '/catalogs/restaurants/items', { items: [{ Name: 'x' }] }, 400, ['items-missing-ids']);
    await refused('POST', '/catalogs/restaurants/items', { items: 'x' }, 400, ['item-array-invalid']);
    const body = await refused('POST', '/catalogs/nope/items', { items: [{ id: 'a' }] }, 404, ['catalog-not-found']);
    expect(body).toEqual(catalogNotFoundBody('nope'));
    const bare = await call('POST', '/catalogs/restaurants/items', CREATE_ITEMS, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('catalogs.add_items');
  });
});

describe('fields (asynchronous)', () => {
  it('POST the example fields on a catalog without them: 202, then they are fields', async () => {
    const create = await call('POST', '/catalogs', {
      catalogs: [{ name: 'bare', description: 'no fields yet', fields: [{ name: 'id', type: 'string' }] }],
    });
    expect(create.status).toBe(201);
    const res = await call('POST', '/catalogs/bare/fields', CREATE_FIELDS);
    expect(statusAndBody(res)).toEqual({ status: 202, body: { message: 'success' } });
    expect(res.headers['x-ratelimit-limit']).toBe('100000');
    expect(await fieldsOf('bare')).toEqual(['id']);
    await drainCatalogQueue(env);
    expect(await fieldsOf('bare')).toEqual(['id', 'Name', 'Ratings', 'Loyalty_Program', 'Created_At']);
  });

  it('adds Open_Time to restaurants (for the edit example)', async () => {
    const res = await call('POST', '/catalogs/restaurants/fields', { fields: [{ name: 'Open_Time', type: 'time' }] });
    expect(res.status).toBe(202);
    await drainCatalogQueue(env);
    expect(await fieldsOf('restaurants')).toContain('Open_Time');
  });

  it('refusals: each with its id, nothing changed', async () => {
    const body = await refused('POST', '/catalogs/restaurants2/fields', CREATE_FIELDS, 404, ['catalog-not-found']);
    expect(body).toEqual(catalogNotFoundBody('restaurants2'));
    const fifty1 = { fields: Array.from({ length: 51 }, (_, i) => ({ name: `f${i}`, type: 'string' })) };
    await refused('POST', '/catalogs/restaurants/fields', fifty1, 400, ['request-includes-too-many-fields']);
    await refused('POST', '/catalogs/restaurants/fields', { fields: [{ name: 'Name', type: 'string' }] }, 400, [
      'field-names-not-unique',
    ]);
    await refused('POST', '/catalogs/restaurants/fields', { fields: [{ name: 'id', type: 'string' }] }, 400, [
      'field-names-not-unique',
    ]);
    await refused('POST', '/catalogs/restaurants/fields', { fields: [{ name: 'X', type: 'date' }] }, 400, [
      'invalid-field-types',
    ]);
    await refused('POST', '/catalogs/restaurants/fields', { fields: [{ name: 'a b', type: 'string' }] }, 400, [
      'invalid-field-names',
    ]);
    await refused('POST', '/catalogs/restaurants/fields', { fields: [] }, 400, ['invalid-fields']);
    await refused('POST', '/catalogs/restaurants/fields', '{"fields": [', 400, ['invalid-request']);
    // 490 more fields would take the catalog past 500.
    for (let n = 0; n < 9; n++) {
      const batch = { fields: Array.from({ length: 50 }, (_, i) => ({ name: `g${n}_${i}`, type: 'string' })) };
      expect((await call('POST', '/catalogs/bare/fields', batch)).status).toBe(202);
    }
    await drainCatalogQueue(env);
    const over = { fields: Array.from({ length: 46 }, (_, i) => ({ name: `h${i}`, type: 'string' })) };
    await refused('POST', '/catalogs/bare/fields', over, 400, ['catalog-exceeds-fields-limit']);
  });

  it('DELETE a field: 202, then it is gone from the catalog and from every item', async () => {
    expect(
      (await call('POST', '/catalogs/restaurants/fields', { fields: [{ name: 'Tmp', type: 'string' }] })).status,
    ).toBe(202);
    await drainCatalogQueue(env);
    expect((await call('PATCH', '/catalogs/restaurants/items/restaurant2', { items: [{ Tmp: 'x' }] })).status).toBe(
      200,
    );
    expect((await item('restaurant2')).Tmp).toBe('x');
    const res = await call('DELETE', '/catalogs/restaurants/fields/Tmp');
    expect(statusAndBody(res)).toEqual({ status: 202, body: { message: 'success' } });
    await drainCatalogQueue(env);
    expect(await fieldsOf('restaurants')).not.toContain('Tmp');
    expect(await item('restaurant2')).not.toHaveProperty('Tmp');
  });

  it('DELETE refusals: unknown catalog or field (404), id (404)', async () => {
    const body = await refused('DELETE', '/catalogs/nope/fields/Name', undefined, 404, ['catalog-not-found']);
    expect(body).toEqual(catalogNotFoundBody('nope'));
    await refused('DELETE', '/catalogs/restaurants/fields/Nope', undefined, 404, ['invalid-field-name']);
    await refused('DELETE', '/catalogs/restaurants/fields/id', undefined, 404, ['invalid-field-name']);
    const bare = await call('DELETE', '/catalogs/restaurants/fields/Name', undefined, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('catalogs.delete_fields');
  });
});

describe('PATCH /catalogs/{name}/items (asynchronous edit) and PATCH .../items/{id}', () => {
  it('the example request: 202, then fields set, $remove then $add on Top_Dishes, others kept', async () => {
    // The example removes "French Fries" from restaurant1: give it one first.
    const seed = { items: [{ Top_Dishes: ['Hamburger', 'French Fries'] }] };
    expect((await call('PATCH', '/catalogs/restaurants/items/restaurant1', seed)).status).toBe(200);
    const res = await call('PATCH', '/catalogs/restaurants/items', EDIT_ITEMS);
    expect(statusAndBody(res)).toEqual({ status: 202, body: { message: 'success' } });
    await drainCatalogQueue(env);
    expect(await item('restaurant1')).toEqual({
      ...CREATE_ITEMS.items[0],
      Name: 'Restaurant',
      Loyalty_Program: false,
      Top_Dishes: ['Hamburger', 'Biscuits', 'Coleslaw'],
      Created_At: '2022-11-01T09:03:19.967Z',
      Open_Time: '2021-09-03T09:03:19.967Z',
    });
    expect(await item('restaurant3')).toMatchObject({ City: 'San Francisco', Rating: 2, Name: 'Restaurant3' });
  });

  it('ignores ids that name no item', async () => {
    const res = await call('PATCH', '/catalogs/restaurants/items', { items: [{ id: 'ghost', Name: 'x' }] });
    expect(res.status).toBe(202);
    await drainCatalogQueue(env);
    expect((await call('GET', '/catalogs/restaurants/items/ghost')).status).toBe(404);
  });

  it('the single edit example: 200 {"message": "success"}, applied at once', async () => {
    const res = await call('PATCH', '/catalogs/restaurants/items/restaurant2', {
      items: [{ ...EDIT_ITEMS.items[0], id: undefined }],
    });
    expect(statusAndBody(res)).toEqual({ status: 200, body: { message: 'success' } });
    expect(await item('restaurant2')).toMatchObject({
      Name: 'Restaurant',
      City: 'New York',
      Top_Dishes: ['Hot Dog', 'Biscuits', 'Coleslaw'],
    });
  });

  it('refusals: each with its id, nothing changed', async () => {
    const ops = { $add: ['a'] };
    await refused('PATCH', '/catalogs/restaurants/items', { items: [{ id: 'restaurant1', Name: ops }] }, 400, [
      'invalid-keys-in-value-object',
    ]);
    await refused(
      'PATCH',
      '/catalogs/restaurants/items',
      { items: [{ id: 'restaurant1', Top_Dishes: { $add: [{}] } }] },
      400,
      ['unable-to-coerce-value'],
    );
    // The operators belong to the edit endpoints only.
    await refused('PUT', '/catalogs/restaurants/items', { items: [{ id: 'restaurant1', Top_Dishes: ops }] }, 400, [
      'invalid-keys-in-value-object',
    ]);
    await refused('PATCH', '/catalogs/restaurants/items', { items: [{ id: 'a', Bogus: 1 }] }, 400, ['invalid-fields']);
    await refused('PATCH', '/catalogs/restaurants/items', { items: [{ id: 'a' }, { id: 'a' }] }, 400, [
      'ids-not-unique',
    ]);
    await refused('PATCH', '/catalogs/restaurants/items/ghost', { items: [{ Name: 'x' }] }, 404, ['item-not-found']);
    await refused('PATCH', '/catalogs/restaurants/items/restaurant1', { items: [{ id: 'x', Name: 'x' }] }, 400, [
      'id-in-body',
    ]);
    await refused('PATCH', '/catalogs/restaurants/items/restaurant1', { items: [{}, {}] }, 400, [
      'request-includes-too-many-items',
    ]);
    await refused('PATCH', '/catalogs/nope/items/restaurant1', { items: [{ Name: 'x' }] }, 404, ['catalog-not-found']);
  });
});

describe('selections (asynchronous)', () => {
  it('POST the example selection: 202, then it is stored', async () => {
    const res = await call('POST', '/catalogs/restaurants/selections', CREATE_SELECTION);
    expect(statusAndBody(res)).toEqual({ status: 202, body: { message: 'success' } });
    await drainCatalogQueue(env);
    const { rows } = await env.ctx.pool.query(`SELECT name, definition FROM catalog_selections`);
    expect(rows).toEqual([{ name: 'favorite-restaurants', definition: { ...CREATE_SELECTION.selection } }]);
  });

  it('the older example without external_id, source, limit or sort is taken too', async () => {
    const {
      external_id: _e,
      source: _s,
      results_limit: _r,
      sort_field: _f,
      sort_order: _o,
      ...older
    } = CREATE_SELECTION.selection;
    const res = await call('POST', '/catalogs/restaurants/selections', { selection: { ...older, name: 'older' } });
    expect(res.status).toBe(202);
    await drainCatalogQueue(env);
    const { rows } = await env.ctx.pool.query(`SELECT name FROM catalog_selections ORDER BY name`);
    expect(rows.map((r) => r.name)).toEqual(['favorite-restaurants', 'older']);
  });

  it('refusals: each with its id, nothing changed', async () => {
    const base = CREATE_SELECTION.selection;
    const url = '/catalogs/restaurants/selections';
    const body = await refused('POST', '/catalogs/nope/selections', CREATE_SELECTION, 404, ['catalog-not-found']);
    expect(body).toEqual(catalogNotFoundBody('nope'));
    await refused('POST', url, CREATE_SELECTION, 400, ['selection-name-already-exists']);
    await refused('POST', url, { selection: 'x' }, 400, ['invalid-selection']);
    await refused('POST', url, { selection: { ...base, name: 'bad name' } }, 400, ['invalid-selection']);
    const filter = (f: unknown) => ({ selection: { ...base, name: 'n1', filters: [f] } });
    await refused('POST', url, filter({ field: 'City', operator: 'greater than', value: 'x' }), 400, [
      'selection-has-invalid-filter',
    ]);
    await refused('POST', url, filter({ field: 'Nope', operator: 'equals', value: 'x' }), 400, [
      'selection-has-invalid-filter',
    ]);
    await refused('POST', url, filter({ field: 'Rating', operator: 'equals', value: 'high' }), 400, [
      'selection-has-invalid-filter',
    ]);
    const five = Array.from({ length: 5 }, () => ({ field: 'City', operator: 'equals', value: 'NYC' }));
    await refused('POST', url, { selection: { ...base, name: 'n1', filters: five } }, 400, ['too-many-filters']);
    await refused('POST', url, { selection: { ...base, name: 'n1', results_limit: 51 } }, 400, [
      'selection-invalid-results-limit',
    ]);
    await refused('POST', url, { selection: { ...base, name: 'n1', sort_order: undefined } }, 400, ['invalid-sorting']);
    await refused('POST', url, { selection: { ...base, name: 'n1', sort_field: 'Nope' } }, 400, ['invalid-sort-field']);
    await refused('POST', url, { selection: { ...base, name: 'n1', sort_order: 'up' } }, 400, ['invalid-sort-order']);
  });

  it('a field a selection uses cannot be deleted; the selection can', async () => {
    await refused('DELETE', '/catalogs/restaurants/fields/Rating', undefined, 400, ['field-referenced-by-selection']);
    await refused('DELETE', '/catalogs/restaurants/selections/nope', undefined, 404, ['invalid-selection']);
    const res = await call('DELETE', '/catalogs/restaurants/selections/favorite-restaurants');
    expect(statusAndBody(res)).toEqual({ status: 202, body: { message: 'success' } });
    await drainCatalogQueue(env);
    const { rows } = await env.ctx.pool.query(`SELECT name FROM catalog_selections ORDER BY name`);
    expect(rows.map((r) => r.name)).toEqual(['older']);
    const bare = await call('DELETE', '/catalogs/restaurants/selections/older', undefined, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('catalogs.delete_selection');
  });
});

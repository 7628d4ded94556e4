import { catalogBatchJob } from '../../jobs/catalog-batch.js';
import { CATALOG_BATCH_QUEUE } from '../../src/platform/queues/catalog-batch.js';
import type { TestEnv } from './context.js';
import { waitFor } from './cli.js';

/**
 * Fixtures from the public API's catalog pages (create catalog, create/edit items, create fields, create selection),
 * as its documentation gives them, and the helpers the catalog tests share.
 */

export const RESTAURANT_FIELDS = [
  { name: 'id', type: 'string' },
  { name: 'Name', type: 'string' },
  { name: 'City', type: 'string' },
  { name: 'Cuisine', type: 'string' },
  { name: 'Rating', type: 'number' },
  { name: 'Loyalty_Program', type: 'boolean' },
  { name: 'Location', type: 'object' },
  { name: 'Top_Dishes', type: 'array' },
  { name: 'Created_At', type: 'time' },
];

/** "Create catalog": the example request. */
export const CREATE_RESTAURANTS = {
  catalogs: [{ name: 'restaurants', description: 'My Restaurants', fields: RESTAURANT_FIELDS }],
};

/** "Create multiple catalog items": the example request. */
export const CREATE_ITEMS = {
  items: [
    {
      id: 'restaurant1',
      Name: 'Restaurant1',
      City: 'New York',
      Cuisine: 'American',
      Rating: 5,
      Loyalty_Program: true,
      Location: { Latitude: 33.6112, Longitude: -117.8711 },
      Top_Dishes: ['Hamburger', 'Deluxe Cheeseburger'],
      Created_At: '2022-11-01T09:03:19.967+00:00',
    },
    {
      id: 'restaurant2',
      Name: 'Restaurant2',
      City: 'New York',
      Cuisine: 'American',
      Rating: 10,
      Loyalty_Program: true,
      Location: { Latitude: 40.7413, Longitude: -73.9764 },
      Top_Dishes: ['Hot Dog', 'French Fries'],
      Created_At: '2022-11-02T09:03:19.967+00:00',
    },
    {
      id: 'restaurant3',
      Name: 'Restaurant3',
      City: 'New York',
      Cuisine: 'American',
      Rating: 3,
      Loyalty_Program: false,
      Location: { Latitude: 40.7489, Longitude: -73.9972 },
      Top_Dishes: ['Buffalo Wings', 'Philly Cheesesteak'],
      Created_At: '2022-11-03T09:03:19.967+00:00',
    },
  ],
};

/** "Edit multiple catalog items": the example request (its Open_Time field is added to the catalog first). */
export const EDIT_ITEMS = {
  items: [
    {
      id: 'restaurant1',
      Name: 'Restaurant',
      Loyalty_Program: false,
      Location: { Latitude: 33.6112, Longitude: -117.8711 },
      Top_Dishes: { $add: ['Biscuits', 'Coleslaw'], $remove: ['French Fries'] },
      Open_Time: '2021-09-03T09:03:19.967+00:00',
    },
    { id: 'restaurant3', City: 'San Francisco', Rating: 2, Top_Dishes: ['Buffalo Wings', 'Philly Cheesesteak'] },
  ],
};

/** "Create catalog fields": the example request. */
export const CREATE_FIELDS = {
  fields: [
    { name: 'Name', type: 'string' },
    { name: 'Ratings', type: 'number' },
    { name: 'Loyalty_Program', type: 'boolean' },
    { name: 'Created_At', type: 'time' },
  ],
};

/** "Create catalog selection": the newest page's example request. */
export const CREATE_SELECTION = {
  selection: {
    name: 'favorite-restaurants',
    description: 'Favorite restaurants in NYC',
    external_id: 'favorite-nyc-restaurants',
    source: 'custom',
    filters: [
      { field: 'City', operator: 'equals', value: 'NYC' },
      { field: 'Rating', operator: 'greater than', value: 7 },
    ],
    results_limit: 10,
    sort_field: 'Rating',
    sort_order: 'desc',
  },
};

/** The public API's catalog-not-found body for a catalog name. */
export const catalogNotFoundBody = (name: string) => ({
  errors: [
    {
      id: 'catalog-not-found',
      message: 'Could not find catalog',
      parameters: ['catalog_name'],
      parameter_values: [name],
    },
  ],
  message: 'Invalid Request',
});

/** Runs a worker of the catalog-batch queue until the queue is drained, then stops it. */
export async function drainCatalogQueue(env: TestEnv): Promise<void> {
  const queue = env.ctx.queues.get(CATALOG_BATCH_QUEUE);
  const workers = env.startWorkers([catalogBatchJob]);
  await waitFor(
    async () => {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      return Object.values(c).every((n) => n === 0);
    },
    15_000,
    50,
  );
  await workers.close(5_000);
}

/** Every job the catalog queue has seen (completed ones are kept), to prove a refused request queued nothing. */
export async function catalogJobTotal(env: TestEnv): Promise<number> {
  const counts = await env.ctx.queues
    .get(CATALOG_BATCH_QUEUE)
    .getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized');
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

/** What the catalog tables hold for a workspace: catalogs, items, selections and recorded changes. */
export async function catalogState(env: TestEnv, workspaceId: string): Promise<unknown> {
  const q = async (sql: string) => (await env.ctx.pool.query(sql, [workspaceId])).rows;
  return {
    catalogs: await q(
      `SELECT name, description, fields, updated_at FROM catalogs WHERE workspace_id = $1 ORDER BY name`,
    ),
    items: await q(
      `SELECT c.name, i.item_id, i.data, i.version, i.deleted FROM catalog_items i JOIN catalogs c ON c.id = i.catalog_id
        WHERE c.workspace_id = $1 ORDER BY 1, 2`,
    ),
    selections: await q(
      `SELECT c.name, s.name AS selection, s.definition FROM catalog_selections s JOIN catalogs c ON c.id = s.catalog_id
        WHERE c.workspace_id = $1 ORDER BY 1, 2`,
    ),
    batches: await q(`SELECT version, op FROM catalog_batches WHERE workspace_id = $1 ORDER BY version`),
    jobs: await catalogJobTotal(env),
  };
}

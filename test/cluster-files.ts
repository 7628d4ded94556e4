/**
 * The part of the suite that runs again on a 3-master Redis Cluster (vitest project `cluster`, `npm run test:cluster`):
 * every queue and Lua script is used by one of these files.
 */
export const CLUSTER_FILES = [
  'test/exports/export-local.test.ts',
  'test/exports/export-request.test.ts',
  'test/exports/export-crash.test.ts',
  'test/exports/export-schedules.test.ts',
  'test/ingest/ingest-track.test.ts',
  'test/ingest/ingest-crash.test.ts',
  'test/ingest/ingest-import.test.ts',
  'test/catalogs/catalog-batch.test.ts',
  'test/endpoints/live-activities.test.ts',
  'test/endpoints/canvas-schedules.test.ts',
  'test/http/rate-limit-window.test.ts',
  'test/scim/scim-rate-limit.test.ts',
  'test/platform/reconcile-redis-loss.test.ts',
  'test/http/platform-http.test.ts',
  'test/platform/redis-cluster.test.ts',
  'test/cdi/cdi-table.test.ts',
  'test/events/event-export.test.ts',
  'test/endpoints/segment-series.test.ts',
];

import { Counter, Gauge, Histogram } from 'prom-client';
import type { Metrics } from '../../platform/metrics.js';

/** Ingestion's own metrics, registered once per process registry beside the shared ones (ces_ingest_objects_total...). */
export interface IngestMetrics {
  lag: Gauge;
  batchObjects: Histogram;
  importPosition: Gauge<'import_id'>;
  unmatched: Counter<'source'>;
  deadLetters: Counter<'source'>;
}

const byRegistry = new WeakMap<Metrics, IngestMetrics>();

export function ingestMetrics(metrics: Metrics): IngestMetrics {
  let m = byRegistry.get(metrics);
  if (!m) {
    const registers = [metrics.registry];
    m = {
      lag: new Gauge({
        name: 'ces_ingest_lag_seconds',
        help: 'Age of the oldest accepted /users/track request in the batch a worker just applied (queue lag)',
        registers,
      }),
      batchObjects: new Histogram({
        name: 'ces_ingest_batch_objects',
        help: 'Objects applied per ingestion transaction',
        buckets: [75, 750, 2_500, 7_500, 15_000, 30_000, 60_000],
        registers,
      }),
      importPosition: new Gauge({
        name: 'ces_import_records',
        help: 'Records handled and committed so far by a running bulk import',
        labelNames: ['import_id'] as const,
        registers,
      }),
      unmatched: new Counter({
        name: 'ces_ingest_unmatched_total',
        help: 'Accepted objects whose user did not exist and could not be created (user_alias, service_id, email or _update_existing_only)',
        labelNames: ['source'] as const,
        registers,
      }),
      deadLetters: new Counter({
        name: 'ces_ingest_dead_letters_total',
        help: 'Staged rows (track) or import records (import) PostgreSQL refused at apply time, moved to ingest_dead_letters',
        labelNames: ['source'] as const,
        registers,
      }),
    };
    byRegistry.set(metrics, m);
  }
  return m;
}

import {
  AggregatorRegistry,
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';

/** One process's metrics as prom-client's JSON, which crosses an IPC channel intact. */
export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

/**
 * Prometheus metrics of one process. The API serves them at /metrics; a worker-only process serves them on
 * WORKER_METRICS_PORT. Queue depth is read from Redis at scrape time, so any process reports the same depths.
 */
export class Metrics {
  readonly registry = new Registry();
  /** Other processes whose metrics this one's /metrics includes: the worker process of `ces start`. */
  readonly peers: (() => Promise<MetricsSnapshot>)[] = [];

  readonly httpDuration = new Histogram({
    name: 'ces_http_request_duration_seconds',
    help: 'HTTP request latency by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly jobDuration = new Histogram({
    name: 'ces_job_duration_seconds',
    help: 'Job processing time by queue and outcome',
    labelNames: ['queue', 'outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
    registers: [this.registry],
  });

  readonly jobFailures = new Counter({
    name: 'ces_job_failures_total',
    help: 'Failed job attempts by queue',
    labelNames: ['queue'] as const,
    registers: [this.registry],
  });

  readonly exportShardReads = new Counter({
    name: 'ces_export_shard_reads_total',
    help: 'Export shards by where they read members: replica (EXPORT_DATABASE_URL) or primary (no replica set, or it was behind or away)',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });

  readonly queueDepth = new Gauge({
    name: 'ces_queue_jobs',
    help: 'Jobs in each queue by state',
    labelNames: ['queue', 'state'] as const,
    registers: [this.registry],
  });

  readonly exportUsers = new Counter({
    name: 'ces_export_users_total',
    help: 'Users written to export parts',
    registers: [this.registry],
  });

  readonly exportParts = new Counter({
    name: 'ces_export_parts_total',
    help: 'Export parts uploaded, by destination',
    labelNames: ['destination'] as const,
    registers: [this.registry],
  });

  readonly exportBytes = new Counter({
    name: 'ces_export_bytes_total',
    help: 'Compressed bytes of export parts uploaded',
    registers: [this.registry],
  });

  readonly ingestObjects = new Counter({
    name: 'ces_ingest_objects_total',
    help: 'Objects applied to profiles by ingestion, by kind and source',
    labelNames: ['kind', 'source'] as const,
    registers: [this.registry],
  });

  readonly ingestRejected = new Counter({
    name: 'ces_ingest_rejected_total',
    help: 'Objects refused by validation, by kind and source',
    labelNames: ['kind', 'source'] as const,
    registers: [this.registry],
  });

  readonly eventExportEvents = new Counter({
    name: 'ces_event_export_events_total',
    help: 'Events written to files by event exports, by export id',
    labelNames: ['export'] as const,
    registers: [this.registry],
  });

  readonly eventExportLag = new Gauge({
    name: 'ces_event_export_lag_seconds',
    help: 'Age of the oldest event an event export has not yet written, by export id (0 when none waits)',
    labelNames: ['export'] as const,
    registers: [this.registry],
  });

  readonly eventExportFailures = new Counter({
    name: 'ces_event_export_failures_total',
    help: 'Passes of an event export that its destination refused (a write, read or delete of its bucket failed), by export id',
    labelNames: ['export'] as const,
    registers: [this.registry],
  });

  readonly eventExportFailing = new Gauge({
    name: 'ces_event_export_failing',
    help: "1 while an event export's destination refuses writes, else 0, by export id (read from PostgreSQL when /metrics is served)",
    labelNames: ['export'] as const,
    registers: [this.registry],
  });

  readonly userDataCommands = new Counter({
    name: 'ces_user_data_commands_total',
    help: 'User-data commands applied (delete, merge, identify, alias_new, rename, remove), by outcome (applied, or why nothing changed)',
    labelNames: ['command', 'outcome'] as const,
    registers: [this.registry],
  });

  /** Values read when /metrics is served (as queue depths are), by name: see `onRender`. */
  private readonly renderHooks = new Map<string, () => Promise<void>>();

  constructor(withDefaults = true) {
    if (withDefaults) collectDefaultMetrics({ register: this.registry, prefix: 'ces_' });
  }

  /**
   * Sets metrics read from elsewhere (PostgreSQL) each time `render` runs: every process then reports the same values,
   * where a value set by whichever worker ran last would be stale in the others. A hook that fails or takes over 2 s
   * leaves the last values.
   */
  onRender(name: string, hook: () => Promise<void>): void {
    this.renderHooks.set(name, hook);
  }

  /** The exposition text: this process's metrics, summed with its peers' (as prom-client's cluster mode does). */
  async render(): Promise<string> {
    await Promise.all(
      [...this.renderHooks.values()].map((hook) =>
        Promise.race([hook().catch(() => {}), new Promise<void>((r) => setTimeout(r, 2000).unref())]),
      ),
    );
    if (this.peers.length === 0) return this.registry.metrics();
    const snapshots = await Promise.all([this.registry.getMetricsAsJSON(), ...this.peers.map((peer) => peer())]);
    return AggregatorRegistry.aggregate(snapshots.filter((s) => s.length > 0)).metrics();
  }
}

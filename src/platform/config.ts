import { z } from 'zod';

/**
 * Every environment variable the service reads, parsed once at start.
 * The README's configuration table is generated from these descriptions (`npm run docs:config`).
 */
const int = (def: number) => z.coerce.number().int().nonnegative().default(def);
const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** A connection string: parsed as a URL of one of `protocols`. The message never repeats the value (it may hold a password). */
const connectionUrl = (protocols: string[], def: string) => connectionUrlText(protocols).default(def);
const connectionUrlText = (protocols: string[]) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    { message: `must be a URL of the form ${protocols.map((p) => `${p}//...`).join(' or ')}` },
  );

export const ConfigSchema = z.object({
  NODE_ENV: z
    .enum(['development', 'production', 'test'])
    .default('development')
    .describe('Runtime mode; `production` refuses the built-in development secrets.'),
  HOST: z.string().default('0.0.0.0').describe('Interface the API listens on.'),
  PORT: int(3000).describe('TCP port the API listens on.'),
  PUBLIC_BASE_URL: z
    .url()
    .optional()
    .describe('Base address clients reach the API at; used in download URLs. Default `http://127.0.0.1:<PORT>`.'),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .describe('pino log level.'),

  DATABASE_URL: connectionUrl(['postgres:', 'postgresql:'], 'postgres://postgres@127.0.0.1:5432/ces').describe(
    'PostgreSQL connection string (the system of record). With PostgreSQL on the same host, a Unix socket (`postgresql:///ces?host=/var/run/postgresql`) costs less CPU than loopback TCP.',
  ),
  DATABASE_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]*$/)
    .default('public')
    .describe('PostgreSQL schema holding every table; lets several installs (or test runs) share one database.'),
  DATABASE_POOL_SIZE: int(10).describe('Connections per process in the PostgreSQL pool.'),
  DATABASE_CONNECT_TIMEOUT_MS: int(10_000).describe(
    'How long opening a PostgreSQL connection, or waiting for a free one of the pool, may take before the request fails with 503 (a job attempt fails and is retried); 0 waits forever.',
  ),
  EXPORT_DATABASE_URL: connectionUrlText(['postgres:', 'postgresql:'])
    .optional()
    .describe(
      'PostgreSQL that export shards read segment members from, typically a hot standby of DATABASE_URL (default: DATABASE_URL). Everything that writes stays on DATABASE_URL. See docs/scaling.md.',
    ),
  EXPORT_MAX_REPLICA_LAG_SECONDS: int(300).describe(
    'How long an export shard waits for EXPORT_DATABASE_URL to replay what the primary had committed when the export was requested; past it the shard reads from the primary.',
  ),
  MIGRATE_ON_START: bool(true).describe('Apply pending migrations when `serve`, `worker` or `start` begins.'),

  REDIS_URL: connectionUrl(['redis:', 'rediss:'], 'redis://127.0.0.1:6379').describe(
    'Redis connection string (queues, locks, rate-limit counters).',
  ),
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/)
    .default('ces')
    .describe(
      'Prefix of every Redis key and BullMQ queue this install uses; in cluster mode it is used as a hash tag, `{ces}`, so that every key lies in one slot.',
    ),
  REDIS_CLUSTER_NODES: z
    .string()
    .regex(
      /^\s*(?:(?:rediss?:\/\/[^\s,]+)|(?:[A-Za-z0-9.\-\[\]:]+:\d{1,5}))(?:\s*,\s*(?:(?:rediss?:\/\/[^\s,]+)|(?:[A-Za-z0-9.\-\[\]:]+:\d{1,5})))*\s*$/,
      'must be comma-separated host:port (or redis://[:password@]host:port) seed nodes',
    )
    .optional()
    .describe(
      "Redis Cluster seed nodes, comma-separated `host:port` (or `redis[s]://[:password@]host:port`; the first entry's password and TLS apply to all). When set, the service runs in cluster mode and REDIS_URL is not used. See docs/scaling.md.",
    ),

  BODY_LIMIT_BYTES: int(8 * 1024 * 1024).describe('Largest request body accepted; larger bodies get 413.'),
  STARTUP_TIMEOUT_SECONDS: int(10)
    .pipe(z.number().min(1))
    .describe(
      '`serve`, `worker`, `start` and `migrate` exit (code 1) when PostgreSQL or Redis (`migrate`: PostgreSQL) cannot be reached within this many seconds of starting.',
    ),
  SHUTDOWN_TIMEOUT_MS: int(30_000).describe(
    'How long SIGTERM waits for in-flight requests and running jobs before closing anyway.',
  ),
  ADMIN_USER: z
    .string()
    .min(1)
    .optional()
    .describe('User name for the queue dashboard at /admin/queues (disabled when unset).'),
  ADMIN_PASSWORD: z.string().min(8).optional().describe('Password for the queue dashboard (at least 8 characters).'),
  METRICS_ENABLED: bool(true).describe('Serve Prometheus metrics at /metrics.'),
  WORKER_METRICS_PORT: int(0).describe(
    'Port on which a worker-only process (`ces worker`) serves /metrics; 0 disables it.',
  ),

  RATE_LIMIT_DEFAULT_PER_HOUR: int(250_000).describe(
    'Default rate limit per workspace and endpoint (spec Limits), requests per hour.',
  ),
  RATE_LIMIT_SCIM_PER_DAY: int(5_000).describe(
    'SCIM requests per company per day, shared by POST, PUT, GET and DELETE.',
  ),
  RATE_LIMIT_ALIAS_PER_MINUTE: int(20_000).describe(
    '/users/alias/new, /users/alias/update, /users/delete, /users/identify and /users/merge requests per workspace per minute, shared (as the public API shares them).',
  ),
  RATE_LIMIT_EXPORT_IDS_PER_MINUTE: int(2_500).describe('/users/export/ids requests per workspace per minute.'),
  RATE_LIMIT_CDI_LIST_PER_MINUTE: int(50).describe('GET /cdi/integrations requests per workspace per minute.'),
  RATE_LIMIT_CDI_SYNC_PER_MINUTE: int(20).describe(
    'POST /cdi/integrations/{id}/sync requests per workspace per minute.',
  ),
  RATE_LIMIT_CDI_STATUS_PER_MINUTE: int(100).describe(
    'GET /cdi/integrations/{id}/job_sync_status requests per workspace per minute.',
  ),
  RATE_LIMIT_EXTERNAL_IDS_PER_MINUTE: int(1_000).describe(
    '/users/external_ids/rename and /users/external_ids/remove requests per workspace per minute, each.',
  ),
  RATE_LIMIT_TRACK_PER_MINUTE: int(250_000).describe(
    '/users/track requests per workspace per minute (not in the spec).',
  ),
  RATE_LIMIT_TRACK_SYNC_PER_MINUTE: int(500).describe(
    '/users/track/sync requests per workspace per minute (the public API applies 500).',
  ),
  RATE_LIMIT_CATALOG_ASYNC_PER_MINUTE: int(16_000).describe(
    'Asynchronous catalog item requests per workspace per minute, shared.',
  ),
  RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: int(50).describe(
    'Synchronous catalog requests (catalogs listed, created, deleted; single items) per workspace per minute, shared.',
  ),
  RATE_LIMIT_CATALOG_FIELDS_SELECTIONS_PER_MINUTE: int(50).describe(
    'Asynchronous catalog field and selection requests per workspace per minute, shared.',
  ),
  RATE_LIMIT_PREFERENCE_CENTER_PER_MINUTE: int(1_000).describe(
    'Preference center list and detail requests per workspace per minute.',
  ),
  RATE_LIMIT_PREFERENCE_CENTER_WRITE_PER_MINUTE: int(10).describe(
    'Preference center creates, and updates, per workspace per minute, each endpoint counted on its own (the public API applies 10).',
  ),
  RATE_LIMIT_PREFERENCE_CENTER_URL_PER_MINUTE: int(1_000).describe(
    'Preference center URL requests (GET /preference_center/v1/{id}/url/{userID}) per workspace per minute.',
  ),
  RATE_LIMIT_CUSTOM_DATA_LISTS_PER_HOUR: int(1_000).describe(
    'Requests per workspace per hour shared by the lists of custom data, as the public API shares them: GET /custom_attributes, /events, /events/list and /purchases/product_list.',
  ),
  RATE_LIMIT_SUBSCRIPTION_SET_PER_MINUTE: int(5_000).describe(
    '/subscription/status/set and /v2/subscription/status/set requests per workspace per minute, shared (as the public API shares them).',
  ),

  LOCAL_STORE_DIR: z
    .string()
    .default('./data/bucket')
    .describe('Directory of the built-in local object store (exports without a bucket destination).'),
  DOWNLOAD_URL_SECRET: z
    .string()
    .min(16)
    .default('development-only-download-secret')
    .describe('HMAC key signing export download URLs; set the same value on every API process.'),
  PREFERENCE_CENTER_URL_SECRET: z
    .string()
    .min(16)
    .optional()
    .describe(
      "HMAC key signing users' preference center page URLs; set the same value on every API process. Default: DOWNLOAD_URL_SECRET (each signs its own kind of link).",
    ),
  PREFERENCE_CENTER_URL_TTL_SECONDS: int(90 * 86_400).describe(
    "Lifetime of a user's preference center URL (and of the form it serves) from when it was generated.",
  ),
  DOWNLOAD_URL_TTL_SECONDS: int(4 * 3600).describe('Lifetime of an export download URL after the export is ready.'),
  EXPORT_MAX_RUNNING_PER_COMPANY: int(100).describe('Segment exports that may run at once per company (spec: 100).'),
  EXPORT_LOCK_LEASE_MS: int(30_000).describe(
    "Lease of a running export's segment lock; a live worker renews it, a crashed one lets it lapse.",
  ),
  EXPORT_QUEUED_LEASE_MS: int(3_600_000).describe(
    'Lease of the segment lock while the export waits in the queue for a worker.',
  ),
  EXPORT_SHARD_BUCKETS: int(2_500).describe(
    'random_bucket values (of 10,000) per export shard job; smaller means more parallelism.',
  ),
  EXPORT_SHARD_ATTEMPTS: int(5).describe(
    'Attempts per export shard job (with exponential backoff) before the export fails.',
  ),
  EXPORT_INCREMENTAL_RETENTION_DAYS: int(14).describe(
    "Days an export's member list is kept so that a later export can name it in changes_since; the latest ready export of each segment keeps its list whatever its age.",
  ),
  TOMBSTONE_RETENTION_DAYS: int(30)
    .pipe(z.number().min(2))
    .describe(
      "Days (at least 2) a deleted user's tombstone (service_id and external_id, for incremental exports' removed parts) is kept, whatever export is kept; an incremental export whose base is older than this less a day runs as a full export (docs/privacy.md).",
    ),
  EXPORT_GZIP_LEVEL: int(1).describe('Compression level (1-9) for export parts; 1 is fastest.'),
  CALLBACK_ALLOW_PRIVATE: bool(false).describe('Allow export callbacks to loopback and private-network addresses.'),
  CALLBACK_ALLOWED_HOSTS: z
    .string()
    .default('')
    .describe('Comma-separated host names that callbacks may reach even when private.'),
  CALLBACK_MAX_ATTEMPTS: int(8).describe('Attempts per export callback before giving up (exponential backoff).'),

  LIVE_ACTIVITY_DELIVERY: z
    .enum(['record'])
    .default('record')
    .describe(
      'Delivery adapter of live activity pushes; `record` keeps them in live_activity_pushes (no APNs adapter yet).',
    ),
  CANVAS_SCHEDULE_MAX_LATENESS_SECONDS: int(6 * 3600).describe(
    'A scheduled canvas firing that runs later than this (workers were down) is recorded as missed instead of sent.',
  ),
  CANVAS_SCHEDULE_SWEEP_SECONDS: int(60).describe(
    'How often the canvas-schedule worker arms schedules the workspace file added or changed (0: only at worker start).',
  ),
  CANVAS_ENTRY_BATCH_SIZE: int(5_000).describe('Profiles entered into a canvas per statement when a schedule fires.'),
  WORKER_PROCESS_NICE: int(10)
    .pipe(z.number().max(19))
    .describe(
      'Niceness (0-19) `ces start` gives its worker process, so that when the cores are short the API answers first; 0 for equal priority.',
    ),
  WORKER_CONCURRENCY: int(2).describe('Jobs one worker process runs at once per queue.'),
  WORKER_LOCK_DURATION_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .optional()
    .describe(
      "How long a job a worker has taken stays its own without being renewed (the worker renews it every half of this): a worker that dies leaves its jobs to another once this has passed and a stalled-job check has run. Unset, each queue's own: 20 s for `segment-export` and `export-shard`, 30 s for the others. Set the same value for every process.",
    ),
  WORKER_STALLED_INTERVAL_MS: z.coerce
    .number()
    .int()
    .min(100)
    .optional()
    .describe(
      "How often the workers look for jobs whose lock has lapsed (their worker died) and hand them to another; such a job is taken again within this lock's duration and two of these intervals. Unset, each queue's own: 5 s for `segment-export` and `export-shard`, 30 s for the others. Set the same value for every process.",
    ),
  RECONCILE_INTERVAL_SECONDS: int(30)
    .pipe(z.number().min(1))
    .describe(
      'How often the reconciler (one worker process at a time) compares unfinished work in PostgreSQL with Redis and queues again what Redis lost (docs/operations.md).',
    ),
  INGEST_BATCH_MAX_JOBS: int(3000).describe(
    "Staged track rows (a request's objects of one partition, at most 225) an ingestion worker coalesces into one transaction per partition. More means fewer profile writes under load (a profile is rewritten once a batch), and longer waits for `/users/alias/update` and `/email/status`, which take the same workspace lock.",
  ),
  INGEST_PARTITIONS: int(2)
    .pipe(z.number().min(1).max(16))
    .describe(
      'Partitions (1-16) a workspace\'s ingestion is split into by user; each applies on its own PostgreSQL connection at once. One partition applies on one core; more use more cores (and connections) while batches are applied. Where the API and PostgreSQL share two cores, 1 leaves a core to the acknowledgements (docs/ingestion.md, "Acknowledgement latency"). Set the same value for every process.',
    ),
  CDI_BATCH_ROWS: int(10_000)
    .pipe(z.number().min(1).max(1_000_000))
    .describe('Rows a Cloud Data Ingestion sync applies (and commits its progress with) per transaction.'),
  CDI_BATCH_BYTES: int(8 * 1024 * 1024)
    .pipe(
      z
        .number()
        .min(1024 * 1024)
        .max(1024 * 1024 * 1024),
    )
    .describe(
      'Bytes of source rows (mostly their PAYLOAD, at most 1 MB each) at which a Cloud Data Ingestion batch ends before CDI_BATCH_ROWS rows, so that a source of large payloads syncs in bounded memory: the sync holds about two batches at once, one applied while the next is read and validated.',
    ),
  CDI_APPLY_LANES: int(2)
    .pipe(z.number().min(1).max(8))
    .describe(
      'Connections (1-8) a table sync applies each batch\'s attribute rows on at once, split by user identifier; each lane commits its rows with their progress. A batch with a DELETED row applies on one. 1 applies every batch in one transaction (docs/cdi.md, "Speed").',
    ),
  EVENT_LOG_RETENTION_DAYS: int(7)
    .pipe(z.number().min(1).max(365))
    .describe(
      "Days (1-365) the event log keeps, counted in whole UTC days: older days' partitions are dropped by the reconciler's pass. Delivered files are the long-term store; an event export can backfill or re-deliver only what the log still holds (docs/events.md).",
    ),
  EVENTS_INSTANCE: z
    .string()
    .regex(/^[a-z0-9-]{1,40}$/, 'letters, digits and -, at most 40')
    .default('ces')
    .describe(
      "The `<instance>` of an Avro event export's keys (`dataexport.<instance>.S3.integration.<id>/...`), as Currents names its cluster.",
    ),
  EVENTS_ENVIRONMENT: z
    .string()
    .regex(/^[a-z0-9-]{1,40}$/, 'letters, digits and -, at most 40')
    .default('local')
    .describe("The `<environment>` folder of an Avro event export's keys (`.../version=<n>/<environment>/...`)."),
  EVENT_EXPORT_SWEEP_SECONDS: int(5)
    .pipe(z.number().min(1).max(300))
    .describe(
      "How often (1-300 s) the workers look at every event export for a file to close: a file closes at its export's `flush_seconds` or `max_events_per_file`, and is written within this long after.",
    ),
  EVENT_EXPORT_RETRY_MAX_SECONDS: int(300)
    .pipe(z.number().min(5).max(3600))
    .describe(
      'The longest wait (5-3600 s) between passes of an event export whose destination refuses writes: the wait starts at 5 s and doubles with each refused pass up to this. Changing the export in the workspace file ends the wait (docs/events.md, "Operating").',
    ),
  WORKSPACE_STATS_INTERVAL_SECONDS: int(3_600)
    .pipe(z.number().min(60).max(86_400))
    .describe(
      "How often (60-86400 s) the workers count every workspace's segments (each day's last count is that day's size in /segments/data_series) and list the custom attribute names its profiles hold (GET /custom_attributes). Each pass reads each workspace's profiles: a longer interval costs less and answers later.",
    ),
  SEGMENT_SIZE_NOW_MAX_AGE_SECONDS: int(60)
    .pipe(z.number().min(0).max(3600))
    .describe(
      "How old (0-3600 s) today's point of /segments/data_series may be: a segment's members are counted at most once in this long by each API process (callers meanwhile share the count), since a count reads every profile of the workspace. 0 counts on every call.",
    ),
  INGEST_IMPORT_BATCH: int(200_000).describe(
    'Events a bulk import applies (and commits its position with) per transaction. Larger batches rewrite each profile fewer times (1M events over 100k users: 14.8k events/s at 20,000, 27.8k at 200,000) and hold more in memory.',
  ),
});

export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {}

/** Parses the environment; the error names every offending variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const picked: Record<string, string> = {};
  for (const key of Object.keys(ConfigSchema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') picked[key] = value;
  }
  const parsed = ConfigSchema.safeParse(picked);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const config = parsed.data;
  if (config.NODE_ENV === 'production' && config.DOWNLOAD_URL_SECRET === 'development-only-download-secret') {
    throw new ConfigError('Invalid configuration:\n  DOWNLOAD_URL_SECRET: must be set in production');
  }
  if ((config.ADMIN_USER === undefined) !== (config.ADMIN_PASSWORD === undefined)) {
    throw new ConfigError(
      'Invalid configuration:\n  ADMIN_PASSWORD: ADMIN_USER and ADMIN_PASSWORD must be set together',
    );
  }
  return config;
}

export function publicBaseUrl(config: Config): string {
  return (config.PUBLIC_BASE_URL ?? `http://127.0.0.1:${config.PORT}`).replace(/\/$/, '');
}

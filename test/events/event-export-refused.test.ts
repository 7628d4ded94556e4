import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventExportJob } from '../../jobs/event-export.js';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { refusalMessage } from '../../src/pipelines/events/export-failures.js';
import { cliEnvOf, runCli, waitFor } from '../helpers/cli.js';
import { captureLogs, createTestEnv, type TestEnv } from '../helpers/context.js';
import { allDelivered, expectExactlyOnce, isEventFile, readEventFile } from '../helpers/event-delivery.js';
import { startS3rver, type RunningS3 } from '../helpers/s3rver.js';
import { bearer } from '../helpers/seed.js';

/**
 * Destinations that refuse writes (docs/events.md, "Operating"), on a real S3 server (s3rver): one export holding wrong
 * credentials, one naming a bucket that does not exist. While they refuse, /users/track answers 201 and profiles are
 * applied; each export is reported failing (`ces events status`, /metrics) and warned about once (not per retry), with
 * no credential in any line. Then the workspace file gives the right credentials and the bucket is created: both
 * recover, and every accepted event is in exactly one file.
 */

let env: TestEnv;
let s3: RunningS3;
let s3Client: S3Client;
const logs = captureLogs();
const tag = randomUUID().slice(0, 8);
const WORKSPACE = `Refused ${tag}`;
const API_KEY = `ces_key_evrefused_${tag}_000000000000`;
const WRONG_KEY_ID = `WRONGKEY${tag}`;
const WRONG_SECRET = `wrong-secret-${tag}`;
const BAD_CREDENTIALS = randomUUID();
const NO_BUCKET = randomUUID();
const LATER_BUCKET = `later-${tag}`;

function workspaceFile(credentials: { accessKeyId: string; secretAccessKey: string }): string {
  const json = (v: unknown) => JSON.stringify(v);
  return `
company: { name: ${WORKSPACE} }
workspaces:
  - name: ${WORKSPACE}
    api_keys: [{ name: ops, secret: ${API_KEY}, permissions: all }]
    event_exports:
      - id: ${BAD_CREDENTIALS}
        name: wrong credentials
        destination: ${json({ ...s3.destination, credentials, prefix: 'refused/' })}
        format: ndjson
        flush_seconds: 1
        max_events_per_file: 3
      - id: ${NO_BUCKET}
        name: missing bucket
        destination: ${json({ ...s3.destination, bucket: LATER_BUCKET, prefix: 'later/' })}
        format: ndjson
        flush_seconds: 1
        max_events_per_file: 3
`;
}

beforeAll(async () => {
  [env, s3] = await Promise.all([
    createTestEnv(
      { EVENT_EXPORT_SWEEP_SECONDS: '1', EVENT_EXPORT_RETRY_MAX_SECONDS: '20', LOG_LEVEL: 'info' },
      { logDestination: logs.destination },
    ),
    startS3rver('lake'),
  ]);
  s3Client = new S3Client({
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: s3.destination.credentials,
  });
  await applyWorkspaceFile(
    env.ctx.pool,
    parseWorkspaceFile(workspaceFile({ accessKeyId: WRONG_KEY_ID, secretAccessKey: WRONG_SECRET })),
  );
  env.startWorkers([trackIngestJob, eventExportJob]);
}, 120_000);
afterAll(async () => {
  s3Client?.destroy();
  await env?.close();
  await s3?.close();
});

let tracked = 0;
/** One /users/track request of `n` events for three people, each setting `step`: it must be accepted at once. */
async function track(n: number, step: number): Promise<void> {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/track',
    headers: { ...bearer(API_KEY), 'content-type': 'application/json' },
    payload: JSON.stringify({
      attributes: ['ann', 'ben', 'cy'].map((u) => ({ external_id: `${u}-${tag}`, step })),
      events: Array.from({ length: n }, (_, i) => ({
        external_id: `${['ann', 'ben', 'cy'][i % 3]}-${tag}`,
        name: 'clicked',
        time: new Date().toISOString(),
        properties: { n: tracked + i },
      })),
    }),
  });
  expect(res.statusCode, res.body).toBe(201);
  tracked += n;
}

/** The people's profiles as /users/export/ids gives them: `step` and their count of `clicked`. */
async function profiles(): Promise<{ id: string; step: unknown; clicked: number }[]> {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/export/ids',
    headers: { ...bearer(API_KEY), 'content-type': 'application/json' },
    payload: JSON.stringify({
      external_ids: ['ann', 'ben', 'cy'].map((u) => `${u}-${tag}`),
      fields_to_export: ['external_id', 'custom_attributes', 'custom_events'],
    }),
  });
  expect(res.statusCode, res.body).toBe(201);
  const users = (res.json() as { users: Record<string, unknown>[] }).users;
  return users
    .map((u) => ({
      id: String(u.external_id),
      step: (u.custom_attributes as Record<string, unknown> | undefined)?.step,
      clicked:
        (u.custom_events as { name: string; count: number }[] | undefined)?.find((e) => e.name === 'clicked')?.count ??
        0,
    }))
    .sort((a, b) => a.id.localeCompare(b.id));
}

async function appliedUpTo(step: number): Promise<boolean> {
  const ps = await profiles();
  return ps.length === 3 && ps.every((p) => p.step === step) && ps.reduce((s, p) => s + p.clicked, 0) === tracked;
}

interface FailureRow {
  failures: number;
  last_error_code: string;
  last_error: string;
  first_failed_at: Date;
  last_failed_at: Date;
  next_attempt_at: Date;
}

async function failure(exportId: string): Promise<FailureRow | undefined> {
  const { rows } = await env.ctx.pool.query<FailureRow>(`SELECT * FROM event_export_failures WHERE export_id = $1`, [
    exportId,
  ]);
  return rows[0];
}

/** Parsed log lines with the given message and export. */
const linesOf = (msg: string, exportId: string) =>
  logs.lines
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === msg && l.eventExportId === exportId);
const REFUSED = 'event export destination refuses writes; retrying with backoff (logged at most once a minute)';
const ACCEPTED = 'event export destination accepts writes again';

const metrics = async () => (await env.app.inject({ method: 'GET', url: '/metrics' })).body;
const metricValue = (body: string, name: string, exportId: string) =>
  Number(new RegExp(`^${name}\\{export="${exportId}"\\} (\\S+)$`, 'm').exec(body)?.[1] ?? NaN);

async function status(): Promise<string> {
  const res = await runCli(['events', 'status', '--workspace', WORKSPACE], cliEnvOf(env.config));
  expect(res.code, res.stderr).toBe(0);
  return res.stdout;
}

/** The event files under a prefix of a bucket, read. */
async function filesIn(bucket: string, prefix: string): Promise<Map<string, Record<string, unknown>[]>> {
  const files = new Map<string, Record<string, unknown>[]>();
  let token: string | undefined;
  do {
    const page = await s3Client.send(
      new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
    );
    for (const o of page.Contents ?? []) {
      if (!isEventFile('ndjson', o.Key!)) continue;
      const got = await s3Client.send(new GetObjectCommand({ Bucket: bucket, Key: o.Key! }));
      files.set(o.Key!, await readEventFile('ndjson', Buffer.from(await got.Body!.transformToByteArray())));
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return files;
}

describe('an event export whose destination refuses writes', () => {
  it('keeps ingestion going, reports and warns once while refused, then delivers every event once', async () => {
    await track(7, 1);
    await waitFor(() => appliedUpTo(1), 60_000);
    // Passes are refused and retried after 5 s, then 10 s (the backoff is capped at 20 s here): three refusals of
    // each, well within a minute, over sweeps every second.
    await waitFor(async () => ((await failure(BAD_CREDENTIALS))?.failures ?? 0) >= 3, 60_000, 200);
    await waitFor(async () => ((await failure(NO_BUCKET))?.failures ?? 0) >= 3, 60_000, 200);

    // Ingestion does not wait for the destinations: accepted at once, applied to the profiles.
    await track(5, 2);
    await waitFor(() => appliedUpTo(2), 60_000);
    expect((await profiles()).map((p) => p.step)).toEqual([2, 2, 2]);

    for (const [exportId, code] of [
      [BAD_CREDENTIALS, /^(InvalidAccessKeyId|HTTP 403)$/],
      [NO_BUCKET, /^NoSuchBucket$/],
    ] as const) {
      const f = (await failure(exportId))!;
      expect(f.last_error_code).toMatch(code);
      // One warning for the refusals of a minute, not one per retry.
      const warned = linesOf(REFUSED, exportId);
      const minutes = (f.last_failed_at.getTime() - f.first_failed_at.getTime()) / 60_000;
      expect(f.failures).toBeGreaterThanOrEqual(3);
      // The next attempt waits 5 s doubled with each refusal, at most EVENT_EXPORT_RETRY_MAX_SECONDS.
      const wait = (f.next_attempt_at.getTime() - f.last_failed_at.getTime()) / 1000;
      expect(wait).toBe(Math.min(5 * 2 ** (f.failures - 1), 20));
      expect(warned.length).toBeGreaterThanOrEqual(1);
      expect(warned.length).toBeLessThanOrEqual(Math.floor(minutes) + 1);
      expect(warned.length).toBeLessThan(f.failures);
      expect(warned[0]).toMatchObject({
        level: 40,
        provider: 's3',
        bucket: exportId === NO_BUCKET ? LATER_BUCKET : 'lake',
        errorCode: f.last_error_code,
      });
      expect(typeof warned[0]!.workspaceId).toBe('string');
      const body = await metrics();
      expect(metricValue(body, 'ces_event_export_failing', exportId)).toBe(1);
      expect(metricValue(body, 'ces_event_export_failures_total', exportId)).toBeGreaterThanOrEqual(3);
      // The events wait in the log: the lag grows.
      expect(metricValue(body, 'ces_event_export_lag_seconds', exportId)).toBeGreaterThan(0);
    }
    // Refusals are not job failures: no stack per attempt.
    expect(logs.lines.filter((l) => l.includes('job attempt failed'))).toEqual([]);
    const refusedStatus = await status();
    expect(refusedStatus).toMatch(new RegExp(`${BAD_CREDENTIALS} .*destination: FAILING`));
    expect(refusedStatus).toMatch(new RegExp(`${NO_BUCKET} .*destination: FAILING`));
    expect(refusedStatus).toContain('last error NoSuchBucket');
    // No credential in a line, a stored error or the status.
    for (const text of [logs.lines.join(''), refusedStatus, JSON.stringify(await failure(BAD_CREDENTIALS))]) {
      expect(text).not.toContain(WRONG_SECRET);
      expect(text).not.toContain(WRONG_KEY_ID);
    }

    // Fixed: the right credentials (tried at once: the export changed), the bucket created (tried at its next attempt,
    // at most 20 s later).
    await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(workspaceFile(s3.destination.credentials)));
    await s3Client.send(new CreateBucketCommand({ Bucket: LATER_BUCKET }));
    await track(4, 3);
    await waitFor(() => appliedUpTo(3), 60_000);
    for (const exportId of [BAD_CREDENTIALS, NO_BUCKET])
      await waitFor(async () => !(await failure(exportId)) && (await allDelivered(env.ctx.pool, exportId)), 60_000);

    const delivered = [
      await expectExactlyOnce(env.ctx.pool, BAD_CREDENTIALS, await filesIn('lake', 'refused/')),
      await expectExactlyOnce(env.ctx.pool, NO_BUCKET, await filesIn(LATER_BUCKET, 'later/')),
    ];
    expect(delivered.map((d) => d.events)).toEqual([tracked, tracked]);
    const body = await metrics();
    for (const exportId of [BAD_CREDENTIALS, NO_BUCKET]) {
      expect(linesOf(ACCEPTED, exportId)).toHaveLength(1);
      expect(metricValue(body, 'ces_event_export_failing', exportId)).toBe(0);
    }
    const fixedStatus = await status();
    expect(fixedStatus).toMatch(new RegExp(`${BAD_CREDENTIALS} .*destination: ok`));
    expect(fixedStatus).toMatch(new RegExp(`${NO_BUCKET} .*destination: ok`));
    expect(fixedStatus).not.toContain('FAILING');
  }, 240_000);

  // s3rver's messages never repeat a credential; a store's may (a signature error quoting what it signed, a key file's
  // parse error): what is stored and logged is the message with every credential string of the destination removed.
  it("removes the destination's credentials from the error it stores and logs", () => {
    const secret = `s3-secret-${tag}`;
    const privateKey = `-----BEGIN PRIVATE KEY-----${tag}-----END PRIVATE KEY-----`;
    const s3Message = refusalMessage(new Error(`string to sign with ${secret} and AKIAABCDEFGHIJKLMNOP refused`), {
      ...s3.destination,
      prefix: '',
      credentials: { accessKeyId: 'AKIAABCDEFGHIJKLMNOP', secretAccessKey: secret },
    });
    expect(s3Message).toBe('string to sign with [redacted] and [redacted] refused');
    const gcsMessage = refusalMessage(new Error(`cannot parse ${privateKey}\n of sa@p.iam`), {
      provider: 'gcs',
      bucket: 'b',
      projectId: 'p',
      prefix: '',
      credentials: { client_email: 'sa@p.iam', private_key: privateKey },
    });
    expect(gcsMessage).toBe('cannot parse [redacted] of [redacted]');
    expect(refusalMessage(new Error('x'.repeat(2000)), null)).toHaveLength(500);
  });
});

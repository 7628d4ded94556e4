import { existsSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { cliEnvOf, runCli } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment, exportedIdCounts, insertProfiles, waitForExport } from '../helpers/export-fixtures.js';

/* `ces export` as a batch scheduler runs it: a real process, its output and its exit code. */

const MEMBERS = 3_000;
const env = useTestEnv({ config: { EXPORT_SHARD_ATTEMPTS: '1' }, workspaces: ['ws', 'broken'] });

beforeAll(async () => {
  env.startWorkers([segmentExportJob, exportShardJob]);
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'us');
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, MEMBERS);
  // A workspace whose bucket cannot be reached: its exports fail.
  await createSegment(env.ctx.pool, env.broken.workspaceId, 'us');
  await insertProfiles(env.ctx.pool, env.broken.workspaceId, 100_001, 10);
  const unreachable = {
    provider: 's3',
    bucket: 'nowhere',
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:9',
    credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
  };
  await env.ctx.pool.query(`UPDATE workspaces SET export_destination = $2 WHERE id = $1`, [
    env.broken.workspaceId,
    JSON.stringify(unreachable),
  ]);
});

const cliEnv = () => cliEnvOf(env.config);
const workspaceName = async (id: string) =>
  (await env.ctx.pool.query<{ name: string }>('SELECT name FROM workspaces WHERE id = $1', [id])).rows[0]!.name;

describe('ces export', () => {
  it('--wait follows the export to ready, prints the manifest key and download URL, and exits 0', async () => {
    const name = await workspaceName(env.ws.workspaceId);
    const r = await runCli(
      [
        'export',
        '--workspace',
        name,
        '--segment',
        'us',
        '--fields',
        'external_id,email',
        '--format',
        'gzip',
        '--rows-per-part',
        '1000',
        '--wait',
      ],
      cliEnv(),
      90_000,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/export \S+ of segment us in workspace .+: queued/);
    // Four shards (the default 2,500 buckets) of about 750 members: one part each at 1,000 lines a part.
    expect(r.stdout).toContain(`ready: ${MEMBERS.toLocaleString('en-US')} users in 4 part(s)`);
    const manifestKey = /manifest: (\S+)/.exec(r.stdout)?.[1];
    expect(manifestKey).toMatch(/^segment-export\/us\/\d{4}-\d{2}-\d{2}\/\S+\/manifest\.json$/);
    const dir = path.dirname(path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), manifestKey!));
    expect(existsSync(path.join(dir, 'manifest.json'))).toBe(true);
    // The built-in store's files, by their path on this machine.
    expect(r.stdout).toContain(`files: ${dir} (the built-in store)`);
    const manifest = JSON.parse(
      await import('node:fs/promises').then((fs) => fs.readFile(path.join(dir, 'manifest.json'), 'utf8')),
    );
    const counts = await exportedIdCounts(dir, manifest.parts);
    expect(counts.size).toBe(MEMBERS);
    expect(r.stdout).toMatch(
      /download url: http:\/\/127\.0\.0\.1:\d+\/downloads\/segment-export\/\S+\.zip\?signature=[0-9a-f]{64}/,
    );
  });

  it('--changes-since last exports only what changed since the latest ready export, and exits 1 when there is none', async () => {
    await env.ctx.pool.query(
      `UPDATE profiles SET first_name = 'changed' WHERE workspace_id = $1 AND external_id IN ('ext-5', 'ext-6')`,
      [env.ws.workspaceId],
    );
    const r = await runCli(
      [
        'export',
        '--workspace',
        env.ws.workspaceId,
        '--segment',
        'us',
        '--fields',
        'external_id',
        '--format',
        'gzip',
        '--changes-since',
        'last',
        '--wait',
      ],
      cliEnv(),
      90_000,
    );
    expect(r.code, r.stderr).toBe(0);
    const manifestKey = /manifest: (\S+)/.exec(r.stdout)?.[1];
    const dir = path.dirname(path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), manifestKey!));
    const manifest = JSON.parse(
      await import('node:fs/promises').then((fs) => fs.readFile(path.join(dir, 'manifest.json'), 'utf8')),
    );
    expect(manifest.changes_since).toMatch(/^[0-9a-f-]{36}-\d+$/);
    // It says which export it took as the base.
    expect(r.stdout).toContain(
      `incremental: the changes since export ${manifest.changes_since} (--changes-since last: the segment's latest ready export)`,
    );
    expect([...(await exportedIdCounts(dir, manifest.parts)).keys()].sort()).toEqual(['ext-5', 'ext-6']);
    const none = await runCli(
      [
        'export',
        '--workspace',
        env.broken.workspaceId,
        '--segment',
        'us',
        '--fields',
        'external_id',
        '--changes-since',
        'last',
      ],
      cliEnv(),
    );
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/has no ready export to be relative to/);
  }, 120_000);

  it('without --wait, queues the export (here as Parquet, in the hive layout), says how to follow it, and exits 0 at once', async () => {
    const r = await runCli(
      [
        'export',
        '--workspace',
        env.ws.workspaceId,
        '--segment',
        'us',
        '--fields',
        'external_id',
        '--format',
        'parquet',
        '--layout',
        'hive',
      ],
      cliEnv(),
    );
    expect(r.code, r.stderr).toBe(0);
    const prefix = /export (\S+) of segment/.exec(r.stdout)?.[1];
    expect(r.stdout).toContain(`follow it with: GET /users/export/status?object_prefix=${prefix}`);
    const done = await waitForExport(env, env.ws.apiKey, prefix!);
    expect(done.status).toBe('ready');
    const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(done.key_prefix));
    const manifest = JSON.parse(
      await import('node:fs/promises').then((fs) => fs.readFile(path.join(dir, 'manifest.json'), 'utf8')),
    );
    expect(manifest.output_format).toBe('parquet');
    expect(manifest.parts.length).toBeGreaterThan(0);
    expect(manifest.parts.every((p: { file: string }) => /^part-\d{5,}\.parquet$/.test(p.file))).toBe(true);
    expect(String(done.key_prefix)).toMatch(
      new RegExp(`^segment-export/segment_id=us/export_date=\\d{4}-\\d{2}-\\d{2}/export_id=${prefix}$`),
    );
  });

  it('exits 1 with the reason when the export fails', async () => {
    const r = await runCli(
      ['export', '--workspace', env.broken.workspaceId, '--segment', 'us', '--fields', 'external_id', '--wait'],
      cliEnv(),
      120_000,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/export \S+ failed: .+/);
  });

  it('refuses what the API refuses, and wrong arguments, with exit code 1 and no export recorded', async () => {
    const before = (await env.ctx.pool.query('SELECT count(*)::int AS n FROM exports')).rows[0].n;
    const cases: [string[], RegExp][] = [
      [
        ['--workspace', env.ws.workspaceId, '--segment', 'nope', '--fields', 'external_id'],
        /segment_id "nope" does not name a segment of this workspace/,
      ],
      [
        ['--workspace', 'no-such-workspace', '--segment', 'us', '--fields', 'external_id'],
        /no workspace "no-such-workspace"/,
      ],
      [['--workspace', env.ws.workspaceId, '--segment', 'us', '--fields', 'not_a_field'], /not_a_field/],
      [
        ['--workspace', env.ws.workspaceId, '--segment', 'us', '--fields', 'external_id', '--format', 'csv'],
        /must be 'zip', 'gzip' or 'parquet'/,
      ],
      [
        ['--workspace', env.ws.workspaceId, '--segment', 'us', '--fields', 'external_id', '--layout', 'flat'],
        /must be 'spec' or 'hive'/,
      ],
      [['--workspace', env.ws.workspaceId, '--segment', 'us'], /--fields/],
      [
        ['--workspace', env.ws.workspaceId, '--segment', 'us', '--fields', 'external_id', '--rows-per-part', '10'],
        /rows_per_part must be at least 1000/,
      ],
      [
        [
          '--workspace',
          env.ws.workspaceId,
          '--segment',
          'us',
          '--fields',
          'external_id',
          '--callback',
          'http://169.254.169.254/latest',
        ],
        /callback/i,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(['export', ...args], cliEnv());
      expect(r.code, `${args.join(' ')}: ${r.stdout}`).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
    expect((await env.ctx.pool.query('SELECT count(*)::int AS n FROM exports')).rows[0].n).toBe(before);
  });
});

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { bulkImportJob } from '../../jobs/bulk-import.js';
import { runImport } from '../../src/pipelines/ingest/import/run-import.js';
import { createImport } from '../../src/pipelines/ingest/import/imports.js';
import { LocalStore } from '../../src/platform/storage/local-store.js';
import { useTestEnv } from '../helpers/context.js';
import { cliEnvOf, runCli, waitFor } from '../helpers/cli.js';
import { entries } from '../helpers/aggregates.js';
import { callApi, statusAndBody } from '../helpers/http.js';

const env = useTestEnv({ config: { INGEST_IMPORT_BATCH: '3' }, workspaces: ['ws'] });
let store: LocalStore;

beforeAll(async () => {
  store = LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, env.ws);
});

const line = (external_id: string, name: string, time: string) => JSON.stringify({ external_id, name, time });

const api = (method: 'GET' | 'POST', url: string, body?: unknown, key = env.ws.apiKey) =>
  callApi(env.app, method, url, { key, body }).then(statusAndBody);

async function eventsOf(externalId: string) {
  const { rows } = await env.ctx.pool.query(
    'SELECT custom_events FROM profiles WHERE workspace_id = $1 AND external_id = $2',
    [env.ws.workspaceId, externalId],
  );
  return entries(rows[0]?.custom_events);
}

async function readRejects(key: string) {
  const text = (await (await store.get(key)).toArray()).map(String).join('');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

const deps = () => ({ pool: env.ctx.pool, config: env.config, log: env.ctx.log, metrics: env.ctx.metrics });

describe('bulk import of an NDJSON file', () => {
  it('is started over HTTP, applied by a worker, with bad lines written to a rejects file beside it', async () => {
    const file = [
      line('i1', 'open', '2024-01-02T00:00:00Z'),
      '{"external_id": "i1", "name": "open", "time": "2024-01-01T00:00:00Z"}',
      '',
      '{not json',
      line('i2', 'open', 'yesterday'),
      JSON.stringify({ external_id: 'i2', name: 'buy', time: '2024-03-01', properties: { $bad: 1 } }),
      line('i2', 'open', '2024-01-05T00:00:00Z'),
      JSON.stringify({ external_id: 'i3', name: 'open', time: '2024-01-05', _update_existing_only: true }),
      line('i1', 'close', '2024-02-01T00:00:00Z'),
    ].join('\n');
    await store.put('imports/day1.ndjson', Buffer.from(`${file}\n`));
    const started = await api('POST', '/users/import', { key: 'imports/day1.ndjson' });
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({
      message: 'success',
      status: 'queued',
      format: 'ndjson',
      store: 'local',
      rejects_key: 'imports/day1.ndjson.rejects.ndjson',
    });
    env.startWorkers([bulkImportJob]);
    let status: { status: string } = started.body;
    await waitFor(async () => {
      status = (await api('GET', `/users/import/${started.body.import_id}`)).body;
      return status.status === 'completed' || status.status === 'failed';
    });
    expect(status).toMatchObject({
      status: 'completed',
      records_handled: 9,
      events_applied: 4,
      events_unmatched: 1,
      rejected: 3,
      error: null,
    });
    expect(await eventsOf('i1')).toEqual([
      { name: 'close', first: '2024-02-01T00:00:00.000Z', last: '2024-02-01T00:00:00.000Z', count: 1 },
      { name: 'open', first: '2024-01-01T00:00:00.000Z', last: '2024-01-02T00:00:00.000Z', count: 2 },
    ]);
    expect(await eventsOf('i2')).toEqual([
      { name: 'open', first: '2024-01-05T00:00:00.000Z', last: '2024-01-05T00:00:00.000Z', count: 1 },
    ]);
    expect(await eventsOf('i3')).toBeUndefined();
    const rejects = await readRejects('imports/day1.ndjson.rejects.ndjson');
    expect(rejects.map((r) => r.line)).toEqual([4, 5, 6]);
    expect(rejects[0]).toMatchObject({
      line: 4,
      reason: expect.stringMatching(/^malformed JSON/),
      object: '{not json',
    });
    expect(rejects[1]).toMatchObject({
      reason: expect.stringMatching(/'time' must be ISO 8601/),
      object: { external_id: 'i2', name: 'open', time: 'yesterday' },
    });
    expect(rejects[2].reason).toMatch(/must not begin with '\$'/);
  });

  it('resumes an interrupted import at its last committed position, applying nothing twice', async () => {
    const lines = Array.from({ length: 20 }, (_, i) =>
      i === 7 ? 'oops' : line(`r${i % 4}`, 'tick', `2024-01-01T00:00:${String(i).padStart(2, '0')}Z`),
    );
    await store.put('imports/resume.ndjson', Buffer.from(lines.join('\n')));
    const created = await createImport(
      deps(),
      env.ws.workspaceId,
      { source: 'local', key: 'imports/resume.ndjson' },
      'test',
    );
    let commits = 0;
    await expect(
      runImport(deps(), created.import_id, {
        onProgress: () => {
          // The process "dies" after its second committed batch (batches of 3 events).
          if (++commits === 2) throw new Error('simulated crash');
        },
      }),
    ).rejects.toThrow('simulated crash');
    const mid = (await api('GET', `/users/import/${created.import_id}`)).body;
    expect(mid).toMatchObject({ status: 'running', records_handled: 6, events_applied: 6, rejected: 0 });
    const done = await runImport(deps(), created.import_id);
    expect(done).toMatchObject({ status: 'completed', records_handled: 20, events_applied: 19, rejected: 1 });
    const total = (
      await env.ctx.pool.query<{ n: number }>(
        `SELECT sum((e->>'count')::int)::int AS n FROM profiles p, jsonb_each(p.custom_events) AS c(name, e) WHERE p.workspace_id = $1 AND p.external_id LIKE 'r_'`,
        [env.ws.workspaceId],
      )
    ).rows[0]!.n;
    expect(total).toBe(19);
    expect(await readRejects('imports/resume.ndjson.rejects.ndjson')).toEqual([
      { line: 8, reason: expect.stringMatching(/malformed JSON/), object: 'oops' },
    ]);
    // Running a completed import again changes nothing.
    expect((await runImport(deps(), created.import_id)).events_applied).toBe(19);
  });

  it('resumes each partition at its own position when one committed a batch and another did not', async () => {
    const lines = Array.from({ length: 30 }, (_, i) =>
      line(`pp${i % 10}`, 'tick', `2024-01-01T00:00:${String(i).padStart(2, '0')}Z`),
    );
    await store.put('imports/parts.ndjson', Buffer.from(lines.join('\n')));
    const created = await createImport(
      deps(),
      env.ws.workspaceId,
      { source: 'local', key: 'imports/parts.ndjson' },
      'test',
    );
    // Partition 1's transaction fails once it would pass line 12; partition 0's commits of the same batches go through.
    await env.ctx.pool.query(`
      CREATE FUNCTION fail_part_1() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.part = 1 AND NEW.position > 12 THEN RAISE EXCEPTION 'simulated failure'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER fail_part_1 BEFORE UPDATE ON import_partitions FOR EACH ROW EXECUTE FUNCTION fail_part_1();`);
    await expect(runImport(deps(), created.import_id)).rejects.toThrow('simulated failure');
    const { rows } = await env.ctx.pool.query<{ part: number; position: number }>(
      'SELECT part, position FROM import_partitions WHERE import_id = $1 ORDER BY part',
      [created.import_id],
    );
    expect(rows).toHaveLength(2);
    expect(rows[0]!.position).toBeGreaterThan(rows[1]!.position);
    expect((await api('GET', `/users/import/${created.import_id}`)).body.records_handled).toBe(rows[1]!.position);

    await env.ctx.pool.query('DROP TRIGGER fail_part_1 ON import_partitions; DROP FUNCTION fail_part_1()');
    // Resumed with another batch size, so that its batches straddle the positions the first run left.
    const resumed = await runImport(
      { ...deps(), config: { ...env.config, INGEST_IMPORT_BATCH: 4 } },
      created.import_id,
    );
    expect(resumed).toMatchObject({ status: 'completed', records_handled: 30, events_applied: 30, rejected: 0 });
    const { rows: counts } = await env.ctx.pool.query<{ external_id: string; n: number }>(
      `SELECT external_id, sum((e->>'count')::int)::int AS n FROM profiles p, jsonb_each(p.custom_events) AS c(name, e)
        WHERE p.workspace_id = $1 AND p.external_id LIKE 'pp%' GROUP BY external_id`,
      [env.ws.workspaceId],
    );
    expect(counts).toHaveLength(10);
    for (const c of counts) expect(c.n, c.external_id).toBe(3);
  });

  it('resumes an import left by a version without partitions from its recorded position', async () => {
    const lines = Array.from({ length: 12 }, (_, i) =>
      line(`old${i % 3}`, 'tick', `2024-01-01T00:00:${String(i).padStart(2, '0')}Z`),
    );
    await store.put('imports/legacy.ndjson', Buffer.from(lines.join('\n')));
    const created = await createImport(
      deps(),
      env.ws.workspaceId,
      { source: 'local', key: 'imports/legacy.ndjson' },
      'test',
    );
    // What an earlier version left after committing its first 6 records (their events applied to the profiles).
    await env.ctx.pool.query(`UPDATE imports SET status = 'running', position = 6, events_applied = 6 WHERE id = $1`, [
      created.import_id,
    ]);
    await runImport({ ...deps(), config: { ...env.config, INGEST_IMPORT_BATCH: 1000 } }, created.import_id);
    const status = (await api('GET', `/users/import/${created.import_id}`)).body;
    expect(status).toMatchObject({ status: 'completed', records_handled: 12, events_applied: 12, rejected: 0 });
    // Only the 6 records after the position were applied by this run.
    const { rows } = await env.ctx.pool.query<{ n: number }>(
      `SELECT coalesce(sum((e->>'count')::int), 0)::int AS n FROM profiles p, jsonb_each(p.custom_events) AS c(name, e) WHERE p.workspace_id = $1 AND p.external_id LIKE 'old_'`,
      [env.ws.workspaceId],
    );
    expect(rows[0]!.n).toBe(6);
  });

  it('reads gzipped NDJSON and one streamed JSON array', async () => {
    await store.put(
      'imports/z.ndjson.gz',
      gzipSync(Buffer.from([line('gz', 'a', '2024-01-01'), line('gz', 'a', '2024-01-02')].join('\n'))),
    );
    const gz = await createImport(deps(), env.ws.workspaceId, { source: 'local', key: 'imports/z.ndjson.gz' }, 'test');
    expect(await runImport(deps(), gz.import_id)).toMatchObject({
      status: 'completed',
      events_applied: 2,
      rejects_key: 'imports/z.ndjson.rejects.ndjson',
    });
    const array = [
      { external_id: 'arr', name: 'a', time: '2024-01-01' },
      { external_id: 'arr', name: 'a', time: 'bad' },
      { external_id: 'arr', name: 'b', time: '2024-01-03' },
      { external_id: 'arr', name: 'a', time: '2024-01-09' },
    ];
    await store.put('imports/list.json', Buffer.from(JSON.stringify(array, null, 2)));
    const js = await createImport(deps(), env.ws.workspaceId, { source: 'local', key: 'imports/list.json' }, 'test');
    expect(js.format).toBe('json');
    expect(await runImport(deps(), js.import_id)).toMatchObject({
      status: 'completed',
      records_handled: 4,
      events_applied: 3,
      rejected: 1,
    });
    expect(await readRejects('imports/list.json.rejects.ndjson')).toEqual([
      { line: 2, reason: expect.stringMatching(/'time'/), object: array[1] },
    ]);
    expect(await eventsOf('arr')).toEqual([
      { name: 'a', first: '2024-01-01T00:00:00.000Z', last: '2024-01-09T00:00:00.000Z', count: 2 },
      { name: 'b', first: '2024-01-03T00:00:00.000Z', last: '2024-01-03T00:00:00.000Z', count: 1 },
    ]);
  });

  it('fails an unreadable JSON document with a clear error and no retry', async () => {
    await store.put('imports/broken.json', Buffer.from('{"not": "an array"}'));
    const started = await api('POST', '/users/import', { key: 'imports/broken.json' });
    expect(started.status).toBe(201);
    let status: { status: string; error: string | null } = started.body;
    await waitFor(async () => {
      status = (await api('GET', `/users/import/${started.body.import_id}`)).body;
      return status.status === 'failed' || status.status === 'completed';
    });
    expect(status.status).toBe('failed');
    expect(status.error).toMatch(/not a readable JSON array/);
  });

  it('refuses bad requests and unknown ids, and changes nothing', async () => {
    const count = async () =>
      (await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM imports')).rows[0]!.n;
    const before = await count();
    const cases: [unknown, number, RegExp][] = [
      [{}, 400, /key is required/],
      [{ key: '' }, 400, /key must not be empty/],
      [{ key: '../etc/passwd' }, 400, /without \.\./],
      [{ key: 'imports/missing.ndjson' }, 404, /No object "imports\/missing\.ndjson"/],
      [{ key: 'imports/day1.ndjson', source: 'ftp' }, 400, /source/],
      [{ key: 'imports/day1.ndjson', format: 'csv' }, 400, /format/],
      [{ key: 'imports/day1.ndjson', source: 'bucket' }, 400, /needs a bucket/],
      [{ key: 'imports/day1.ndjson', extra: 1 }, 400, /extra|Unrecognized/i],
    ];
    for (const [body, status, message] of cases) {
      const r = await api('POST', '/users/import', body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(r.body.message).toMatch(message);
    }
    expect((await api('POST', '/users/import', { key: 'imports/day1.ndjson' }, env.ws.bareKey)).status).toBe(401);
    expect((await api('POST', '/users/import', { key: 'imports/day1.ndjson' }, 'nope')).status).toBe(401);
    expect(await count()).toBe(before);
    expect((await api('GET', '/users/import/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await api('GET', '/users/import/not-a-uuid')).status).toBe(400);
    expect(
      (await api('GET', '/users/import/00000000-0000-4000-8000-000000000000', undefined, env.ws.bareKey)).status,
    ).toBe(401);
  });
});

describe('ces import', () => {
  it('imports a file from the command line and prints a summary', async () => {
    await store.put(
      'imports/cli.ndjson',
      Buffer.from([line('cli', 'run', '2024-01-01'), 'nope', line('cli', 'run', '2024-01-02')].join('\n')),
    );
    const name = (
      await env.ctx.pool.query<{ name: string }>('SELECT name FROM workspaces WHERE id = $1', [env.ws.workspaceId])
    ).rows[0]!.name;
    const cliEnv = cliEnvOf(env.config);
    const r = await runCli(['import', 'imports/cli.ndjson', '--workspace', name], cliEnv);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/completed/);
    expect(r.stdout).toMatch(/events applied:\s+2/);
    expect(r.stdout).toMatch(/rejected:\s+1/);
    // A file applied in one batch still reports its rate, not 0 events/s.
    expect(r.stdout).toMatch(/import: 3 records, 2 applied, 1 rejected, [\d.]+ MB read, [1-9]\d* events\/s/);
    expect(await eventsOf('cli')).toEqual([
      { name: 'run', first: '2024-01-01T00:00:00.000Z', last: '2024-01-02T00:00:00.000Z', count: 2 },
    ]);
    const missing = await runCli(['import', 'imports/none.ndjson', '--workspace', name], cliEnv);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/No object "imports\/none\.ndjson"/);
    // A path that is no file here (and could not be a key): said as such, not as the key rules' complaint.
    const noFile = await runCli(['import', './no-such-events.ndjson', '--workspace', name], cliEnv);
    expect(noFile.code).toBe(1);
    expect(noFile.stderr).toMatch(
      /no file \S*no-such-events\.ndjson on this machine, and "\.\/no-such-events\.ndjson" is not a key of the workspace's built-in store/,
    );
    expect(noFile.stderr).not.toMatch(/segments/);
    // A wrong argument records no import: no hint to resume one.
    const noWorkspace = await runCli(['import', 'imports/cli.ndjson'], cliEnv);
    expect(noWorkspace.code).toBe(1);
    expect(noWorkspace.stderr).toMatch(/give the file \(a path, or a key of the store\) and --workspace/);
    expect(noWorkspace.stderr).not.toMatch(/an interrupted import continues/);
  });

  it("imports a file given by its path on this machine, copied into the workspace's store", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'ces-cli-import-'));
    try {
      const file = path.join(dir, 'my events.ndjson');
      await writeFile(
        file,
        [line('by-path', 'signup', '2024-02-01'), line('by-path', 'signup', '2024-02-03')].join('\n'),
      );
      const name = (
        await env.ctx.pool.query<{ name: string }>('SELECT name FROM workspaces WHERE id = $1', [env.ws.workspaceId])
      ).rows[0]!.name;
      const r = await runCli(['import', file, '--workspace', name], cliEnvOf(env.config));
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(
        /copied .*my events\.ndjson into the built-in store of workspace .* as imports\/cli\/\S+-my_events\.ndjson/,
      );
      expect(r.stdout).toMatch(/events applied:\s+2/);
      expect(await eventsOf('by-path')).toEqual([
        { name: 'signup', first: '2024-02-01T00:00:00.000Z', last: '2024-02-03T00:00:00.000Z', count: 2 },
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('prints its version and help without loading the service (ces --version, ces --help)', async () => {
    const { version } = JSON.parse(
      await import('node:fs/promises').then((fs) =>
        fs.readFile(new URL('../../package.json', import.meta.url), 'utf8'),
      ),
    );
    const v = await runCli(['--version'], {});
    expect(v.code).toBe(0);
    expect(v.stdout.trim()).toBe(version);
    const help = await runCli(['--help'], {});
    expect(help.code).toBe(0);
    for (const command of ['serve', 'worker', 'start', 'migrate', 'workspace', 'users', 'import', 'export'])
      expect(help.stdout).toMatch(new RegExp(`\\n  ${command}\\b`));
  });
});

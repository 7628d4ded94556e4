import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { attributesOf, jobRow, latestRun, triggerSync, waitForRun } from '../helpers/cdi.js';
import { waitFor } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * What a source's failure does to a run. A table the role cannot read (42501), or one that does not exist, is a
 * configuration error: the run ends `config_error` at once, in its first attempt, saying why. A connection refused or
 * reset is a passing fault: the run is retried with backoff, and succeeds once the source answers again.
 */

const env = useTestEnv({ workspaces: ['ws'] });
const tag = randomUUID().slice(0, 8);
const SOURCE_SCHEMA = `cdi_err_${tag}`;
const TABLE = `${SOURCE_SCHEMA}.user_updates`;
const ROLE = `ces_cdi_noread_${tag}`;
const URL_ENV = `CES_TEST_CDI_ERR_${tag.toUpperCase()}`;
const NO_READ_ENV = `${URL_ENV}_NOREAD`;
const PROXY_ENV = `${URL_ENV}_PROXY`;
const [NO_READ, MISSING, FLAKY] = [randomUUID(), randomUUID(), randomUUID()];
let warehouse: pg.Client;
const proxies: TcpProxy[] = [];

const urlWith = (user: string, port: number) => {
  const url = new URL(env.config.DATABASE_URL);
  url.username = user;
  url.port = String(port);
  return url.toString();
};

beforeAll(async () => {
  warehouse = new pg.Client({ connectionString: env.config.DATABASE_URL });
  await warehouse.connect();
  await warehouse.query(`CREATE SCHEMA ${SOURCE_SCHEMA}`);
  await warehouse.query(`CREATE TABLE ${TABLE} (updated_at timestamptz NOT NULL, external_id text, payload text)`);
  await warehouse.query(`INSERT INTO ${TABLE} VALUES ('2026-01-01', 'ext-1', '{"tier": "gold"}')`);
  // A role that sees the schema but may not read the table.
  await warehouse.query(`CREATE ROLE ${ROLE} LOGIN`);
  await warehouse.query(`GRANT USAGE ON SCHEMA ${SOURCE_SCHEMA} TO ${ROLE}`);
  const port = Number(new URL(env.config.DATABASE_URL).port || 5432);
  process.env[URL_ENV] = env.config.DATABASE_URL;
  process.env[NO_READ_ENV] = urlWith(ROLE, port);
  const integrations: Array<[string, string, string]> = [
    [NO_READ, NO_READ_ENV, TABLE],
    [MISSING, URL_ENV, `${SOURCE_SCHEMA}.no_such_table`],
    [FLAKY, PROXY_ENV, TABLE],
  ];
  for (const [id, urlEnv, table] of integrations)
    await env.ctx.pool.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, $3, $4)`, [
      id,
      env.ws.workspaceId,
      `errors ${id.slice(0, 8)}`,
      JSON.stringify({ type: 'postgres', url_env: urlEnv, table }),
    ]);
  env.startWorkers([cdiSyncJob]);
});

afterAll(async () => {
  for (const p of proxies) await p.close().catch(() => {});
  await warehouse?.query(`DROP SCHEMA IF EXISTS ${SOURCE_SCHEMA} CASCADE`);
  await warehouse?.query(`DROP OWNED BY ${ROLE}`).catch(() => {});
  await warehouse?.query(`DROP ROLE IF EXISTS ${ROLE}`);
  await warehouse?.end();
  for (const name of [URL_ENV, NO_READ_ENV, PROXY_ENV]) delete process.env[name];
});

describe('CDI source errors', () => {
  it('a table the role may not read: config_error at once, no retry, saying so', async () => {
    await triggerSync(env, env.ws, NO_READ);
    expect(await waitForRun(env, env.ws, NO_READ, 15_000)).toMatchObject({
      job_status: 'config_error',
      rows_synced: 0,
    });
    const job = await jobRow(env, NO_READ);
    expect(job).toMatchObject({ attempts: 1 });
    expect(job.error).toMatch(/permission denied/);
  });

  it('a table that does not exist: config_error at once', async () => {
    await triggerSync(env, env.ws, MISSING);
    expect(await waitForRun(env, env.ws, MISSING, 15_000)).toMatchObject({ job_status: 'config_error' });
    expect(await jobRow(env, MISSING)).toMatchObject({ attempts: 1 });
  });

  it('a connection refused, then reset: retried with backoff, and the run succeeds once the source answers', async () => {
    const port = Number(new URL(env.config.DATABASE_URL).port || 5432);
    // A port nothing listens on: the connection is refused.
    const placeholder = await startTcpProxy(port);
    const freePort = placeholder.port;
    await placeholder.close();
    process.env[PROXY_ENV] = urlWith(new URL(env.config.DATABASE_URL).username || 'postgres', freePort);
    await triggerSync(env, env.ws, FLAKY);
    const attempts = async () => Number((await jobRow(env, FLAKY)).attempts);
    await waitFor(async () => (await attempts()) >= 2, 20_000, 100);
    expect((await latestRun(env, env.ws, FLAKY)).job_status).toBe('running');
    // Then a server that resets every connection at its first bytes.
    const proxy = await startTcpProxy(port, '127.0.0.1', freePort);
    proxies.push(proxy);
    proxy.resetNew = true;
    await waitFor(async () => (await attempts()) >= 3, 30_000, 100);
    expect((await latestRun(env, env.ws, FLAKY)).job_status).toBe('running');
    proxy.resetNew = false;
    expect(await waitForRun(env, env.ws, FLAKY, 60_000)).toMatchObject({ job_status: 'success', rows_synced: 1 });
    expect(await attributesOf(env, env.ws, 'ext-1')).toMatchObject({ tier: 'gold' });
  }, 90_000);
});

import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { appendFile, chown, cp, mkdtemp, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * Redis and PostgreSQL servers of a test's own, on free ports, to stop, kill, wipe and start again. Never the shared
 * ones (6379, 5432): other work uses them. Each server lives in a temporary directory removed by `close`.
 */

const run = promisify(execFile);
const PG_BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';

/**
 * What a test process must not leave behind if a test fails before its `close` (or times out): stopped and removed
 * synchronously when the process exits.
 */
const leftovers = new Set<() => void>();
process.once('exit', () => {
  for (const cleanUp of leftovers) {
    try {
      cleanUp();
    } catch {
      // Best effort: the process is going.
    }
  }
});

/** A TCP port nobody listens on now (the kernel's pick; another process could take it before us, rarely). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > end) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface OwnRedis {
  port: number;
  url: string;
  /** Starts the server (again) on the same port, empty: it keeps nothing on disk. */
  start(): Promise<void>;
  /** SIGKILL: the server is gone at once, its data with it. */
  kill(): Promise<void>;
  /** FLUSHALL: every key gone, the server still up. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A Redis without persistence, as many hosts run it: a restart is a wipe. `bind` other addresses (with the loopback)
 * for clients in other network namespaces.
 */
export async function startOwnRedis(bind: string[] = []): Promise<OwnRedis> {
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), 'ces-own-redis-'));
  let child: ChildProcess | undefined;
  const cli = (...args: string[]) => run('redis-cli', ['-p', String(port), ...args]);
  const ping = async () => (await cli('PING')).stdout.trim() === 'PONG';
  const cleanUp = () => {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  leftovers.add(cleanUp);
  const own: OwnRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      const listen = ['--bind', '127.0.0.1', ...bind, ...(bind.length > 0 ? ['--protected-mode', 'no'] : [])];
      child = spawn(
        'redis-server',
        ['--port', String(port), ...listen, '--save', '', '--appendonly', 'no', '--dir', dir],
        { stdio: 'ignore' },
      );
      await waitUntil(ping, `redis on ${port} answering`);
    },
    async kill() {
      const c = child;
      if (!c || c.exitCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await exited;
    },
    async flush() {
      await cli('FLUSHALL');
    },
    async close() {
      await own.kill();
      await rm(dir, { recursive: true, force: true });
      leftovers.delete(cleanUp);
    },
  };
  await own.start();
  return own;
}

export interface OwnPostgres {
  port: number;
  /** The server's log (statements too, when started with `log_statement`). */
  logFile: string;
  /** Connection string of its `postgres` database. */
  url: string;
  /** Starts the server (again) on the same port and data directory. */
  start(): Promise<void>;
  /** pg_ctl stop: `fast` (clean shutdown) or `immediate` (as a crash: no checkpoint, recovery at the next start). */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  close(): Promise<void>;
}

let template: Promise<string> | undefined;

/** One initdb per test process, copied for each server: initdb costs a second or two, a copy a tenth of that. */
function templateDir(): Promise<string> {
  template ??= (async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'ces-own-pg-template-'));
    leftovers.add(() => rmSync(dir, { recursive: true, force: true }));
    await chown(dir, ...(await postgresIds()));
    await run(
      'runuser',
      [
        '-u',
        'postgres',
        '--',
        path.join(PG_BIN, 'initdb'),
        '-D',
        dir,
        '-A',
        'trust',
        '-U',
        'postgres',
        '--no-sync',
        '-E',
        'UTF8',
      ],
      {
        env: { ...process.env, LC_ALL: 'C' },
      },
    );
    return dir;
  })();
  return template;
}

async function postgresIds(): Promise<[number, number]> {
  const { uid, gid } = await stat('/var/lib/postgresql').catch(async () => {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: g } = await run('id', ['-g', 'postgres']);
    return { uid: Number(stdout), gid: Number(g) };
  });
  return [uid, gid];
}

/**
 * A PostgreSQL 15 of the test's own, in a temporary directory, listening on 127.0.0.1 and a socket in that directory
 * (run as the `postgres` user: the server refuses root).
 */
export async function startOwnPostgres(
  options: { settings?: Record<string, string>; trustNetworks?: string[] } = {},
): Promise<OwnPostgres> {
  const base = await mkdtemp(path.join(tmpdir(), 'ces-own-pg-'));
  const data = path.join(base, 'data');
  const [uid, gid] = await postgresIds();
  await chown(base, uid, gid);
  await cp(await templateDir(), data, { recursive: true });
  // Clients from other network namespaces (test/exports/export-many-hosts.test.ts) connect over these networks.
  if (options.trustNetworks?.length)
    await appendFile(
      path.join(data, 'pg_hba.conf'),
      options.trustNetworks.map((n) => `host all all ${n} trust\n`).join(''),
    );
  await run('chown', ['-R', `${uid}:${gid}`, data]);
  return serveDataDir(base, data, options.settings);
}

/**
 * A hot standby of `primary`, streaming from it (pg_basebackup -R), on its own free port. Replay can be paused and
 * resumed with `SELECT pg_wal_replay_pause()` / `pg_wal_replay_resume()` on the standby.
 */
export async function startOwnReplica(
  primary: OwnPostgres,
  settings: Record<string, string> = {},
): Promise<OwnPostgres> {
  const base = await mkdtemp(path.join(tmpdir(), 'ces-own-pg-replica-'));
  const data = path.join(base, 'data');
  await chown(base, ...(await postgresIds()));
  await run(
    'runuser',
    [
      '-u',
      'postgres',
      '--',
      path.join(PG_BIN, 'pg_basebackup'),
      '-h',
      '127.0.0.1',
      '-p',
      String(primary.port),
      '-U',
      'postgres',
      '-D',
      data,
      '-R',
      '-X',
      'stream',
      '--checkpoint=fast',
      '--no-sync',
    ],
    {
      env: { ...process.env, LC_ALL: 'C' },
    },
  );
  return serveDataDir(base, data, settings);
}

async function serveDataDir(base: string, data: string, settings: Record<string, string> = {}): Promise<OwnPostgres> {
  const port = await freePort();
  const pgCtl = (...args: string[]) =>
    run('runuser', ['-u', 'postgres', '--', path.join(PG_BIN, 'pg_ctl'), '-D', data, ...args], {
      env: { ...process.env, LC_ALL: 'C' },
    });
  const cleanUp = () => {
    try {
      execFileSync(
        'runuser',
        ['-u', 'postgres', '--', path.join(PG_BIN, 'pg_ctl'), '-D', data, '-m', 'immediate', 'stop'],
        { stdio: 'ignore' },
      );
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  };
  leftovers.add(cleanUp);
  const own: OwnPostgres = {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    logFile: path.join(base, 'log'),
    async start() {
      const extra = Object.entries(settings)
        .map(([k, v]) => ` -c ${k}=${v}`)
        .join('');
      await pgCtl(
        '-w',
        '-l',
        path.join(base, 'log'),
        '-o',
        `-p ${port} -k ${base} -c listen_addresses=127.0.0.1 -c fsync=off${extra}`,
        'start',
      );
    },
    async stop(mode = 'fast') {
      await pgCtl('-w', '-m', mode, 'stop').catch((err: unknown) => {
        // Already stopped is fine.
        if (!String((err as { stderr?: string }).stderr ?? '').includes('is the server running')) throw err;
      });
    },
    async close() {
      await own.stop('immediate').catch(() => {});
      await rm(base, { recursive: true, force: true });
      leftovers.delete(cleanUp);
    },
  };
  await own.start();
  return own;
}

export interface OwnRedisCluster {
  ports: number[];
  /** REDIS_CLUSTER_NODES for it. */
  nodes: string;
  /** FLUSHALL on every master: every key gone, the cluster still up. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A Redis Cluster of three masters (no replicas) on free ports, made with `redis-cli --cluster create`, without
 * persistence. Ready when every node reports cluster_state:ok.
 */
export async function startOwnRedisCluster(masters = 3): Promise<OwnRedisCluster> {
  const dir = await mkdtemp(path.join(tmpdir(), 'ces-own-redis-cluster-'));
  const ports: number[] = [];
  while (ports.length < masters) {
    const port = await freePort();
    // A cluster node also listens on port + 10000 (the cluster bus): both must be free.
    if (port + 10000 < 65536 && !ports.includes(port)) ports.push(port);
  }
  const children: ChildProcess[] = [];
  const cleanUp = () => {
    for (const child of children) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  leftovers.add(cleanUp);
  for (const port of ports) {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
    args.push(
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      `nodes-${port}.conf`,
      '--cluster-node-timeout',
      '2000',
    );
    children.push(spawn('redis-server', args, { stdio: 'ignore' }));
  }
  const cli = (port: number, ...args: string[]) => run('redis-cli', ['-p', String(port), ...args]);
  for (const port of ports)
    await waitUntil(
      async () => (await cli(port, 'PING')).stdout.trim() === 'PONG',
      `redis cluster node ${port} answers`,
    );
  await run('redis-cli', [
    '--cluster',
    'create',
    ...ports.map((p) => `127.0.0.1:${p}`),
    '--cluster-replicas',
    '0',
    '--cluster-yes',
  ]);
  for (const port of ports) {
    await waitUntil(
      async () => (await cli(port, 'CLUSTER', 'INFO')).stdout.includes('cluster_state:ok'),
      `redis cluster node ${port} is ok`,
    );
  }
  return {
    ports,
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    async flush() {
      for (const port of ports) await cli(port, 'FLUSHALL');
    },
    async close() {
      cleanUp();
      leftovers.delete(cleanUp);
    },
  };
}

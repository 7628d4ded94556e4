import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { onTestFailed } from 'vitest';
import type { Config } from '../../src/platform/config.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The environment of a `ces` process that works on a test env's schema, Redis keys and local store. */
export function cliEnvOf(config: Config, extra: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    DATABASE_URL: config.DATABASE_URL,
    DATABASE_SCHEMA: config.DATABASE_SCHEMA,
    REDIS_URL: config.REDIS_URL,
    ...(config.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: config.REDIS_CLUSTER_NODES } : {}),
    REDIS_PREFIX: config.REDIS_PREFIX,
    LOCAL_STORE_DIR: config.LOCAL_STORE_DIR,
    ...extra,
  };
}

/**
 * Settings under which the jobs of a killed worker are taken again within seconds rather than a minute and a half
 * (BullMQ's lock and stalled-job check, docs/operations.md): for the tests that kill a worker, in both the killed
 * process's environment and the test env's (the stalled check of the next worker, and the check's own lock in Redis,
 * which the killed worker's interval sets). A lock of 5 s renewed every 2.5 s still holds on a machine busy with the
 * whole suite.
 */
export const QUICK_STALLED_CHECK = { WORKER_LOCK_DURATION_MS: '5000', WORKER_STALLED_INTERVAL_MS: '1000' };

/**
 * The process groups of the `ces` processes this test file spawned: `ces start` has a worker process of its own, which
 * a kill of its parent alone would leave running (and taking jobs, and a core) into every later test.
 */
const cliGroups = new Set<number>();

/** SIGKILLs a spawned `ces` process and every process it started (its process group). */
export function killCliGroup(pid: number): void {
  cliGroups.delete(pid);
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: every process of the group has ended.
  }
}

/** Kills every `ces` process group this file spawned: each file's teardown (test/helpers/kill-cli-children.ts). */
export function killCliChildren(): void {
  for (const pid of [...cliGroups]) killCliGroup(pid);
}
// A test process that ends otherwise (vitest stopped, a fork ended) takes its groups with it too: spawned detached,
// they would not get the terminal's signal. A signal nothing else handles is raised again, to end the process as it
// would have.
process.once('exit', killCliChildren);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    killCliChildren();
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  });
}

/** Whether any process of the process group `pgid` is left (a zombie too: it keeps the id from being reused). */
function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether a process runs (a zombie, ended but not yet reaped, does not). */
export function processRuns(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Spawns `ces <args>` from the TypeScript sources (as `npm run ces` does), as the leader of a process group of its
 * own. The group is killed when the test that spawned it fails (or times out: its body may still be awaiting), and
 * at the end of the file whatever happened.
 */
export function spawnCli(args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'src/cli.ts'), ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const pid = child.pid;
  if (pid === undefined) return child;
  cliGroups.add(pid);
  // Once the group is empty its id may be given to another process: forget it then (a `ces start` killed alone leaves
  // its worker process in the group, which keeps the id ours).
  child.once('exit', () => {
    if (!groupExists(pid)) cliGroups.delete(pid);
  });
  try {
    onTestFailed(() => killCliGroup(pid));
  } catch {
    // Spawned in a hook (beforeAll...), not a test: the file's teardown kills it.
  }
  return child;
}

/** Runs `ces <args>` to completion. */
export function runCli(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, env);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      if (child.pid !== undefined) killCliGroup(child.pid);
      reject(new Error(`ces ${args.join(' ')} timed out\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Resolves once `check` returns true, polling. */
export async function waitFor(
  check: () => Promise<boolean> | boolean,
  timeoutMs = 30_000,
  everyMs = 100,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

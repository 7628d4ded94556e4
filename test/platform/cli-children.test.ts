import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { cliEnvOf, killCliChildren, processRuns, spawnCli, waitFor } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';

/**
 * The `ces` processes a test spawns (test/helpers/cli.ts) do not outlive it when it fails or times out, nor the file
 * in any case: `ces start` with its worker process, the one a kill of the parent alone would leave behind to slow every
 * later test.
 */

const env = useTestEnv();

/** `ces start` over the env's schema, and the pid of its worker process once it has logged it. */
function startService(): { child: ChildProcess; workerPid: () => number | undefined } {
  const port = String(20000 + Math.floor(Math.random() * 20000));
  const child = spawnCli(
    ['start'],
    cliEnvOf(env.config, { PORT: port, HOST: '127.0.0.1', MIGRATE_ON_START: 'false', LOG_LEVEL: 'info' }),
  );
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  const workerPid = () => {
    const line = out.split('\n').find((l) => l.includes('worker process started'));
    return line ? (JSON.parse(line) as { pid: number }).pid : undefined;
  };
  return { child, workerPid };
}

describe('the ces processes a test spawns', () => {
  const ofFailedTest: number[] = [];

  // Fails on purpose (it.fails: the run counts it as passed when it fails), as a test that times out fails.
  it.fails('are killed when the test fails: this test fails on purpose, its `ces start` running', async () => {
    const { child, workerPid } = startService();
    await waitFor(() => workerPid() !== undefined, 30_000);
    ofFailedTest.push(child.pid!, workerPid()!);
    expect(ofFailedTest.every(processRuns)).toBe(true);
    throw new Error('this test fails on purpose');
  });

  it('...: the failed test left neither `ces start` nor its worker process running', async () => {
    expect(ofFailedTest).toHaveLength(2);
    await waitFor(() => !ofFailedTest.some(processRuns), 5_000, 50);
  });

  it("are killed, worker process included, by the file's teardown", async () => {
    const { child, workerPid } = startService();
    await waitFor(() => workerPid() !== undefined, 30_000);
    const pids = [child.pid!, workerPid()!];
    expect(pids.every(processRuns)).toBe(true);
    killCliChildren();
    await waitFor(() => !pids.some(processRuns), 5_000, 50);
  });
});

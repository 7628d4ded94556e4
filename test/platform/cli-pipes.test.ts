import { describe, expect, it } from 'vitest';
import { cliEnvOf, spawnCli, type CliResult } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';

/**
 * `ces ... | head`: the reader of a command's output goes away before the command is done. The command must neither
 * crash on the broken pipe (EPIPE, with a stack trace) nor give up its work: it finishes and exits quietly, with the
 * exit code its work earns.
 */

const env = useTestEnv();

/** Runs `ces <args>` with its stdout a pipe whose reading end is closed at once, as `| head -0` does. */
function runWithClosedStdout(args: string[], extra: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, cliEnvOf(env.config, extra));
    child.stdout!.destroy();
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`ces ${args.join(' ')} timed out\n${stderr}`));
    }, 90_000);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: '', stderr });
    });
  });
}

describe('a command whose reader has gone (ces ... | head)', () => {
  it('ces cdi list: exits 0, without a word about the pipe', async () => {
    const res = await runWithClosedStdout(['cdi', 'list']);
    expect(res.stderr).not.toMatch(/EPIPE|Error/);
    expect(res.code).toBe(0);
  });

  it('ces users generate: finishes the load it was asked for, then exits 0', async () => {
    const { rows } = await env.ctx.pool.query<{ id: string; company: string }>(
      `WITH c AS (INSERT INTO companies (name) VALUES ('Pipes Co') RETURNING id)
       INSERT INTO workspaces (company_id, name) SELECT id, 'Pipes' FROM c RETURNING id, company_id AS company`,
    );
    const res = await runWithClosedStdout([
      'users',
      'generate',
      '--count',
      '300',
      '--seed',
      '3',
      '--workspace',
      'Pipes',
    ]);
    expect(res.stderr).not.toMatch(/EPIPE|Error/);
    expect(res.code).toBe(0);
    const count = await env.ctx.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1`,
      [rows[0]!.id],
    );
    expect(count.rows[0]!.n).toBe(300);
  });

  it('ces --help: exits 0', async () => {
    const res = await runWithClosedStdout(['--help']);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
  });
});

import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, utimes } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeSpoolDir, removeOrphanSpoolDirs } from '../../src/pipelines/exports/shard/spool.js';

let parent: string;

beforeAll(async () => {
  parent = await mkdtemp(path.join(tmpdir(), 'ces-spool-test-'));
});
afterAll(async () => {
  if (parent) await rm(parent, { recursive: true, force: true });
});

describe('export spool directories', () => {
  it('are named after their process; a starting worker removes those of dead processes only', async () => {
    const mine = await makeSpoolDir(parent);
    expect(path.basename(mine)).toMatch(new RegExp(`^ces-export-${process.pid}-`));

    const exited = spawn(process.execPath, ['-e', '']);
    await once(exited, 'exit');
    const dead = path.join(parent, `ces-export-${exited.pid}-abc123`);
    const alive = path.join(parent, `ces-export-${process.ppid}-def456`);
    const oldUnnamed = path.join(parent, 'ces-export-Xy12Zq');
    const newUnnamed = path.join(parent, 'ces-export-Ab34Cd');
    const unrelated = path.join(parent, 'something-else');
    for (const dir of [dead, alive, oldUnnamed, newUnnamed, unrelated]) await mkdir(dir);
    // A spool from before the pid was in the name, untouched for two days.
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    await utimes(oldUnnamed, twoDaysAgo, twoDaysAgo);

    expect(await removeOrphanSpoolDirs(parent)).toBe(2);
    expect((await readdir(parent)).sort()).toEqual(
      [path.basename(mine), path.basename(alive), path.basename(newUnnamed), 'something-else'].sort(),
    );
  });
});

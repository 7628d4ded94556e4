import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * Spool directories: where an export shard keeps the NDJSON of the parts it is cutting
 * (src/pipelines/exports/shard/part-writer.ts). A shard removes its own when it ends; a worker killed mid-shard cannot,
 * so each name carries the pid of the process that made it, and a starting worker removes those of processes that no
 * longer run. (Processes sharing a temporary directory must then share a pid namespace: one machine, or one container.)
 */

const PREFIX = 'ces-export-';
/** The owner's pid in a directory's name: `ces-export-<pid>-<random>`. */
const OWNER = new RegExp(`^${PREFIX}(\\d+)-`);
/** Directories from before the pid was in the name: whose they are is unknown, so only old ones go. */
const UNNAMED_MAX_AGE_MS = 24 * 3600 * 1000;

export function makeSpoolDir(parent = tmpdir()): Promise<string> {
  return mkdtemp(path.join(parent, `${PREFIX}${process.pid}-`));
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes the spool directories left by processes that died; returns how many went. */
export async function removeOrphanSpoolDirs(parent = tmpdir()): Promise<number> {
  const names = (await readdir(parent).catch(() => [] as string[])).filter((n) => n.startsWith(PREFIX));
  let removed = 0;
  for (const name of names) {
    const dir = path.join(parent, name);
    const owner = OWNER.exec(name);
    const orphaned = owner
      ? Number(owner[1]) !== process.pid && !isRunning(Number(owner[1]))
      : Date.now() -
          (await stat(dir).then(
            (s) => s.mtimeMs,
            () => Date.now(),
          )) >
        UNNAMED_MAX_AGE_MS;
    if (!orphaned) continue;
    await rm(dir, { recursive: true, force: true });
    removed++;
  }
  return removed;
}

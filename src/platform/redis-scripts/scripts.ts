import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../lib/package-root.js';
import type { Redis } from '../redis.js';

/**
 * The service's Lua scripts, one file each in this folder, loaded by name as BullMQ keeps its commands: a reader
 * finds a script whole, with its keys and arguments, rather than spliced into a TypeScript string. A line
 * `--- @include "name"` stands for `includes/name.lua` (shared fragments: Redis' clock, the company set's expiry).
 */
export type ScriptName = 'sliding-window' | 'export-hold-acquire' | 'export-hold-renew' | 'export-hold-release';

interface LoadedScript {
  source: string;
  sha: string;
}

const loaded = new Map<ScriptName, LoadedScript>();
// Read from the package's sources, as the migrations are: the build compiles TypeScript only.
const scriptsDir = () => path.join(packageRoot(), 'src', 'platform', 'redis-scripts');
const INCLUDE = /^--- @include "([a-z0-9-]+)"$/gm;

/** A script's text with its includes expanded, and the SHA1 Redis knows it by; read once per process. */
export function redisScript(name: ScriptName): LoadedScript {
  let script = loaded.get(name);
  if (!script) {
    const source = readFileSync(path.join(scriptsDir(), `${name}.lua`), 'utf8').replace(INCLUDE, (_, include: string) =>
      readFileSync(path.join(scriptsDir(), 'includes', `${include}.lua`), 'utf8').trimEnd(),
    );
    script = { source, sha: createHash('sha1').update(source).digest('hex') };
    loaded.set(name, script);
  }
  return script;
}

/**
 * Runs a script by its SHA1 (EVALSHA spares sending the text with every call); a Redis that restarted, was flushed
 * or is a new cluster node answers NOSCRIPT, and the script is sent whole (EVAL), which loads it again.
 */
export async function runScript(redis: Redis, name: ScriptName, keys: string[], args: string[]): Promise<unknown> {
  const { source, sha } = redisScript(name);
  try {
    return await redis.evalsha(sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    return await redis.eval(source, keys.length, ...keys, ...args);
  }
}

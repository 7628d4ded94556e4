import { execFile, execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

/**
 * "Hosts" for tests of work spread over machines: each is a Linux network namespace with its own address, joined to
 * this machine by a veth pair, so that a process started in it reaches our servers only over that link, from that
 * address, as a process on another machine would. Needs root (CAP_NET_ADMIN) and `ip`.
 */

const run = promisify(execFile);

export interface NetnsHost {
  /** The namespace's name (`ip netns exec <name> ...`). */
  name: string;
  /** This machine's address on the link: where the host reaches our servers. */
  gateway: string;
  /** The host's own address: where our servers see it come from. */
  address: string;
  /** Starts a command inside the namespace. */
  spawn(command: string, args: string[], options?: SpawnOptions): ChildProcess;
}

const made = new Set<string>();
process.once('exit', () => {
  for (const name of made) {
    try {
      execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
    } catch {
      // Best effort: the process is going.
    }
  }
});

/** Why network namespaces cannot be made here, or undefined when they can. */
export async function netnsUnavailable(): Promise<string | undefined> {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  const probe = `ces-probe-${randomBytes(3).toString('hex')}`;
  try {
    await run('ip', ['netns', 'add', probe]);
    await run('ip', ['netns', 'del', probe]);
    return undefined;
  } catch (err) {
    return String((err as { stderr?: string }).stderr || (err as Error).message)
      .trim()
      .split('\n')[0];
  }
}

/** `count` hosts on links 10.213.<n>.0/24 (this machine .1, the host .2). */
export async function startNetnsHosts(count: number): Promise<{ hosts: NetnsHost[]; close(): Promise<void> }> {
  const tag = randomBytes(2).toString('hex');
  const hosts: NetnsHost[] = [];
  const ip = (...args: string[]) => run('ip', args);
  try {
    for (let n = 1; n <= count; n++) {
      const name = `ces-host-${tag}-${n}`;
      // Interface names are limited to 15 characters.
      const outside = `cvh${tag}${n}`;
      const inside = `cvn${tag}${n}`;
      const subnet = 200 + ((parseInt(tag, 16) + n) % 50);
      const gateway = `10.213.${subnet}.1`;
      const address = `10.213.${subnet}.2`;
      await ip('netns', 'add', name);
      made.add(name);
      await ip('link', 'add', outside, 'type', 'veth', 'peer', 'name', inside);
      await ip('link', 'set', inside, 'netns', name);
      await ip('addr', 'add', `${gateway}/24`, 'dev', outside);
      await ip('link', 'set', outside, 'up');
      await ip('netns', 'exec', name, 'ip', 'addr', 'add', `${address}/24`, 'dev', inside);
      await ip('netns', 'exec', name, 'ip', 'link', 'set', inside, 'up');
      await ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up');
      hosts.push({
        name,
        gateway,
        address,
        spawn: (command, args, options = {}) => spawn('ip', ['netns', 'exec', name, command, ...args], options),
      });
    }
  } catch (err) {
    for (const h of hosts) await ip('netns', 'del', h.name).catch(() => {});
    throw err;
  }
  return {
    hosts,
    async close() {
      // Deleting a namespace deletes its end of the veth pair, and with it ours.
      for (const h of hosts) {
        await ip('netns', 'del', h.name).catch(() => {});
        made.delete(h.name);
      }
    },
  };
}

import type { Config } from '../platform/config.js';
import { createPool, type Pool } from '../platform/db/pool.js';
import { generateUsers } from '../features/synthetic-users/generate.js';
import { seedServiceIdPrefix } from '../features/synthetic-users/world.js';

/** One past the highest index among the workspace's users of `seed` (0 when it has none). */
async function nextIndexOfSeed(pool: Pool, workspaceId: string, seed: number): Promise<number> {
  const prefix = seedServiceIdPrefix(seed);
  const { rows } = await pool.query<{ top: string | null }>(
    `SELECT max(substr(service_id, 9, 8)) AS top FROM profiles
      WHERE workspace_id = $1 AND service_id LIKE $2 || '%' AND length(service_id) = 24`,
    [workspaceId, prefix],
  );
  return rows[0]!.top === null ? 0 : Number.parseInt(rows[0]!.top, 16) + 1;
}

/** What `ces users generate` does, loaded only when it runs (so that `ces --help` stays fast). */

export type GenerateOptions = {
  count: number;
  workspace: string;
  company?: string;
  seed: number;
  startId?: number;
  topUp?: boolean;
  now?: string;
};

export async function runGenerate(config: () => Config, opts: GenerateOptions): Promise<void> {
  const cfg = config();
  const now = opts.now === undefined ? undefined : new Date(opts.now);
  if (now && Number.isNaN(now.getTime())) fail('--now must be an ISO 8601 time');
  const pool = createPool(cfg, 3);
  try {
    const workspaceId = await findWorkspace(pool, opts.workspace, opts.company);
    let count = opts.count;
    let startId = opts.startId ?? 0;
    if (opts.topUp) {
      const existing = (
        await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1', [
          workspaceId,
        ])
      ).rows[0]!.n;
      if (existing >= count) {
        console.log(
          `workspace "${opts.workspace}" already has ${existing.toLocaleString('en-US')} users; nothing to generate`,
        );
        return;
      }
      // After the highest index of this seed present, not after the count: a user deleted since (the user-data
      // DELETE, a CDI deletion) would otherwise make the next index collide with one that exists.
      startId = opts.startId ?? (await nextIndexOfSeed(pool, workspaceId, opts.seed));
      count -= existing;
    }
    const tty = process.stdout.isTTY;
    const started = Date.now();
    let lastPrinted = 0;
    const result = await generateUsers(pool, {
      workspaceId,
      count,
      seed: opts.seed,
      startId,
      now,
      onProgress: (done, total) => {
        const rate = Math.round(done / ((Date.now() - started) / 1000));
        const line = `generated ${done.toLocaleString('en-US')} / ${total.toLocaleString('en-US')} users (${rate.toLocaleString('en-US')}/s)`;
        if (tty) process.stdout.write(`\r${line}`);
        else if (done === total || done - lastPrinted >= total / 10) {
          console.log(line);
          lastPrinted = done;
        }
      },
    }).catch((err: { code?: string; constraint?: string }) => {
      if (err.code === '23505') {
        fail(
          `users of seed ${opts.seed} from index ${startId} already exist in this workspace (${err.constraint}); ` +
            'nothing was written. Use --start-id to continue after them, --top-up, or another --seed.',
        );
      }
      throw err;
    });
    if (tty) process.stdout.write('\n');
    console.log(
      `created ${result.users.toLocaleString('en-US')} users and ${result.aliases.toLocaleString('en-US')} aliases ` +
        `in workspace "${opts.workspace}" in ${(result.ms / 1000).toFixed(1)} s (seed ${opts.seed}, indexes ${startId}..${startId + count - 1})`,
    );
  } finally {
    await pool.end();
  }
}

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

async function findWorkspace(pool: Pool, name: string, company?: string): Promise<string> {
  const { rows } = await pool.query<{ id: string; company: string }>(
    `SELECT w.id, c.name AS company FROM workspaces w JOIN companies c ON c.id = w.company_id
      WHERE w.name = $1 AND ($2::text IS NULL OR c.name = $2)`,
    [name, company ?? null],
  );
  if (rows.length === 0)
    fail(`no workspace named "${name}"${company ? ` in company "${company}"` : ''}; apply a workspace file first`);
  if (rows.length > 1)
    fail(
      `several companies have a workspace named "${name}" (${rows.map((r) => r.company).join(', ')}); pass --company`,
    );
  return rows[0]!.id;
}

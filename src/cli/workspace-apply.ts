import type { Config } from '../platform/config.js';
import { migrate } from '../platform/db/migrate.js';
import { createPool } from '../platform/db/pool.js';
import { localWorkspaceDir } from '../platform/storage/local-store.js';
import { applyWorkspaceFile, KINDS, type ApplySummary } from '../features/workspace/apply.js';
import { readWorkspaceFile, WorkspaceFileError } from '../features/workspace/parse.js';

/** What `ces workspace apply` does, loaded only when it runs (so that `ces --help` stays fast). */

export type WorkspaceApplyOptions = { migrate: boolean };

export async function runWorkspaceApply(
  config: () => Config,
  fileName: string,
  opts: WorkspaceApplyOptions,
): Promise<void> {
  const cfg = config();
  let file;
  try {
    file = await readWorkspaceFile(fileName);
  } catch (err) {
    exitOnFileError(fileName, err);
  }
  const pool = createPool(cfg, 2);
  try {
    if (opts.migrate) await migrate(pool, cfg.DATABASE_SCHEMA);
    const summary = await applyWorkspaceFile(pool, file).catch((err: unknown) => exitOnFileError(fileName, err));
    printSummary(fileName, summary, cfg.LOCAL_STORE_DIR);
  } finally {
    await pool.end();
  }
}

function exitOnFileError(fileName: string, err: unknown): never {
  if (err instanceof WorkspaceFileError) {
    console.error(`${fileName}: ${err.message}`);
    process.exit(2);
  }
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
    console.error(`${fileName}: no such file`);
    process.exit(2);
  }
  throw err;
}

function printSummary(fileName: string, s: ApplySummary, localStoreDir: string): void {
  console.log(`applied ${fileName}`);
  const width = Math.max(...KINDS.map((k) => k.length));
  console.log(`  ${'kind'.padEnd(width)}  created  updated  unchanged`);
  for (const kind of KINDS) {
    const c = s.counts[kind];
    if (c.created + c.updated + c.unchanged === 0) continue;
    console.log(
      `  ${kind.padEnd(width)}  ${String(c.created).padStart(7)}  ${String(c.updated).padStart(7)}  ${String(c.unchanged).padStart(9)}`,
    );
  }
  // Files to import from the built-in store go here; its exports are found here too (keys are relative to it).
  console.log('\nBuilt-in local store directory of each workspace:');
  for (const [name, workspaceId] of Object.entries(s.workspaceIds)) {
    console.log(`  ${name}: ${localWorkspaceDir(localStoreDir, { companyId: s.companyId, workspaceId })}`);
  }
  if (s.generatedSecrets.length > 0) {
    console.log('\nGenerated secrets (shown this once; only their hashes are stored):');
    for (const g of s.generatedSecrets) {
      const owner =
        g.kind === 'api_key' ? `API key "${g.name}" of workspace "${g.workspace}"` : `SCIM token "${g.name}"`;
      console.log(`  ${owner}: ${g.secret}`);
    }
  }
}

import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The longest files, longest first (seconds, measured a directory at a time with three files at once on the shared
 * 2-core machine, 2026-11-28): most of it waiting on builds, restarts and retries. A list that goes stale only orders
 * worse; `npx vitest run <dir> --reporter=json --outputFile=/tmp/vt.json` gives the figures again. Not here:
 * test/platform/startup.test.ts (105 s, `ces` started a dozen times), whose start-up time limits would then share the
 * cores with demo-stop's builds.
 */
const LONGEST = [
  'test/platform/demo-stop.test.ts', // 274: `npm run demo` twice, each building and migrating
  'test/platform/reconcile-redis-loss.test.ts', // 106
  'test/events/event-export-pg-restart.test.ts', // 86: PostgreSQL away 40 s, longer than a pass's retries
  'test/platform/cli.test.ts', // 76
  'test/events/event-export-redis-loss.test.ts', // 58
  'test/exports/export-crash.test.ts', // 52
  'test/platform/outage-worker.test.ts', // 52
  'test/platform/workspace-apply.test.ts', // 50
  'test/events/event-export-refused.test.ts', // 47
  'test/events/event-export-crash.test.ts', // 47
  'test/platform/outage-pg-connection-loss.test.ts', // 44
  'test/cdi/cdi-crash.test.ts', // 40
];

/**
 * Longest first, so that no long file starts last while the other workers have nothing left to run. Vitest orders by
 * the durations of its last run here (kept under node_modules/.vite); with none, as in CI's clean clone, it orders by
 * file size, which put the longest of all (demo-stop) among the last 35 of 140. Then LONGEST go first, in its order,
 * and the rest as vitest has them.
 */
export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const root = this.ctx.config.root;
    const relative = (file: TestSpecification) => path.relative(root, file.moduleId);
    if (sorted.every((file) => this.ctx.cache.getFileTestResults(`${file.project.name}:${relative(file)}`)))
      return sorted;
    const rank = (file: TestSpecification) => {
      const at = LONGEST.indexOf(relative(file));
      return at === -1 ? LONGEST.length : at;
    };
    return sorted
      .map((file, at) => ({ file, at }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.at - b.at)
      .map(({ file }) => file);
  }
}

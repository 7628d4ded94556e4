import { defineConfig } from 'vitest/config';
import LongestFirst from './test/sequencer.js';
import { CLUSTER_FILES } from './test/cluster-files.js';

/**
 * Files run isolated (a fresh process each): the event-stream files, kept apart since one failed in a full run whose
 * files shared their modules. The cause turned out to be another file's open transaction holding the delivery's
 * horizon (test/events/event-export-bytes.test.ts now waits for it), not module sharing: they may share again.
 */
const ISOLATED = ['test/events/**/*.test.ts'];

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    // Kills, at the end of each file, the `ces` processes it spawned (test/helpers/cli.ts), whatever became of it.
    setupFiles: ['test/helpers/kill-cli-children.ts'],
    pool: 'forks',
    // Two cores, and three files at a time: many files spend most of their time waiting (BullMQ's stalled-job check
    // after a SIGKILL, a restarted PostgreSQL, a flush interval), so a third overlaps those waits; more than three
    // only queue behind PostgreSQL and make timings erratic. One pool for the three projects below.
    maxWorkers: 3,
    // The longest files first (test/sequencer.ts), even where vitest has no timings of its own (CI's clean clone).
    sequence: { sequencer: LongestFirst },
    testTimeout: 60_000,
    hookTimeout: 120_000,
    projects: [
      {
        // Files share their worker's imported modules: re-importing the service for each of 140 files was 471 s of an
        // 823 s run. Each file still has its own schema, Redis prefix, app and workers (helpers/context.ts).
        extends: true,
        test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: ISOLATED, isolate: false },
      },
      { extends: true, test: { name: 'isolated', include: ISOLATED, isolate: true } },
      {
        // Every queue and Lua script again on a 3-master Redis Cluster the run starts on free ports
        // (test/global-setup.ts), in the same pool as the rest so that its files fill the others' waits.
        extends: true,
        test: { name: 'cluster', include: CLUSTER_FILES, isolate: false },
      },
    ],
  },
});
